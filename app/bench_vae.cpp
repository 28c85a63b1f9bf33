// `avdit bench vae`: one latent decoder at its release size (random weights) on a clip of the
// given size: time, peak host and GPU-pool memory, frames (or audio seconds) per second. The
// full-size checkpoint is the golden tiny model's tensors at the release's widths and depths
// (the loader checks every shape against the config, so a wrong rule fails loudly). Where a full
// CPU decode would take too long, decodes of one and two chunks are timed on a cropped latent and
// extrapolated over frames and area; the output says so.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/report.h"
#include "bench_commands.h"
#include "context.h"
#include "core/error.h"
#include "core/host_memory.h"
#include "core/log.h"
#include "core/rng.h"
#include "io/safetensors.h"
#include "models/vae/decoder_factory.h"
#include "ops/context.h"

namespace avdit::app {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using models::vae::Decoder;

struct VaeBenchOptions {
  std::string decoder, device = "cpu", precision = "fp32";
  // The decoded clip: video frames and size (540p on the 16-pixel grid, 10 s at 24 fps), audio
  // seconds.
  int64_t frames = 241, height = 544, width = 960;
  double seconds = 10;
  std::string estimate = "auto";  // auto, always, never
  int64_t max_area = 17 * 30;     // latent cells per frame an estimate decodes at most
  int iters = 1, warmup = -1;     // warmup -1: 1 on the GPU, 0 on the CPU
  std::string shared = AVDIT_SHARED_DIR, work;
  uint64_t seed = 0;
  std::string json;
};

// --- the full-size checkpoint ---

struct Family {
  const char* name;    // --decoder
  const char* golden;  // the tiny model under golden/
  bool video;
  // Production shape of a tiny tensor (name, shape).
  std::function<Shape(const std::string&, const Shape&)> shape;
  // The names a tiny tensor has in the release: more than one where its stacks are deeper (null:
  // TurboVAED's rule, which needs the tiny model's stack depths).
  std::function<std::vector<std::string>(const std::string&)> names;
  // The config.json the decoder reads, from the golden's.
  std::function<void(json&)> config;
};

// Part of the default weights folder's name: bump it when a rule below changes, so that a folder
// made by an older rule is not reused.
constexpr int kWeightsVersion = 1;

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
std::function<std::vector<std::string>(const std::string&)> turbo_names(
    std::shared_ptr<std::map<std::string, int64_t>> last) {
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

std::vector<Family> families() {
  std::vector<Family> f;
  // Wan2.2: dec_dim 4 -> 256 (stage widths 16,16,16,8,4 -> 1024,1024,1024,512,256; the time
  // upsamplers' 2x width 32 -> 2048; the attention's qkv 3 x 16 -> 3,072); z 48, the head's 12 and
  // kernels stay.
  f.push_back({"wan22", "vae-wan22-tiny", true,
               [](const std::string& n, const Shape& s) {
                 if (n.find("to_qkv") != std::string::npos)
                   return map_dims(map_dims(s, {{48, 3072}}, 0, 0), {{16, 1024}}, 1, 1);
                 return map_dims(s, {{4, 256}, {8, 512}, {16, 1024}, {32, 2048}}, 0, 1);
               },
               same_name, [](json& c) { c["WanVAE_kwargs"]["dec_dim"] = 256; }});
  // TurboVAED: block widths 4,8,12,16 -> 64,128,256,512 (2x for the time upsamplers), one more
  // resnet per stack; conv_out keeps its 12 = 3 x 2 x 2 outputs.
  f.push_back({"turbo", "vae-turbo-tiny", true,
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
               }});
  // Oobleck (Stable Audio Open): channels 4 -> 128 on every channel dim; the first conv's input
  // is the latent (64) and stays.
  f.push_back({"oobleck", "vae-sa-audio-tiny", false,
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
               }});
  // MiniMax-H3 video ViT: D 32 -> 2048 (qkv 3D, ff 8D in / 4D out), 2 -> 36 blocks; the patch
  // features (3,072), z (24) and the 4 register tokens stay.
  f.push_back(
      {"h3video", "vae-h3video-tiny", true,
       [](const std::string&, const Shape& s) {
         return map_dims(s, {{32, 2048}, {96, 6144}, {128, 8192}, {256, 16384}}, 0, s.size() - 1);
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
       }});
  // MiniMax-H3 audio (BigVGAN): decoder_dim 128 -> 1024 (every stage x8, down to 8 channels
  // before conv_post), DAC latent_dim 64 -> 2048 between dec_in_proj and conv_pre; the 32 VAE
  // channels, mono conv_post output and the anti-alias filters stay.
  f.push_back({"h3audio", "vae-h3audio-tiny", false,
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
               }});
  return f;
}

const Family& family_of(const std::string& name) {
  static const std::vector<Family> all = families();
  for (const Family& f : all)
    if (name == f.name) return f;
  throw BadInput(
      fmt::format("--decoder {}: expected wan22, turbo, h3video, h3audio or oobleck", name));
}

// Writes the full-size folder (config.json, model safetensors) into `dir` unless a complete one is
// there (the marker is written last). Values: normal, std 1/sqrt(fan-in) for matrices and
// kernels, 1 + 0.02 noise for 1-D scales, 0.02 noise for biases and the rest.
void write_full_size(const Family& f, const fs::path& golden, const fs::path& dir, uint64_t seed) {
  const fs::path done = dir / ".avdit-bench-complete";
  std::error_code ec;
  if (fs::exists(done, ec)) return;
  fs::create_directories(dir);
  json config = read_json(golden / "config.json");
  f.config(config);
  const Checkpoint tiny = Checkpoint::open(golden / "model.safetensors");
  std::vector<std::string> tiny_names = tiny.names();
  std::function<std::vector<std::string>(const std::string&)> names = f.names;
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
    const Shape s = f.shape(n, tiny.info(n).shape);
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
  }
  std::ofstream(done) << "complete\n";
}

// --- the clip ---

struct Clip {
  Shape latent;                               // what decode() takes
  int64_t latent_frames = 0, lh = 0, lw = 0;  // video: latent time and cells; audio: frames
  int64_t chunk = 1;                          // latent frames of one decode step (estimates)
};

Clip clip_for(const std::string& d, const VaeBenchOptions& o) {
  Clip c;
  if (d == "oobleck" || d == "h3audio") {
    // Oobleck: 44.1 kHz, hop 2 x 4 x 4 x 8 x 8 = 2,048, latents [T, 64]; H3 audio: 32 kHz, hop
    // 5 x 5 x 2^5 = 800, latents [1, 32, T].
    const double rate = d == "oobleck" ? 44100 : 32000, hop = d == "oobleck" ? 2048 : 800;
    AVDIT_REQUIRE(o.seconds > 0 && o.seconds <= 3600, "--seconds {}: expected (0, 3600]",
                  o.seconds);
    c.latent_frames = std::max<int64_t>(1, static_cast<int64_t>(std::ceil(o.seconds * rate / hop)));
    c.latent = d == "oobleck" ? Shape{c.latent_frames, 64} : Shape{1, 32, c.latent_frames};
    c.chunk = c.latent_frames;
    return c;
  }
  AVDIT_REQUIRE(o.frames >= 1 && (o.frames - 1) % 4 == 0,
                "--frames {}: the video VAEs decode 1 + 4k frames (4 per latent frame)", o.frames);
  AVDIT_REQUIRE(o.height >= 16 && o.height % 16 == 0 && o.width >= 16 && o.width % 16 == 0,
                "--height {} --width {}: multiples of 16 (one latent cell is 16 x 16 pixels)",
                o.height, o.width);
  c.latent_frames = 1 + (o.frames - 1) / 4;
  c.lh = o.height / 16;
  c.lw = o.width / 16;
  // The H3 ViT decodes temporal chunks of 5 latent frames after a 3-frame token drop: at least 3.
  AVDIT_REQUIRE(d != "h3video" || c.latent_frames >= 3,
                "--frames {}: the H3 video VAE decodes at least 3 latent frames (--frames 9)",
                o.frames);
  const int64_t z = d == "h3video" ? 24 : 48;
  c.latent = {1, z, c.latent_frames, c.lh, c.lw};
  // One decode step in latent frames: Wan2.2's causal chunks (1), TurboVAED's windows (7), the H3
  // ViT's temporal chunk (17 frames = 5 latent frames).
  c.chunk = d == "wan22" ? 1 : d == "turbo" ? 7 : 5;
  return c;
}

Tensor random_latent(const Shape& s, uint64_t seed) {
  Tensor t = Tensor::empty(s, DType::F32);
  fill_normal(t, seed, 1000, 0.f, 1.f);
  return t;
}

struct Measured {
  double seconds = 0;
  int64_t host_peak = 0, pool_peak = 0;
  Shape out;
};

Measured measure(ops::Context& ctx, const Decoder& dec, const Tensor& z, int warmup, int iters) {
  for (int i = 0; i < warmup; ++i) dec.decode(z);
  std::vector<double> t;
  Measured m;
  reset_host_rss_peak();
  ctx.reset_pool_peak();
  for (int i = 0; i < iters; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    const Tensor out = dec.decode(z);  // F32 on the host: the upload, decode and download
    t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    m.out = out.shape();
  }
  m.host_peak = host_rss_peak();
  m.pool_peak = ctx.pool_peak();
  std::sort(t.begin(), t.end());
  m.seconds = t[t.size() / 2];
  return m;
}

int run(const VaeBenchOptions& o) {
  const Family& f = family_of(o.decoder);
  AVDIT_REQUIRE(o.precision == "fp32" || f.video,
                "--precision {}: the {} decoder runs in F32 only; bf16 is the video decoders' "
                "(wan22, turbo, h3video)",
                o.precision, o.decoder);
  AVDIT_REQUIRE(o.iters >= 1 && o.iters <= 100, "--iters {}: expected 1..100", o.iters);
  AVDIT_REQUIRE(o.max_area >= 1, "--max-area {}: expected at least 1 latent cell", o.max_area);
  const fs::path golden = fs::path(o.shared) / "golden" / f.golden;
  AVDIT_REQUIRE(fs::is_directory(golden),
                "{}: missing (the full-size weights are made from the "
                "golden tiny model's names; pass --shared DIR)",
                golden.string());
  const Clip clip = clip_for(o.decoder, o);
  const fs::path dir =
      o.work.empty() ? fs::temp_directory_path() /
                           fmt::format("avdit-bench-vae-{}-{}-{}", f.name, o.seed, kWeightsVersion)
                     : fs::path(o.work);
  const auto w0 = std::chrono::steady_clock::now();
  write_full_size(f, golden, dir, o.seed);
  const double make_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - w0).count();

  const std::unique_ptr<ops::Context> ctx = make_context(o.device);
  const DType act = o.precision == "bf16" ? DType::BF16 : DType::F32;
  const std::unique_ptr<Decoder> dec = models::vae::open_decoder(*ctx, dir, act);
  const bool cpu = o.device == "cpu";
  const int warmup = o.warmup >= 0 ? o.warmup : cpu ? 0 : 1;

  // An estimate decodes the first one and two chunks on at most max_area latent cells per frame.
  const int64_t area = f.video ? clip.lh * clip.lw : 1;
  const bool big = f.video && (clip.latent_frames > 2 * clip.chunk || area > o.max_area);
  const bool estimate = o.estimate == "always"  ? f.video
                        : o.estimate == "never" ? false
                                                : cpu && big;
  Measured m;
  std::string mode = "full decode";
  double seconds = 0;
  if (!estimate) {
    m = measure(*ctx, *dec, random_latent(clip.latent, o.seed), warmup, o.iters);
    seconds = m.seconds;
  } else {
    int64_t lh = clip.lh, lw = clip.lw;
    while (lh * lw > o.max_area) (lh >= lw ? lh : lw) = ((lh >= lw ? lh : lw) + 1) / 2;
    const int64_t n1 = std::min(clip.chunk, clip.latent_frames),
                  n2 = std::min(2 * clip.chunk, clip.latent_frames);
    Shape s1 = clip.latent, s2 = clip.latent;
    s1[2] = n1, s2[2] = n2, s1[3] = s2[3] = lh, s1[4] = s2[4] = lw;
    const Measured a = measure(*ctx, *dec, random_latent(s1, o.seed), warmup, o.iters);
    m = n2 > n1 ? measure(*ctx, *dec, random_latent(s2, o.seed), 0, o.iters) : a;
    const double per_frame = n2 > n1 ? (m.seconds - a.seconds) / double(n2 - n1) : 0;
    seconds = (a.seconds + per_frame * double(clip.latent_frames - n1)) *
              (double(area) / double(lh * lw));
    mode = fmt::format(
        "estimate: {} and {} latent frames of {}x{} cells timed, extrapolated to "
        "{} latent frames of {}x{} cells",
        n1, n2, lh, lw, clip.latent_frames, clip.lh, clip.lw);
    std::cout << "note: "
              << (o.estimate == "always" ? std::string("--estimate always")
                                         : "a full " + o.device + " decode would take too long")
              << "; " << mode << " (peak memory is that of the cropped decode)\n";
  }

  bench::Report report(fmt::format("VAE decode, random full-size weights ({})", dec->describe()));
  report.row();
  report.set("decoder", std::string(f.name));
  report.set("device", o.device);
  report.set("precision", o.precision);
  report.set("clip", f.video ? fmt::format("{} x {}x{}", o.frames, o.height, o.width)
                             : fmt::format("{} s", o.seconds));
  report.set("latent", shape_str(clip.latent));
  report.set("mode", estimate ? std::string("estimate") : std::string("full"));
  report.set("s", seconds, 3);
  // Frames out: the decoder's own count in a full decode (the H3 ViT's token drop trims chunk
  // ends), the clip's in an estimate.
  const int64_t frames_out = f.video && !estimate && m.out.size() == 4 ? m.out[1] : o.frames;
  if (f.video)
    report.set("frames/s", double(frames_out) / seconds, 2);
  else
    report.set("audio s / s", o.seconds / seconds, 1);
  report.set("host peak GB", m.host_peak / 1e9, 2);
  report.set(cpu ? "context pool peak GB" : "GPU pool peak GB", m.pool_peak / 1e9, 2);
  report.set("output", estimate ? "cropped " + shape_str(m.out) : shape_str(m.out));
  report.set("weights made s", make_s, 1);
  report.emit(o.json);
  if (estimate) std::cout << mode << "\n";
  return 0;
}

}  // namespace

Run add_bench_vae(CLI::App& bench) {
  auto* cmd = bench.add_subcommand(
      "vae",
      "One latent decoder at its release size (random weights made from the golden tiny model's\n"
      "names) on a clip: time, peak host and GPU-pool memory, frames/s. A CPU decode too long to\n"
      "run is estimated from one and two chunks (said in the output).\n"
      "Example: avdit bench vae --decoder wan22 --device cuda --frames 241 --height 544 --width "
      "960");
  auto o = std::make_shared<VaeBenchOptions>();
  cmd->add_option("--decoder", o->decoder, "wan22, turbo, h3video, h3audio or oobleck")
      ->required()
      ->check(CLI::IsMember({"wan22", "turbo", "h3video", "h3audio", "oobleck"}));
  cmd->add_option("--device", o->device, "cpu or cuda")
      ->check(CLI::IsMember({"cpu", "cuda"}))
      ->capture_default_str();
  cmd->add_option("--precision", o->precision,
                  "fp32 or bf16 (bf16: the video decoders wan22, turbo, h3video)")
      ->check(CLI::IsMember({"fp32", "bf16"}))
      ->capture_default_str();
  cmd->add_option("--frames", o->frames, "Video: decoded frames (1 + 4k)")->capture_default_str();
  cmd->add_option("--height", o->height, "Video: decoded height (multiple of 16)")
      ->capture_default_str();
  cmd->add_option("--width", o->width, "Video: decoded width (multiple of 16)")
      ->capture_default_str();
  cmd->add_option("--seconds", o->seconds, "Audio: decoded seconds")->capture_default_str();
  cmd->add_option("--estimate", o->estimate,
                  "auto (CPU video decodes longer than two chunks or larger than --max-area),\n"
                  "always or never")
      ->check(CLI::IsMember({"auto", "always", "never"}))
      ->capture_default_str();
  cmd->add_option("--max-area", o->max_area, "Latent cells per frame an estimate decodes")
      ->capture_default_str();
  cmd->add_option("--iters", o->iters, "Timed decodes (median reported)")->capture_default_str();
  cmd->add_option("--warmup", o->warmup, "Untimed decodes first (default: 1 on cuda, 0 on cpu)");
  cmd->add_option("--work", o->work,
                  "Folder of the full-size weights (made once, reused; default: a folder in the\n"
                  "temporary directory named by decoder and seed)");
  cmd->add_option("--shared", o->shared, "The folder holding golden/")->capture_default_str();
  cmd->add_option("--seed", o->seed, "Weights and latents seed")->capture_default_str();
  cmd->add_option("--json", o->json, "Also write the row as JSON here");
  return [o]() -> int { return run(*o); };
}

}  // namespace avdit::app
