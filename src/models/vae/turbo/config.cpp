// TurboVaedConfig::from_json: every field this forward depends on, checked by name.
#include "models/vae/turbo/config.h"

#include "core/error.h"

namespace avdit::models::vae::turbo {
namespace {

template <class T>
T field(const nlohmann::json& j, const char* name, T fallback) {
  if (!j.contains(name)) return fallback;
  try {
    return j.at(name).get<T>();
  } catch (const nlohmann::json::exception&) {
    throw BadInput(
        fmt::format("TurboVAED config: '{}' has the wrong type ({})", name, j.at(name).dump()));
  }
}

}  // namespace

TurboVaedConfig TurboVaedConfig::from_json(const nlohmann::json& in) {
  AVDIT_REQUIRE(in.is_object(), "TurboVAED config: expected a JSON object");
  const nlohmann::json& j =
      in.contains("config") && in.at("config").is_object() ? in.at("config") : in;
  TurboVaedConfig c;
  c.latent_channels = field(j, "latent_channels", c.latent_channels);
  c.out_channels = field(j, "out_channels", c.out_channels);
  c.decoder_block_out_channels =
      field(j, "decoder_block_out_channels", c.decoder_block_out_channels);
  c.decoder_layers_per_block = field(j, "decoder_layers_per_block", c.decoder_layers_per_block);
  c.decoder_spatio_temporal_scaling =
      field(j, "decoder_spatio_temporal_scaling", c.decoder_spatio_temporal_scaling);
  c.decoder_spatio_only = field(j, "decoder_spatio_only", c.decoder_spatio_only);
  c.patch_size = field(j, "patch_size", c.patch_size);
  c.resnet_norm_eps = field(j, "resnet_norm_eps", c.resnet_norm_eps);
  c.first_chunk_size = field(j, "first_chunk_size", c.first_chunk_size);
  c.step_size = field(j, "step_size", c.step_size);
  c.temporal_compression_ratio =
      field(j, "temporal_compression_ratio", c.temporal_compression_ratio);
  const size_t n = c.decoder_block_out_channels.size();
  AVDIT_REQUIRE(c.latent_channels == 48,
                "TurboVAED config: latent_channels is {}, expected 48 (Wan2.2 latents)",
                c.latent_channels);
  AVDIT_REQUIRE(c.out_channels == 3, "TurboVAED config: out_channels is {}, expected 3",
                c.out_channels);
  AVDIT_REQUIRE(n > 0 && c.decoder_layers_per_block.size() == n + 1 &&
                    c.decoder_spatio_temporal_scaling.size() == n &&
                    c.decoder_spatio_only.size() == n,
                "TurboVAED config: decoder_block_out_channels ({}), decoder_layers_per_block ({}), "
                "decoder_spatio_temporal_scaling ({}) and decoder_spatio_only ({}) do not match",
                n, c.decoder_layers_per_block.size(), c.decoder_spatio_temporal_scaling.size(),
                c.decoder_spatio_only.size());
  for (int64_t v : c.decoder_block_out_channels)
    AVDIT_REQUIRE(v > 0, "TurboVAED config: decoder_block_out_channels has {}", v);
  for (int64_t v : c.decoder_layers_per_block)
    AVDIT_REQUIRE(v >= 0, "TurboVAED config: decoder_layers_per_block has {}", v);
  AVDIT_REQUIRE(c.patch_size == 2 && field(j, "use_unpatchify", false),
                "TurboVAED config: only patch_size 2 with use_unpatchify true is computed (the "
                "release's); got patch_size {}",
                c.patch_size);
  AVDIT_REQUIRE(!field(j, "decoder_causal", false),
                "TurboVAED config: decoder_causal true is not a TurboVAED (the reference asserts "
                "it false)");
  for (bool dw : field(j, "decoder_is_dw_conv", std::vector<bool>{}))
    AVDIT_REQUIRE(!dw,
                  "TurboVAED config: depthwise convolutions (decoder_is_dw_conv) are not "
                  "computed (the release has none)");
  AVDIT_REQUIRE(field(j, "patch_size_t", int64_t{1}) == 1,
                "TurboVAED config: patch_size_t must be 1");
  AVDIT_REQUIRE(c.first_chunk_size >= 1 && c.step_size >= 1,
                "TurboVAED config: first_chunk_size {} and step_size {} must be >= 1",
                c.first_chunk_size, c.step_size);
  AVDIT_REQUIRE(c.temporal_compression_ratio == 4,
                "TurboVAED config: temporal_compression_ratio is {}, expected 4",
                c.temporal_compression_ratio);
  AVDIT_REQUIRE(c.resnet_norm_eps > 0, "TurboVAED config: resnet_norm_eps must be > 0");
  return c;
}

}  // namespace avdit::models::vae::turbo
