// random_nvfp4 (see nvfp4_random.h): the value bytes from a counter hash, split over threads in
// fixed chunks (the bytes do not depend on the thread count).
#include "quant/nvfp4_random.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/error.h"
#include "core/rng.h"
#include "core/thread_pool.h"

namespace avdit::quant {

Nvfp4Matrix random_nvfp4(const Shape& shape, uint64_t seed, float std) {
  AVDIT_REQUIRE(shape.size() == 3 && shape[0] > 0 && shape[1] > 0 && shape[2] > 0 &&
                    shape[1] % kNvfp4Block == 0,
                "random NVFP4: shape {} is not [G, K, N] with K a multiple of {}", shape_str(shape),
                kNvfp4Block);
  AVDIT_REQUIRE(std::isfinite(std) && std > 0, "random NVFP4: std {} must be positive", std);
  const int64_t G = shape[0], K = shape[1], N = shape[2];
  Nvfp4Matrix m;
  m.shape = shape;
  m.reduce_dim = 1;
  m.values = Tensor::empty({G, N, K / 2}, DType::U8);
  m.block_scales = Tensor::empty({G, N, K / kNvfp4Block}, DType::F8_E4M3);
  m.global_scales = Tensor::empty({G}, DType::F32);

  // Values: 8 bytes per hash, in chunks of 1 MiB of bytes (whole words) per task.
  uint8_t* v = m.values.data<uint8_t>();
  const int64_t bytes = m.values.nbytes(), words = (bytes + 7) / 8;
  constexpr int64_t kWordsPerTask = int64_t{1} << 17;
  ThreadPool pool(std::max(1, std::min(default_thread_count(), 32)));
  pool.run((words + kWordsPerTask - 1) / kWordsPerTask, [&](int64_t task) {
    const int64_t w0 = task * kWordsPerTask, w1 = std::min(words, w0 + kWordsPerTask);
    for (int64_t w = w0; w < w1; ++w) {
      const uint64_t r = splitmix64(seed + static_cast<uint64_t>(w));
      const int64_t b0 = w * 8, n = std::min<int64_t>(8, bytes - b0);
      for (int64_t b = 0; b < n; ++b)
        v[b0 + b] = static_cast<uint8_t>(r >> (8 * b));  // little end first
    }
  });
  std::memset(m.block_scales.mutable_raw(), 0x38, static_cast<size_t>(m.block_scales.nbytes()));
  // The 16 e2m1 values +-{0, 0.5, 1, 1.5, 2, 3, 4, 6}: mean of squares 68.5 / 8.
  const double rms = std::sqrt(68.5 / 8.0);
  const float s = static_cast<float>(rms / static_cast<double>(std));
  float* gs = m.global_scales.f32();
  std::fill(gs, gs + G, s);
  return m;
}

}  // namespace avdit::quant
