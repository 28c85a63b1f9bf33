// Benchmark reports in the llama-bench manner: one row per measured configuration, printed as a
// markdown table and optionally written as JSON (a list of row objects) for bench/RESULTS.md and
// scripts. Values keep their type so the JSON stays numeric.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace avdit::bench {

// Times of repeated runs, in milliseconds. Median is the figure we report (TARGETS.md protocol).
struct Timing {
  std::vector<double> ms;
  double median() const;
  double min() const;
  double max() const;
};

// bytes as GiB with two decimals ("9.83"), the unit of the benches' memory columns.
std::string gib(int64_t bytes);
// Now in UTC, "YYYY-MM-DD HH:MM UTC", for a bench's header line.
std::string utc_now();

class Report {
 public:
  explicit Report(std::string title) : title_(std::move(title)) {}
  // Starts a new row; set() then fills its columns (the first row fixes the column order;
  // later rows may add columns).
  void row();
  void set(const std::string& column, const std::string& value);
  void set(const std::string& column, double value, int precision = 3);
  void set(const std::string& column, int64_t value);

  std::string markdown() const;
  nlohmann::json json() const;
  // Prints the markdown table to stdout and, when json_path is not empty, writes the JSON there
  // (atomically).
  void emit(const std::string& json_path) const;

 private:
  std::string title_;
  std::vector<std::string> columns_;
  std::vector<nlohmann::json> rows_;
  std::vector<std::vector<std::string>> text_;  // formatted cells per row, by column index
};

}  // namespace avdit::bench
