// A candidate of `avdit score`: a name and a set of `avdit generate` options (the knobs whose cost
// is measured), parsed before any work so that an unknown option or a bad value exits 2 at once.
// Two score-only options exist for calibration: a planted velocity perturbation of known size and
// the velocity rounded to bf16 (H3's floor: the dense model has no MoE combine).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "ops/moe.h"

namespace avdit::score {

struct Knobs {
  bool nvfp4_experts = false;                               // --nvfp4-experts (MAGI-2)
  ops::CombineSum moe_combine = ops::CombineSum::ByOutput;  // --moe-combine bf16|fp32 (MAGI-2)
  bool nvfp4_expert_inputs = false;      // --nvfp4-expert-inputs (MAGI-2): fake NVFP4 activations
  std::string expert_mask;               // --expert-mask FILE (MAGI-2)
  std::optional<std::string> precision;  // --precision fp32|bf16 (default: the run's)
  std::string step_cache;                // --step-cache POLICY (sample/step_cache.h), both families
  std::string fp8_gemm;                  // --fp8-gemm tensor|row (H3): the block GEMMs in e4m3
  bool fp8_attention = false;            // --fp8-attention (H3): the attention cores in e4m3
  // Score-only:
  bool velocity_bf16 = false;   // --velocity-bf16: each model output rounded once to bf16
  double perturb_velocity = 0;  // --perturb-velocity EPS: a random direction of norm EPS |v|
                                // added to the guided velocity of every step
  bool magi2_only() const {
    return nvfp4_experts || moe_combine != ops::CombineSum::ByOutput || nvfp4_expert_inputs ||
           !expert_mask.empty();
  }
};

struct Candidate {
  std::string name;
  std::string options;              // as given
  std::vector<std::string> tokens;  // one canonical "--option value" per option, sorted
  Knobs knobs;
};

// The options a candidate may set, for messages and --help.
std::string candidate_option_list();

// "NAME=OPTIONS" (OPTIONS may be empty: the teacher's own settings). BadInput, one line naming the
// candidate and the option, for a bad name, an unknown option, a repeated option or a bad value.
Candidate parse_candidate(const std::string& spec);

// The built-in floor: MAGI-2, the MoE combine summed in bf16 instead of fp32 (in fp32 when the
// activations are bf16, whose default combine is the bf16 running sum); H3 (no MoE), the model's
// velocity rounded once to bf16. A kernel-precision difference every knob is compared with.
Candidate floor_candidate(bool magi2, const std::string& precision);

// Candidates whose options are exactly the disjoint union of two others' (for the quadrature
// check): {combined, a, b} index triples.
struct Combination {
  size_t combined, a, b;
};
std::vector<Combination> find_combinations(const std::vector<Candidate>& candidates);

}  // namespace avdit::score
