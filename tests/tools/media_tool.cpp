// Exercises the media writers (src/io/media) without decoders: writes mp4 / wav / png / frame
// folders / contact sheets from synthetic tensors (a moving colour gradient, sine tones with a
// different frequency per channel) and can save those tensors (--dump) for the checks of
// tests/cli/media_cli.sh, which read the files back with ffprobe, ffmpeg and Python.
#include <CLI/CLI.hpp>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <numbers>

#include "core/error.h"
#include "io/media/contact_sheet.h"
#include "io/media/mp4_writer.h"
#include "io/media/png_writer.h"
#include "io/media/wav_writer.h"
#include "io/safetensors.h"

using namespace avdit;

namespace {

constexpr double kTwoPi = 2 * std::numbers::pi;

// frames [T, 3, H, W]: smooth, saturated colours that move with t; the 1.1 gain pushes the
// extremes past [-1, 1] so that the writers' clamping is exercised. `phase` varies runs.
Tensor gradient(int64_t t_count, int64_t h, int64_t w, double phase = 0) {
  Tensor f = Tensor::empty({t_count, 3, h, w}, DType::F32);
  float* p = f.f32();
  for (int64_t t = 0; t < t_count; ++t) {
    const double s = static_cast<double>(t) / t_count + phase;
    for (int64_t y = 0; y < h; ++y)
      for (int64_t x = 0; x < w; ++x) {
        const double u = static_cast<double>(x) / w, v = static_cast<double>(y) / h;
        const int64_t i = ((t * 3) * h + y) * w + x, plane = h * w;
        p[i] = static_cast<float>(1.1 * std::cos(kTwoPi * (u + s)));
        p[i + plane] = static_cast<float>(1.1 * std::cos(kTwoPi * (v - s)));
        p[i + 2 * plane] = static_cast<float>(1.1 * std::sin(kTwoPi * (0.5 * (u + v) + 2 * s)));
      }
  }
  return f;
}

// audio [channels, samples]: channel c is a 0.5-amplitude sine at 440 * (c + 2) / 2 Hz
// (440, 660, 880 ...), so swapped or duplicated channels are visible.
Tensor tones(int64_t channels, int64_t samples, int sample_rate) {
  Tensor a = Tensor::empty({channels, samples}, DType::F32);
  for (int64_t c = 0; c < channels; ++c)
    for (int64_t n = 0; n < samples; ++n)
      a.f32()[c * samples + n] =
          static_cast<float>(0.5 * std::sin(kTwoPi * 220.0 * (c + 2) * n / sample_rate));
  return a;
}

void poison(Tensor& t) { t.f32()[t.numel() / 2 + 1] = std::numeric_limits<float>::quiet_NaN(); }

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"media_tool: the media writers on synthetic tensors"};
  app.require_subcommand(1);
  std::string out, dump, size = "64x48", fps_text = "24", format = "float32", nan, labels;
  int64_t frame_count = 24, channels = 2, runs = 3;
  double audio_seconds = -1;  // default: as long as the video
  int rate = 44100;
  bool rank3 = false, no_audio = false;
  media::Mp4Options options;
  auto common = [&](CLI::App* c) {
    c->add_option("out", out, "output file or folder")->required();
    c->add_option("--dump", dump, "also save the input tensors to this .safetensors file");
    c->add_option("--nan", nan, "put a NaN into this tensor: frames or audio");
  };
  auto video = [&](CLI::App* c) {
    c->add_option("--frames", frame_count, "frames T");
    c->add_option("--size", size, "WxH");
    c->add_flag("--rank3", rank3, "pass frames as [T*3, H, W] (a wrong rank)");
  };
  auto sound = [&](CLI::App* c) {
    c->add_option("--channels", channels, "audio channels");
    c->add_option("--rate", rate, "sample rate");
  };
  CLI::App* mp4 = app.add_subcommand("mp4", "an mp4 clip");
  common(mp4), video(mp4), sound(mp4);
  mp4->add_option("--fps", fps_text, "frame rate: 24, 25, 30000/1001 ...");
  mp4->add_option("--audio-seconds", audio_seconds, "audio length (default: the video's)");
  mp4->add_flag("--no-audio", no_audio, "video only");
  mp4->add_option("--crf", options.crf, "x264 CRF");
  mp4->add_option("--preset", options.preset, "x264 preset");
  CLI::App* wav = app.add_subcommand("wav", "a WAV file");
  common(wav), sound(wav);
  wav->add_option("--seconds", audio_seconds, "length")->default_val(1.0);
  wav->add_option("--format", format, "float32 or pcm16");
  CLI::App* png = app.add_subcommand("png", "one frame as PNG");
  common(png), video(png);
  CLI::App* frames_cmd = app.add_subcommand("frames", "every frame as DIR/frame_00000.png ...");
  common(frames_cmd), video(frames_cmd);
  CLI::App* sheet = app.add_subcommand("sheet", "a contact sheet of several runs");
  common(sheet), video(sheet);
  sheet->add_option("--runs", runs, "runs (rows); run r is (W - 2r) x (H - r), phase r / 7");
  sheet->add_option("--labels", labels, "comma-separated labels, one per run");
  CLI11_PARSE(app, argc, argv);

  try {
    int64_t w = 0, h = 0;
    AVDIT_REQUIRE(std::sscanf(size.c_str(), "%ldx%ld", &w, &h) == 2 && w > 0 && h > 0,
                  "--size '{}': expected WxH", size);
    double seconds = 0;  // in the writer only, not in making the synthetic tensors
    auto timed = [&](auto&& write) {
      const auto start = std::chrono::steady_clock::now();
      write();
      seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    };
    std::vector<std::pair<std::string, Tensor>> inputs;
    auto video_tensor = [&](double phase = 0, int64_t dw = 0, int64_t dh = 0) {
      Tensor f = gradient(frame_count, h - dh, w - dw, phase);
      if (nan == "frames") poison(f);  // in frame T / 2
      return f;
    };
    auto as_passed = [&](const Tensor& f) {
      return rank3 ? f.reshape({f.size(0) * 3, f.size(2), f.size(3)}) : f;
    };
    std::string what;
    if (mp4->parsed()) {
      const media::FrameRate fps = media::parse_frame_rate(fps_text, "--fps");
      Tensor f = video_tensor(), a;
      inputs.emplace_back("frames", f);
      if (!no_audio) {
        const double seconds = audio_seconds >= 0 ? audio_seconds : frame_count / fps.fps();
        a = tones(channels, std::max<int64_t>(1, std::llround(seconds * rate)), rate);
        if (nan == "audio") poison(a);
        inputs.emplace_back("audio", a);
      }
      timed([&] { media::write_mp4(out, as_passed(f), fps, a, rate, options); });
      what = fmt::format("{} frames {}x{} at {} fps{}", frame_count, w, h, fps.str(),
                         no_audio ? "" : fmt::format(", {} channel(s) at {} Hz", channels, rate));
    } else if (wav->parsed()) {
      AVDIT_REQUIRE(format == "float32" || format == "pcm16", "--format: float32 or pcm16");
      Tensor a = tones(channels, std::llround(audio_seconds * rate), rate);
      if (nan == "audio") poison(a);
      inputs.emplace_back("audio", a);
      timed([&] {
        media::write_wav(out, a, rate,
                         format == "pcm16" ? media::WavFormat::Pcm16 : media::WavFormat::Float32);
      });
      what =
          fmt::format("{} channel(s), {} samples at {} Hz, {}", channels, a.size(1), rate, format);
    } else if (png->parsed()) {
      frame_count = 1;
      Tensor f = video_tensor().select(0);
      inputs.emplace_back("frame", f);
      timed([&] { media::write_png(out, rank3 ? f.reshape({3 * h, w}) : f); });
      what = fmt::format("one frame {}x{}", w, h);
    } else if (frames_cmd->parsed()) {
      Tensor f = video_tensor();
      inputs.emplace_back("frames", f);
      timed([&] { media::write_png_frames(out, as_passed(f)); });
      what = fmt::format("{} frames {}x{}", frame_count, w, h);
    } else {
      std::vector<Tensor> clips;
      for (int64_t r = 0; r < runs; ++r) {
        clips.push_back(video_tensor(static_cast<double>(r) / 7, 2 * r, r));
        inputs.emplace_back(fmt::format("run{}", r), clips.back());
      }
      std::vector<std::string> names;
      for (size_t b = 0; !labels.empty() && b <= labels.size();) {
        const size_t e = std::min(labels.find(',', b), labels.size());
        names.push_back(labels.substr(b, e - b));
        b = e + 1;
      }
      timed([&] { media::write_contact_sheet(out, clips, names); });
      what = fmt::format("{} runs of {} frames", runs, frame_count);
    }
    if (!dump.empty()) write_safetensors(dump, inputs, {{"writer", "media_tool"}});
    std::printf("wrote %s: %s in %.3f s\n", out.c_str(), what.c_str(), seconds);
    return 0;
  } catch (const Error& e) {
    std::fprintf(stderr, "media_tool: error: %s\n", e.what());
    return e.exit_code();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "media_tool: error: %s\n", e.what());
    return 1;
  }
}
