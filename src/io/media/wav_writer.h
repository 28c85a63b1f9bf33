// WAV output through libsndfile: the decoders' waveforms as 32-bit float (bit-exact) or 16-bit PCM.
#pragma once

#include <filesystem>

#include "core/tensor.h"

namespace avdit::media {

enum class WavFormat {
  Float32,  // the samples as they are (values beyond [-1, 1] kept)
  Pcm16,    // round(clamp(x, -1, 1) * 32767), round half to even: symmetric, -1 -> -32767
};

// audio: [channels, samples] float32 in [-1, 1], any number of channels up to 64.
void write_wav(const std::filesystem::path& path, const Tensor& audio, int sample_rate,
               WavFormat format = WavFormat::Float32);

}  // namespace avdit::media
