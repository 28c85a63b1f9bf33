#include "bench/report.h"

#include <fmt/format.h>

#include <algorithm>
#include <ctime>
#include <cstdio>

#include "core/error.h"
#include "io/output_file.h"

namespace avdit::bench {

double Timing::median() const {
  AVDIT_CHECK(!ms.empty(), "median of no timings");
  std::vector<double> v = ms;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}
double Timing::min() const { return *std::min_element(ms.begin(), ms.end()); }
double Timing::max() const { return *std::max_element(ms.begin(), ms.end()); }

void Report::row() {
  rows_.emplace_back(nlohmann::json::object());
  text_.emplace_back(columns_.size());
}

namespace {
size_t column_index(std::vector<std::string>& columns, const std::string& name) {
  auto it = std::find(columns.begin(), columns.end(), name);
  if (it != columns.end()) return static_cast<size_t>(it - columns.begin());
  columns.push_back(name);
  return columns.size() - 1;
}
}  // namespace

void Report::set(const std::string& column, const std::string& value) {
  AVDIT_CHECK(!rows_.empty(), "Report::set before Report::row");
  const size_t i = column_index(columns_, column);
  if (text_.back().size() <= i) text_.back().resize(i + 1);
  text_.back()[i] = value;
  rows_.back()[column] = value;
}

void Report::set(const std::string& column, double value, int precision) {
  set(column, fmt::format("{:.{}f}", value, precision));
  rows_.back()[column] = value;
}

void Report::set(const std::string& column, int64_t value) {
  set(column, fmt::format("{}", value));
  rows_.back()[column] = value;
}

std::string Report::markdown() const {
  std::string s = fmt::format("### {}\n\n|", title_);
  for (const auto& c : columns_) s += fmt::format(" {} |", c);
  s += "\n|";
  for (size_t i = 0; i < columns_.size(); ++i) s += "---|";
  s += "\n";
  for (const auto& r : text_) {
    s += "|";
    for (size_t i = 0; i < columns_.size(); ++i) s += fmt::format(" {} |", i < r.size() ? r[i] : "");
    s += "\n";
  }
  return s;
}

nlohmann::json Report::json() const {
  nlohmann::json j;
  j["title"] = title_;
  j["rows"] = rows_;
  return j;
}

void Report::emit(const std::string& json_path) const {
  std::fputs(markdown().c_str(), stdout);
  std::fflush(stdout);
  if (json_path.empty()) return;
  write_file_atomic(json_path, json().dump(2) + "\n");
}

std::string gib(int64_t bytes) { return fmt::format("{:.2f}", bytes / double(int64_t{1} << 30)); }

std::string utc_now() {
  char date[32];
  const std::time_t now = std::time(nullptr);
  std::strftime(date, sizeof date, "%Y-%m-%d %H:%M UTC", std::gmtime(&now));
  return date;
}

}  // namespace avdit::bench
