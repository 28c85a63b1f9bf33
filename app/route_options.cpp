// The router options of `avdit generate` (see route_options.h).
#include "route_options.h"

#include <fmt/format.h>

#include "analysis/routes/mask.h"
#include "analysis/routes/route_stats.h"
#include "core/error.h"
#include "core/sha256.h"
#include "io/output_file.h"
#include "models/magi2/config.h"

namespace avdit::app {

namespace routes = analysis::routes;

void add_route_options(CLI::App* cmd, RouteCli& a) {
  cmd->add_option("--route-stats", a.stats,
                  "MAGI-2: write router statistics of the run here (.safetensors): selections per "
                  "(MoE layer, head, expert) by modality, CFG pass and step bin, the K-th vs "
                  "(K+1)-th score gap histogram; read by avdit routes");
  cmd->add_option("--route-maps", a.maps,
                  "With --route-stats: also each token's chosen experts at LAYER:HEAD:STEP,... "
                  "(block index, head, 0-based step)");
  cmd->add_option("--expert-mask", a.mask,
                  "MAGI-2: an expert mask from avdit routes mask; masked experts get a large "
                  "negative router bias and are never chosen");
}

RouteRun::RouteRun(const RouteCli& a, bool magi2, const std::string& model,
                   const nlohmann::json& dit_config,
                   const std::vector<std::filesystem::path>& inputs,
                   const std::vector<std::pair<std::string, std::string>>& outputs)
    : a_(a) {
  if (!a.any()) return;
  AVDIT_REQUIRE(magi2,
                "--route-stats, --route-maps and --expert-mask act on MAGI-2's router; {} is not a "
                "MAGI-2 model",
                model);
  AVDIT_REQUIRE(a.maps.empty() || !a.stats.empty(),
                "--route-maps needs --route-stats FILE (the maps are written into it)");
  std::vector<std::filesystem::path> in = inputs;
  if (!a.mask.empty()) {
    in.push_back(a.mask);
    const routes::ExpertMask mask = routes::read_expert_mask(a.mask);
    bias_ = routes::mask_router_bias(mask, models::magi2::parse_magi2_config(dit_config), a.mask);
  }
  if (!a.stats.empty()) {
    check_output_path(a.stats, "--route-stats", in);
    for (const auto& [path, option] : outputs)
      if (!path.empty()) check_distinct_outputs(a.stats, "--route-stats", path, option);
    recorder_ = std::make_unique<routes::RouteRecorder>(
        a.maps.empty() ? std::vector<routes::RouteMapPoint>{} : routes::parse_route_maps(a.maps));
  }
}

RouteRun::~RouteRun() = default;

OutputFile* RouteRun::write(ops::Context& ctx) {
  if (!recorder_) return nullptr;
  const routes::RouteStats s = recorder_->finish(ctx);
  int64_t selections = 0;
  for (int64_t i = 0; i < s.counts.numel(); ++i) selections += s.counts.data<int64_t>()[i];
  counts_sha_ = sha256_hex(s.counts);
  summary_ = fmt::format("route statistics: {} selections ({}), {} route maps; counts sha256 {}",
                         selections, s.shape.str(), s.maps.size(), counts_sha_);
  out_ = std::make_unique<OutputFile>(a_.stats);
  routes::write_route_stats(*out_, s);
  return out_.get();
}

nlohmann::json RouteRun::json() const {
  nlohmann::json j = nlohmann::json::object();  // merged into the run's summary, even when empty
  if (!a_.stats.empty()) j["route_stats"] = {{"file", a_.stats}, {"counts_sha256", counts_sha_}};
  if (!a_.mask.empty()) j["expert_mask"] = a_.mask;
  return j;
}

}  // namespace avdit::app
