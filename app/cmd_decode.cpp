// `avdit decode`: a VAE folder's decoder (by its config files) turned loose on latents. Latents
// mode writes what a person plays (a WAV for the audio decoders); fixture mode runs a golden's
// inputs.safetensors and writes the final output under the golden's name and layout, float32.
#include <fmt/format.h>

#include <chrono>
#include <filesystem>
#include <iostream>
#include <string>
#include <utility>
#include <vector>

#include "commands.h"
#include "context.h"
#include "core/error.h"
#include "core/log.h"
#include "core/sha256.h"
#include "io/finite.h"
#include "io/output_file.h"
#include "io/safetensors.h"
#include "models/vae/decoder_factory.h"
#include "pipeline/clip_frames.h"
#if AVDIT_HAVE_MEDIA
#include "io/media/frame_rate.h"
#include "io/media/mp4_writer.h"
#include "io/media/png_writer.h"
#include "io/media/wav_writer.h"
#endif

namespace avdit::app {

namespace fs = std::filesystem;
namespace vae = models::vae;

namespace {

struct DecodeArgs {
  std::string model, inputs, latents, out, device = "cpu", precision = "fp32", wav = "f32", fps;
  int crf = 18;
};

// The names the goldens and the pipelines give a decoder's latent input.
constexpr const char* kLatentNames[] = {"latent_tc", "latent", "latents", "z", "audio_latents"};

// The latent tensor of a file: its only tensor, else the one under a known name.
Tensor pick_latents(const TensorMap& in, const std::string& file, std::string* name) {
  if (in.size() == 1) {
    *name = in.begin()->first;
    return in.begin()->second;
  }
  for (const char* n : kLatentNames)
    if (auto it = in.find(n); it != in.end()) {
      *name = n;
      return it->second;
    }
  throw BadInput(
      fmt::format("{}: no latent tensor (expected one tensor, or one named latent_tc, "
                  "latent, latents, z or audio_latents)",
                  file));
}

// The golden's layout of a decoder's output: MAGI-2's `waveform_44k` is time-major [samples,
// channels] (what it hands the writer); H3's `waveform` keeps the decoder's [rows, 1, samples].
Tensor golden_layout(const std::string& name, const Tensor& t) {
  if (name == "waveform_44k" && t.ndim() == 2) {
    const int64_t C = t.size(0), S = t.size(1);
    Tensor out = Tensor::empty({S, C}, DType::F32);
    for (int64_t c = 0; c < C; ++c)
      for (int64_t s = 0; s < S; ++s) out.f32()[s * C + c] = t.f32()[c * S + s];
    return out;
  }
  if (name == "waveform" && t.ndim() == 2) return t.reshape({t.size(0), 1, t.size(1)});
  if (name == "video" && t.ndim() == 4)
    return t.reshape({1, t.size(0), t.size(1), t.size(2), t.size(3)});
  return t;
}

bool ends_with(const std::string& s, const char* tail) { return s.ends_with(tail); }

int run_decode(const DecodeArgs& a) {
  // Every input is read and every check made before any output exists.
  const std::string& file = a.inputs.empty() ? a.latents : a.inputs;
  const char* option = a.inputs.empty() ? "--latents" : "--inputs";
  std::error_code ec;
  AVDIT_REQUIRE(fs::is_regular_file(file, ec), "{} {}: no such file", option, file);
  const vae::Family family = vae::detect_family(a.model);
  const DType act = a.precision == "bf16" ? DType::BF16 : DType::F32;
  AVDIT_REQUIRE(act == DType::F32 || vae::has_bf16(family),
                "--precision {}: {} decodes in fp32 only (bf16 is the video decoders': Wan2.2, "
                "TurboVAED, MiniMax-H3 video)",
                a.precision, vae::family_name(family));
  const bool wav = ends_with(a.out, ".wav"), mp4 = ends_with(a.out, ".mp4"),
             frames = ends_with(a.out, "/");
  AVDIT_REQUIRE(wav || mp4 || frames || ends_with(a.out, ".safetensors"),
                "--out {}: expected a .wav (audio), .mp4 or FOLDER/ of PNG frames (video), or "
                ".safetensors file",
                a.out);
  AVDIT_REQUIRE(a.inputs.empty() || !(mp4 || frames),
                "--out {}: fixture mode (--inputs) writes .safetensors", a.out);
  const bool video_family = family == vae::Family::Wan22 || family == vae::Family::TurboVaed ||
                            family == vae::Family::H3Video;
  AVDIT_REQUIRE(!(mp4 || frames) || video_family,
                "--out {}: an .mp4 or frame folder needs a video decoder; {} decodes audio", a.out,
                vae::family_name(family));
  const TensorMap in = read_all(file);
  std::string name;
  const Tensor latents = pick_latents(in, file, &name);
  require_finite(latents, file + ":" + name);
  std::vector<fs::path> inputs = {file};
  for (const auto& e : fs::directory_iterator(a.model, ec))
    if (e.is_regular_file(ec)) inputs.push_back(e.path());
  if (!frames) check_output_path(a.out, "--out", inputs);
#if !AVDIT_HAVE_MEDIA
  AVDIT_REQUIRE(!wav && !mp4 && !frames, "--out {}: this build has no media writers", a.out);
#else
  media::FrameRate fps;
  if (mp4) {
    AVDIT_REQUIRE(!a.fps.empty() || family != vae::Family::TurboVaed,
                  "--out {}: TurboVAED does not know MAGI-2's frame rate: give --fps", a.out);
    fps = a.fps.empty() ? media::FrameRate{24, 1} : media::parse_frame_rate(a.fps, "--fps");
  }
  if (frames) {
    std::error_code fe;
    AVDIT_REQUIRE(!fs::exists(a.out, fe) || fs::is_empty(a.out, fe),
                  "--out {}: the frame folder must not exist or be empty", a.out);
  }
#endif

  const std::unique_ptr<ops::Context> ctx = make_context(a.device);
  const auto decoder = vae::open_decoder(*ctx, a.model, act);
  log::debug("decode: {} ({})", decoder->describe(), vae::family_name(family));
  AVDIT_REQUIRE(!wav || decoder->media() == vae::Media::Audio,
                "--out {}: a WAV needs an audio decoder; {} decodes video", a.out,
                decoder->describe());
  const auto t0 = std::chrono::steady_clock::now();
  Tensor out;
  try {
    out = decoder->decode(latents);
  } catch (const BadInput& e) {
    // The decoder names its argument "latents"; say which file and tensor that was.
    const std::string what = e.what();
    if (!what.starts_with("latents")) throw;
    throw BadInput(fmt::format("{}:{}: {}", file, name, what));
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (wav || mp4 || frames) {
#if AVDIT_HAVE_MEDIA
    if (wav)
      media::write_wav(a.out, out, static_cast<int>(decoder->rate()),
                       a.wav == "pcm16" ? media::WavFormat::Pcm16 : media::WavFormat::Float32);
    else if (mp4)
      media::write_mp4(a.out, pipeline::writer_frames(family, out), fps, {}, 0, media::Mp4Options{a.crf});
    else
      media::write_png_frames(a.out, pipeline::writer_frames(family, out));
#endif
  } else {
    const std::string key = decoder->output_name();
    const Tensor t = a.inputs.empty() ? out : golden_layout(key, out);
    const std::vector<std::pair<std::string, Tensor>> tensors = {{key, t}};
    write_safetensors(a.out, tensors, {{"decoder", decoder->describe()}});
    std::cout << fmt::format("{} {} {}  sha256 {}\n", key, t.shape_str(), dtype_name(t.dtype()),
                             sha256_hex(t));
  }
  std::cout << fmt::format("{}: {} -> {} in {:.3f} s\n", decoder->describe(), latents.shape_str(),
                           out.shape_str(), seconds);
  std::cout << "wrote " << a.out << "\n";
  return 0;
}

}  // namespace

Run add_decode(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "decode",
      "Decode latents with a VAE folder's decoder (the family is recognised from its config):\n"
      "Stable Audio Open (MAGI-2 audio, 44.1 kHz) or MiniMax-H3 audio (32 kHz) to a WAV; Wan2.2,\n"
      "MAGI-2 TurboVAED or MiniMax-H3 video to an mp4 (H.264) or PNG frames.\n"
      "Fixture mode (--inputs) writes the golden's final output tensor (float32) under its name.\n"
      "Example: avdit decode --model ../shared/golden/vae-sa-audio-tiny \\\n"
      "           --latents audio_latents.safetensors --out audio.wav");
  auto a = std::make_shared<DecodeArgs>();
  cmd->add_option("--model", a->model, "VAE folder (config + safetensors)")->required();
  auto* inputs =
      cmd->add_option("--inputs", a->inputs, "Fixture mode: a golden's inputs.safetensors");
  auto* latents = cmd->add_option("--latents", a->latents,
                                  "Latents (.safetensors: one tensor, in the DiT's layout)");
  inputs->excludes(latents);
  cmd->add_option("--out", a->out,
                  "Output: .wav (audio), .mp4 or FOLDER/ of PNGs (video), or .safetensors; "
                  "written atomically")
      ->required();
  cmd->add_option("--device", a->device, "cpu or cuda")->capture_default_str();
  cmd->add_option("--precision", a->precision,
                  "fp32 (the oracle) or bf16 (the video decoders: bf16 weights and activations,\n"
                  "fp32 where the references keep it)")
      ->check(CLI::IsMember({"fp32", "bf16"}))
      ->capture_default_str();
  cmd->add_option("--fps", a->fps,
                  "Video: the frame rate of an .mp4 (24, 30000/1001, ...); default 24 (Wan2.2, "
                  "MiniMax-H3); TurboVAED needs it");
  cmd->add_option("--crf", a->crf, "Video: x264 quality of an .mp4, 0 (lossless) .. 51")
      ->check(CLI::Range(0, 51))
      ->capture_default_str();
  cmd->add_option("--wav-format", a->wav, "WAV samples: f32 (as decoded) or pcm16")
      ->check(CLI::IsMember({"f32", "pcm16"}))
      ->capture_default_str();
  return [a, inputs, latents] {
    AVDIT_REQUIRE(inputs->count() + latents->count() == 1,
                  "decode: give --latents FILE or --inputs FIXTURE_inputs.safetensors");
    return run_decode(*a);
  };
}

}  // namespace avdit::app
