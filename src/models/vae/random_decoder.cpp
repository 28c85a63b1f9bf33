// The release-size rules of the five decoders (tiny tensor -> release shape and names, golden
// config -> release config) and the writer of a random folder.
#include "models/vae/random_decoder.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/rng.h"
#include "io/safetensors.h"

namespace avdit::models::vae {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

using Names = std::function<std::vector<std::string>(const std::string&)>;

struct Rule {
  const char* golden;  // the tiny model under golden/
  // Release shape of a tiny tensor (name, shape).
  std::function<Shape(const std::string&, const Shape&)> shape;
  // The names a tiny tensor has in the release: more than one where its stacks are deeper (null:
  // TurboVAED's rule, which needs the tiny model's stack depths).
  Names names;
  // The release's config.json, from the golden's.
  std::function<void(json&)> config;
};

bool starts(const std::string& s, const char* p) { return s.rfind(p, 0) == 0; }

// Maps dims [first, last] of `s` through `m` (values not in m stay).
Shape map_dims(Shape s, const std::vector<std::pair<int64_t, int64_t>>& m, size_t first = 0,
               size_t last = 1) {
  for (size_t i = first; i <= last && i < s.size(); ++i)
    for (const auto& [from, to] : m)
      if (s[i] == from) {
        s[i] = to;
        break;
      }
  return s;
}

std::vector<std::string> same_name(const std::string& n) { return {n}; }

// "<prefix>resnets.<i>.<rest>" -> also "<prefix>resnets.<i + 1>.<rest>" when i is the stack's last
// in the tiny model (TurboVAED's release has one more resnet in every stack: 2,2,2,3,3 vs
// 1,1,1,2,2).
Names turbo_names(std::shared_ptr<std::map<std::string, int64_t>> last) {
  return [last](const std::string& n) {
    std::vector<std::string> out = {n};
    const size_t at = n.find("resnets.");
    if (at == std::string::npos) return out;
    const size_t b = at + 8, e = n.find('.', b);
    const int64_t i = std::stoll(n.substr(b, e - b));
    const std::string prefix = n.substr(0, b);
    if (last->count(prefix) && last->at(prefix) == i)
      out.push_back(prefix + std::to_string(i + 1) + n.substr(e));
    return out;
  };
}

Rule rule(Family f) {
  switch (f) {
    // Wan2.2: dec_dim 4 -> 256 (stage widths 16,16,16,8,4 -> 1024,1024,1024,512,256; the time
    // upsamplers' 2x width 32 -> 2048; the attention's qkv 3 x 16 -> 3,072); z 48, the head's 12
    // and kernels stay.
    case Family::Wan22:
      return {"vae-wan22-tiny",
              [](const std::string& n, const Shape& s) {
                if (n.find("to_qkv") != std::string::npos)
                  return map_dims(map_dims(s, {{48, 3072}}, 0, 0), {{16, 1024}}, 1, 1);
                return map_dims(s, {{4, 256}, {8, 512}, {16, 1024}, {32, 2048}}, 0, 1);
              },
              same_name, [](json& c) { c["WanVAE_kwargs"]["dec_dim"] = 256; }};
    // TurboVAED: block widths 4,8,12,16 -> 64,128,256,512 (2x for the time upsamplers), one more
    // resnet per stack; conv_out keeps its 12 = 3 x 2 x 2 outputs.
    case Family::TurboVaed:
      return {"vae-turbo-tiny",
              [](const std::string& n, const Shape& s) {
                const std::vector<std::pair<int64_t, int64_t>> m = {
                    {4, 64}, {8, 128}, {12, 256}, {16, 512}, {24, 512}, {32, 1024}};
                if (starts(n, "decoder.conv_out.")) return map_dims(s, m, 1, 1);
                return map_dims(s, m, 0, 1);
              },
              nullptr,
              [](json& c) {
                for (const auto& [k, v] : c.at("production_config_as_reported").items())
                  c["config"][k] = v;
              }};
    // Oobleck (Stable Audio Open): channels 4 -> 128 on every channel dim; the first conv's input
    // is the latent (64) and stays.
    case Family::Oobleck:
      return {"vae-sa-audio-tiny",
              [](const std::string& n, const Shape& s) {
                const std::vector<std::pair<int64_t, int64_t>> m = {
                    {4, 128}, {8, 256}, {16, 512}, {32, 1024}, {64, 2048}};
                if (starts(n, "decoder.layers.0.")) return map_dims(s, m, 0, 0);
                return map_dims(s, m, 0, 1);
              },
              same_name,
              [](json& c) {
                std::function<void(json&)> walk = [&](json& j) {
                  if (!j.is_object()) return;
                  if (j.contains("type") && j["type"] == "oobleck" && j.contains("config"))
                    j["config"]["channels"] = 128;
                  for (auto& [k, v] : j.items()) walk(v);
                };
                walk(c);
              }};
    // MiniMax-H3 video ViT: D 32 -> 2048 (qkv 3D, ff 8D in / 4D out), 2 -> 36 blocks; the patch
    // features (3,072), z (24) and the 4 register tokens stay.
    case Family::H3Video:
      return {"vae-h3video-tiny",
              [](const std::string&, const Shape& s) {
                return map_dims(s, {{32, 2048}, {96, 6144}, {128, 8192}, {256, 16384}}, 0,
                                s.size() - 1);
              },
              [](const std::string& n) {
                const char* p = "decoder.transformer_blocks.1.";
                if (!starts(n, p)) return std::vector<std::string>{n};
                std::vector<std::string> out;
                for (int i = 1; i < 36; ++i)
                  out.push_back("decoder.transformer_blocks." + std::to_string(i) + "." +
                                n.substr(std::string(p).size()));
                return out;
              },
              [](json& c) {
                c["source/config.json (tiny)"]["vit_decoder_kwargs"] =
                    c.at("production_vit_decoder_kwargs");
              }};
    // MiniMax-H3 audio (BigVGAN): decoder_dim 128 -> 1024 (every stage x8, down to 8 channels
    // before conv_post), DAC latent_dim 64 -> 2048 between dec_in_proj and conv_pre; the 32 VAE
    // channels, mono conv_post output and the anti-alias filters stay.
    case Family::H3Audio:
      return {"vae-h3audio-tiny",
              [](const std::string& n, const Shape& s) {
                Shape r = s;
                if (n.find(".filter") != std::string::npos) return r;
                if (starts(n, "dec_in_proj.")) {
                  r[0] *= 32;
                  return r;
                }
                if (starts(n, "decoder.conv_post.")) {
                  if (n.find("original1") != std::string::npos) r[1] *= 8;
                  return r;
                }
                if (starts(n, "decoder.activation_post.")) {
                  if (n.find(".act.") != std::string::npos) r[0] *= 8;
                  return r;
                }
                r[0] *= 8;
                if (r.size() == 3 && n.find("original1") != std::string::npos)
                  r[1] *= starts(n, "decoder.conv_pre.") ? 32 : 8;
                return r;
              },
              same_name,
              [](json& c) {
                c["DacAudioVAE_kwargs"]["decoder_dim"] = 1024;
                c["DacAudioVAE_kwargs"]["latent_dim"] = 2048;
              }};
  }
  throw BadInput("random decoder: unknown VAE family");
}

constexpr const char* kMarker = ".avdit-random-complete";

}  // namespace

const char* decoder_size_name(DecoderSize s) { return s == DecoderSize::Tiny ? "tiny" : "release"; }

fs::path golden_decoder(Family f, const fs::path& shared) {
  const fs::path g = shared / "golden" / rule(f).golden;
  std::error_code ec;
  AVDIT_REQUIRE(fs::is_regular_file(g / "model.safetensors", ec) &&
                    fs::is_regular_file(g / "config.json", ec),
                "{}: missing (random {} weights take their tensor names from the golden tiny "
                "model; the shared folder holding golden/ is needed)",
                g.string(), family_name(f));
  return g;
}

json random_decoder_config(Family f, DecoderSize size, const fs::path& shared) {
  json c = read_json(golden_decoder(f, shared) / "config.json");
  if (size == DecoderSize::Release) rule(f).config(c);
  return c;
}

DecoderSize random_decoder_size(Family f, const fs::path& dir, const fs::path& shared) {
  std::error_code ec;
  const fs::path file = dir / "config.json";
  if (fs::is_regular_file(file, ec)) {
    const json c = read_json(file);
    if (c == random_decoder_config(f, DecoderSize::Tiny, shared)) return DecoderSize::Tiny;
    if (c == random_decoder_config(f, DecoderSize::Release, shared)) return DecoderSize::Release;
    // The H3 release's own configs: the video VAE's names its source folder, the audio VAE's its
    // config.yaml; the architecture is the release's.
    if (c.is_object() && ((f == Family::H3Video && c.contains("source_path")) ||
                          (f == Family::H3Audio && c.contains("source_config_path"))))
      return DecoderSize::Release;
  } else if (f == Family::TurboVaed || f == Family::Oobleck || f == Family::Wan22) {
    // MAGI-2's release folders: TurboVAED's architecture JSON, Stable Audio's model_config.json.
    return DecoderSize::Release;
  }
  throw BadInput(fmt::format(
      "{}: random {} weights are made at the golden tiny model's size or the release's; this "
      "folder's config.json is neither (write the folder with `avdit init --pipeline ... "
      "--configs-only`)",
      dir.string(), family_name(f)));
}

bool random_decoder_complete(const fs::path& dir) {
  std::error_code ec;
  return fs::exists(dir / kMarker, ec);
}

void write_random_decoder(Family f, DecoderSize size, const fs::path& shared, const fs::path& dir,
                          uint64_t seed) {
  if (random_decoder_complete(dir)) return;
  const Rule r = rule(f);
  const fs::path golden = golden_decoder(f, shared);
  fs::create_directories(dir);
  const json config = random_decoder_config(f, size, shared);
  const Checkpoint tiny = Checkpoint::open(golden / "model.safetensors");
  const std::vector<std::string> tiny_names = tiny.names();
  const bool release = size == DecoderSize::Release;
  Names names = release ? r.names : Names(same_name);
  if (!names) {  // TurboVAED: the last resnet index of each stack
    auto last = std::make_shared<std::map<std::string, int64_t>>();
    for (const std::string& n : tiny_names) {
      const size_t at = n.find("resnets.");
      if (at == std::string::npos) continue;
      const size_t b = at + 8, e = n.find('.', b);
      const int64_t i = std::stoll(n.substr(b, e - b));
      auto& slot = (*last)[n.substr(0, b)];
      slot = std::max(slot, i);
    }
    names = turbo_names(last);
  }
  std::vector<TensorDecl> decls;
  for (const std::string& n : tiny_names) {
    const Shape s = release ? r.shape(n, tiny.info(n).shape) : tiny.info(n).shape;
    for (const std::string& m : names(n)) decls.push_back({m, s, DType::F32});
  }
  std::sort(decls.begin(), decls.end(),
            [](const TensorDecl& a, const TensorDecl& b) { return a.name < b.name; });
  uint64_t stream = 0;
  write_checkpoint_sharded(
      dir, decls,
      [&](const TensorDecl& d) {
        Tensor t = Tensor::empty(d.shape, DType::F32);
        int64_t fan_in = 1;
        for (size_t i = 1; i < d.shape.size(); ++i) fan_in *= d.shape[i];
        const bool scale = d.shape.size() == 1 && (d.name.find("norm") != std::string::npos ||
                                                   d.name.find("gamma") != std::string::npos);
        if (d.shape.size() >= 2)
          fill_normal(t, seed, ++stream, 0.f, 1.f / std::sqrt(static_cast<float>(fan_in)));
        else
          fill_normal(t, seed, ++stream, scale ? 1.f : 0.f, 0.02f);
        return t;
      },
      // One file: the decoders' loaders open model.safetensors (the H3 ViT's is 9.7 GB in F32).
      int64_t{1} << 50);
  {
    std::ofstream out(dir / "config.json");
    out << config.dump(2);
    out.close();
    AVDIT_CHECK(out.good(), "{}: write failed", (dir / "config.json").string());
  }
  std::ofstream marker(dir / kMarker);
  marker << "complete\n";
  marker.close();
  AVDIT_CHECK(marker.good(), "{}: write failed", (dir / kMarker).string());
}

}  // namespace avdit::models::vae
