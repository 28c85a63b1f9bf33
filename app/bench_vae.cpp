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
#include "models/vae/random_decoder.h"
#include "models/vae/wan22/patch.h"
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

// --- the full-size checkpoint (models/vae/random_decoder.h) ---

struct Family {
  const char* name;  // --decoder
  models::vae::Family family;
  bool video;
  // What the timed decode ends with: the output on the host (decode), frames on the device
  // (decode_frames) or the output on the device (decode_on_device): the last two as a peer's.
  enum class Out { Host, Frames, Device } out;
};

// Part of the default weights folder's name: bump it when a rule of random_decoder.cpp changes, so
// that a folder made by an older rule is not reused.
constexpr int kWeightsVersion = 1;

const Family& family_of(const std::string& name) {
  using F = models::vae::Family;
  using O = Family::Out;
  static const std::vector<Family> all = {{"wan22", F::Wan22, true, O::Frames},
                                          {"turbo", F::TurboVaed, true, O::Frames},
                                          {"oobleck", F::Oobleck, false, O::Host},
                                          {"h3video", F::H3Video, true, O::Device},
                                          {"h3audio", F::H3Audio, false, O::Host}};
  for (const Family& f : all)
    if (name == f.name) return f;
  throw BadInput(
      fmt::format("--decoder {}: expected wan22, turbo, h3video, h3audio or oobleck", name));
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
  double host_s = -1;  // output on the device: bringing it to the host as decode() returns it
  int64_t host_peak = 0, pool_peak = 0;
  Shape out;
};

// Frames / Device: time the decode to its output left on the decoder's device (the upload
// included, as a library decoder's call that returns a device tensor), then its way to the host
// (as decode() returns it) apart.
Measured measure(ops::Context& ctx, const Decoder& dec, const Tensor& z, int warmup, int iters,
                 Family::Out out_at) {
  const bool frames = out_at != Family::Out::Host;
  using clock = std::chrono::steady_clock;
  auto since = [](clock::time_point t0) {
    return std::chrono::duration<double>(clock::now() - t0).count();
  };
  auto to_device = [&] {
    Tensor f = out_at == Family::Out::Frames ? dec.decode_frames(z) : dec.decode_on_device(z);
    ctx.synchronize();
    return f;
  };
  for (int i = 0; i < warmup; ++i) frames ? (void)to_device() : (void)dec.decode(z);
  std::vector<double> t, h;
  Measured m;
  reset_host_rss_peak();
  ctx.reset_pool_peak();
  for (int i = 0; i < iters; ++i) {
    auto t0 = clock::now();
    if (!frames) {
      const Tensor out = dec.decode(z);  // F32 on the host: the upload, decode and download
      t.push_back(since(t0));
      m.out = out.shape();
      continue;
    }
    const Tensor f = to_device();
    t.push_back(since(t0));
    t0 = clock::now();
    const Tensor out = out_at == Family::Out::Frames
                           ? models::vae::wan22::frames_to_video(ctx.download(f))
                           : ctx.download(f);
    h.push_back(since(t0));
    m.out = out.shape();
  }
  m.host_peak = host_rss_peak();
  m.pool_peak = ctx.pool_peak();
  auto median = [](std::vector<double>& v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  m.seconds = median(t);
  if (!h.empty()) m.host_s = median(h);
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
  models::vae::golden_decoder(f.family, o.shared);  // BadInput naming it when missing
  const Clip clip = clip_for(o.decoder, o);
  const fs::path dir =
      o.work.empty() ? fs::temp_directory_path() /
                           fmt::format("avdit-bench-vae-{}-{}-{}", f.name, o.seed, kWeightsVersion)
                     : fs::path(o.work);
  const auto w0 = std::chrono::steady_clock::now();
  models::vae::write_random_decoder(f.family, models::vae::DecoderSize::Release, o.shared, dir,
                                    o.seed);
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
    m = measure(*ctx, *dec, random_latent(clip.latent, o.seed), warmup, o.iters, f.out);
    seconds = m.seconds;
  } else {
    int64_t lh = clip.lh, lw = clip.lw;
    while (lh * lw > o.max_area) (lh >= lw ? lh : lw) = ((lh >= lw ? lh : lw) + 1) / 2;
    const int64_t n1 = std::min(clip.chunk, clip.latent_frames),
                  n2 = std::min(2 * clip.chunk, clip.latent_frames);
    Shape s1 = clip.latent, s2 = clip.latent;
    s1[2] = n1, s2[2] = n2, s1[3] = s2[3] = lh, s1[4] = s2[4] = lw;
    const Measured a = measure(*ctx, *dec, random_latent(s1, o.seed), warmup, o.iters, f.out);
    m = n2 > n1 ? measure(*ctx, *dec, random_latent(s2, o.seed), 0, o.iters, f.out) : a;
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
  // s: the decode (the video decoders: to their output in device memory, as the peers time
  // theirs); to host s: that output brought to the host as [3, T, H, W] F32 (what decode() adds).
  report.set("s", seconds, 3);
  if (m.host_s >= 0 && !estimate) report.set("to host s", m.host_s, 3);
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
