// RangeMonitor: the probe behind `--range-report` (issue 37, MiniMax-H3 in fp16). It attaches to
// every site of every block (each linear's output, the attention output, the gating product, the
// residual) and, for every model call (a stack.input) of every step, records max |x| over the
// finite values and the count of non-finite values with ops::range_stats into slots on the model's
// context: nothing is sampled and nothing comes back to the host until summary(). Coverage is
// counted, never assumed: a margin to the fp16 ceiling is stated only when every (call, block,
// site) was seen (a step cache that skips blocks leaves sites unseen, and then no margin is given).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/observer.h"
#include "core/tensor.h"

namespace avdit::analysis::ranges {

// The largest finite fp16 value: the ceiling a margin is measured against.
inline constexpr double kF16Max = 65504.0;

// A kind of site: its short name and the block's point pattern ("block{}_qkv").
struct RangeSite {
  std::string name;
  const char* point = "";
};

// MiniMax-H3's seven sites per block, in the order a block runs them (models/h3/model.cpp): the qkv
// GEMM, the attention core, out_proj, fc1, the SwiGLU gating product, fc2, the residual stream.
std::vector<RangeSite> h3_range_sites();

// Where a value was seen. step: the sampler's step (-1: a lone forward); call: the model call
// within the step (0 the conditional pass, 1 the unconditional one); row: a non-finite's index
// along the site tensor's first dimension (H3: the packed sequence row, i.e. the token).
struct RangeAt {
  int64_t step = -1, call = -1, block = -1, row = -1;
  std::string site;
  std::string str() const;  // "step 3, call 1, block 49, mlp_out" (+ ", row 12")
};

struct SiteRange {
  std::string site;
  int64_t seen = 0, expected = 0;  // (call, block) pairs
  double max_abs = 0;              // over what was seen
  RangeAt max_at;
  int64_t nonfinite = 0;
  std::vector<double> max_by_block;  // max over the calls, per block (0 where never seen)
};

struct RangeSummary {
  int64_t blocks = 0, calls = 0, steps = 0;  // calls: stack.inputs seen; steps: distinct steps
  int64_t covered = 0, expected = 0;         // sites: expected = blocks x site kinds x calls
  std::vector<SiteRange> sites;
  double max_abs = 0;
  RangeAt max_at;
  int64_t nonfinite = 0;
  std::optional<RangeAt> first_nonfinite;  // in the order the run computed them
  std::optional<RangeAt> first_missing;    // the first (call, block, site) not seen
  // Per call: step, call, and max |x| per [block][site] (NaN where not seen).
  struct Call {
    int64_t step = -1, call = -1;
    std::vector<double> max_abs;
  };
  std::vector<Call> per_call;

  bool full() const { return expected > 0 && covered == expected; }
  // Why no margin is stated ("" when one is): sites not seen, or non-finite values.
  std::string margin_refusal() const;
  // kF16Max / max |x| (overall, or of one site kind); nullopt whenever margin_refusal() says why.
  std::optional<double> margin() const;
  std::optional<double> margin(const SiteRange& s) const;
};

class RangeMonitor final : public Probe {
 public:
  RangeMonitor(std::vector<RangeSite> sites, int64_t blocks);

  bool wants(const Point& p) const override;
  void on(ops::Context& ctx, const Point& p, Tensor& t) override;

  // After the run: the slots come back (one download per page of slots) and are summed up.
  // RuntimeFailure when a site was shown with a block index outside [0, blocks) or before any
  // stack.input.
  RangeSummary summary(ops::Context& ctx);

  const std::vector<RangeSite>& sites() const { return sites_; }
  int64_t blocks() const { return blocks_; }

 private:
  struct Record {
    int64_t call = 0, block = 0, site = 0;
  };
  std::vector<RangeSite> sites_;
  int64_t blocks_;
  int64_t step_ = -1, call_in_step_ = -1;
  std::vector<std::pair<int64_t, int64_t>> calls_;  // (step, call within the step)
  std::vector<Record> records_;                     // slot k holds records_[k]
  std::vector<Tensor> pages_;                       // F32 [kPage, kRangeSlotWidth] on the context
};

// "range monitor: covered N of N sites ..." and, with full coverage, the margin per site kind and
// overall; the first non-finite value. Several lines, no trailing newline.
std::string render_text(const RangeSummary& s);
nlohmann::json to_json(const RangeSummary& s);
// FILE.json and the PNG beside it (max |x| by block, one series per site kind, log y axis, the
// fp16 ceiling drawn as a flat series); the PNG is skipped (returned false) in a build without a
// PNG writer.
bool write_range_png(const std::string& path, const RangeSummary& s);
void write_range_json(const std::string& path, const RangeSummary& s);

}  // namespace avdit::analysis::ranges
