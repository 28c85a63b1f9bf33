// MP4 output through the FFmpeg libraries (no ffmpeg process): H.264 video (libx264, yuv420p,
// BT.709) at the model's exact frame rate and, optionally, AAC stereo at the model's sample rate.
#pragma once

#include <filesystem>
#include <string>

#include "core/tensor.h"
#include "io/media/frame_rate.h"

namespace avdit::media {

struct Mp4Options {
  int crf = 18;                   // x264 constant rate factor, 0 (lossless) .. 51 (worst)
  std::string preset = "medium";  // x264 preset, ultrafast .. placebo: speed against size
  int audio_bitrate = 192000;     // AAC, bits per second for the two channels
};

// frames: [T, 3, H, W] float32 RGB in [-1, 1] (clamped). Odd H or W are padded to even by
// repeating the last row / column (yuv420p needs even sizes), so the clip is then one pixel
// wider / taller than the frames.
// audio: [channels, samples] float32 in [-1, 1] with 1 or 2 channels (mono is written to both
// channels), or an undefined Tensor for a silent clip; sample_rate must be one AAC supports
// (8000 .. 96000, e.g. 44100, 48000, 32000). The audio is cut or padded with silence to the video's
// duration, T / fps, to the nearest sample.
void write_mp4(const std::filesystem::path& path, const Tensor& frames, FrameRate fps,
               const Tensor& audio = {}, int sample_rate = 0, const Mp4Options& options = {});

}  // namespace avdit::media
