// Expert masks from router statistics (`avdit routes mask`) and their use (`avdit generate
// --expert-mask`): per (MoE layer, head) the N experts a ranking rule keeps; the others get a large
// negative router bias, so they never enter the top K and the kept choices' weights renormalise
// among themselves (the router's weights come from the unbiased scores of the chosen experts).
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "analysis/routes/route_stats.h"
#include "core/tensor.h"
#include "models/magi2/config.h"

namespace avdit::analysis::routes {

enum class KeepRule {
  Global,    // by the expert's selections over every token (its utilisation)
  Modality,  // by the largest share the expert has of one modality's selections
};
// "global" | "modality"; BadInput naming --rule otherwise.
KeepRule parse_keep_rule(const std::string& name);
const char* keep_rule_name(KeepRule rule);

// The experts of MoE layer l (ordinal), head h, best first by the rule; ties go to the expert with
// more selections overall, then to the lower index (a fixed order).
std::vector<int64_t> rank_experts(const RouteStats& s, int64_t l, int64_t h, KeepRule rule);

// Added to a masked expert's biased score: far below any sigmoid or softmax score plus a
// checkpoint's bias, finite so that the arithmetic stays ordinary.
inline constexpr float kMaskBias = -1.0e9f;

struct ExpertMask {
  RouteShape shape;  // of the statistics it was made from
  Tensor keep;       // U8 [moe_layers, heads, experts]: 1 kept, 0 masked
  KeepRule rule = KeepRule::Global;
  int64_t kept = 0;  // experts kept per head
};

// The top `keep` experts of every (layer, head) by `rule`. BadInput naming --keep unless
// top_k <= keep <= experts.
ExpertMask make_expert_mask(const RouteStats& s, int64_t keep, KeepRule rule);

// File form (safetensors): keep U8 [L, H, E], layers I64 [L]; metadata format
// "avdit.expert_mask", version, heads, experts, top_k, rule, kept. Written atomically.
void write_expert_mask(const std::filesystem::path& path, const ExpertMask& mask);
// BadInput naming the file and the tensor or field that is missing or of the wrong shape, or a
// head that keeps fewer than top_k experts.
ExpertMask read_expert_mask(const std::filesystem::path& path);

// What the mask adds to the router bias of a model with this config, by block index: F32 [heads *
// experts], 0 for kept experts, kMaskBias for masked ones. BadInput naming `file` when the mask's
// layers, heads, experts or top_k are not the model's.
std::map<int64_t, Tensor> mask_router_bias(const ExpertMask& mask,
                                           const models::magi2::Magi2Config& config,
                                           const std::string& file);

}  // namespace avdit::analysis::routes
