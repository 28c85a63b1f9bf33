// The checks every media writer runs on the decoders' tensors before it creates a file: the
// layout ([T, 3, H, W] frames, [channels, samples] audio), float32 on the CPU, and finite values,
// so that a NaN from a decoder is an error naming the tensor rather than a black clip.
#pragma once

#include <string_view>

#include "core/tensor.h"

namespace avdit::media {

// frames: [T, 3, H, W] float32, RGB in [-1, 1] (values outside are clamped when written). The
// layout only: writers check each frame's values with check_frame_values as they reach it, which
// costs no extra pass over a long clip (their output is a temporary until the end anyway).
void check_frames(const Tensor& frames, std::string_view name);
// BadInput naming the tensor and the position of the first NaN / inf in frame t of `frames`.
void check_frame_values(const Tensor& frames, int64_t t, std::string_view name);
// frame: [3, H, W], one frame of the above.
void check_frame(const Tensor& frame, std::string_view name);
// audio: [channels, samples] float32 in [-1, 1]; at most max_channels channels.
void check_audio(const Tensor& audio, std::string_view name, int64_t max_channels);
// A sample rate the writers accept: 1 Hz .. 768 kHz.
void check_sample_rate(int sample_rate);

}  // namespace avdit::media
