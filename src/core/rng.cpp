// Philox4x32-10 and the Gaussian sampler built on it (see rng.h for the exact definition).
#include "core/rng.h"

#include <algorithm>
#include <cmath>

#include "core/tensor.h"
#include "core/thread_pool.h"

namespace avdit {

std::array<uint32_t, 4> philox4x32_10(std::array<uint32_t, 4> c, std::array<uint32_t, 2> k) {
  constexpr uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u, kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;
  for (int round = 0; round < 10; ++round) {
    const uint64_t p0 = static_cast<uint64_t>(kM0) * c[0];
    const uint64_t p1 = static_cast<uint64_t>(kM1) * c[2];
    c = {static_cast<uint32_t>(p1 >> 32) ^ c[1] ^ k[0], static_cast<uint32_t>(p1),
         static_cast<uint32_t>(p0 >> 32) ^ c[3] ^ k[1], static_cast<uint32_t>(p0)};
    k[0] += kW0;
    k[1] += kW1;
  }
  return c;
}

namespace {
std::array<uint32_t, 4> draw(uint64_t seed, uint64_t stream, uint64_t pair) {
  return philox4x32_10({static_cast<uint32_t>(pair), static_cast<uint32_t>(pair >> 32),
                        static_cast<uint32_t>(stream), static_cast<uint32_t>(stream >> 32)},
                       {static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)});
}
double to_unit(uint32_t r) { return (static_cast<double>(r >> 8) + 0.5) * 0x1p-24; }
}  // namespace

float rng_uniform(uint64_t seed, uint64_t stream, uint64_t index) {
  const auto r = draw(seed, stream, index / 2);
  return static_cast<float>(to_unit(r[(index & 1) ? 2 : 0]));
}

float rng_normal(uint64_t seed, uint64_t stream, uint64_t index) {
  const auto r = draw(seed, stream, index / 2);
  const double u0 = to_unit(r[0]), u1 = to_unit(r[1]);
  const double radius = std::sqrt(-2.0 * std::log(u0));
  const double angle = 2.0 * M_PI * u1;
  return static_cast<float>(radius * ((index & 1) ? std::sin(angle) : std::cos(angle)));
}

void fill_normal(Tensor& t, uint64_t seed, uint64_t stream, float mean, float std) {
  float* p = t.f32();
  const int64_t n = t.numel();
  auto fill = [&](int64_t begin, int64_t end) {  // begin even: whole Box-Muller pairs
    for (int64_t i = begin; i < end; i += 2) {
      const auto r = draw(seed, stream, static_cast<uint64_t>(i) / 2);
      const double radius = std::sqrt(-2.0 * std::log(to_unit(r[0])));
      const double angle = 2.0 * M_PI * to_unit(r[1]);
      p[i] = mean + std * static_cast<float>(radius * std::cos(angle));
      if (i + 1 < n) p[i + 1] = mean + std * static_cast<float>(radius * std::sin(angle));
    }
  };
  // Each value depends on its index alone, so chunks on threads give the same bits; large tensors
  // (a release-size random decoder is 9 GB of fp32) are otherwise minutes of one core.
  constexpr int64_t kChunk = int64_t{1} << 20;
  if (n <= kChunk) return fill(0, n);
  static ThreadPool pool(default_thread_count());
  pool.run((n + kChunk - 1) / kChunk,
           [&](int64_t c) { fill(c * kChunk, std::min(n, (c + 1) * kChunk)); });
}

uint64_t stream_id(const char* name) {
  uint64_t h = 1469598103934665603ull;
  for (const char* p = name; *p; ++p) h = (h ^ static_cast<unsigned char>(*p)) * 1099511628211ull;
  return h;
}

}  // namespace avdit
