// Counter-based random numbers (Philox4x32-10, Salmon et al. 2011). The value at logical element
// index i depends only on (seed, stream, i), never on thread count, device or memory layout, so
// the CPU and the GPU produce the same noise for the same seed.
//
// Definition (so that any implementation can reproduce it):
//   key = (lo32(seed), hi32(seed)); counter = (lo32(i / 2), hi32(i / 2), lo32(stream), hi32(stream))
//   (r0, r1, r2, r3) = Philox4x32-10(counter, key)
//   uniform u_k = (r_k >> 8 + 0.5) * 2^-24 in (0, 1), k = 0..3
//   normal(i) = Box-Muller on (u0, u1) of counter i / 2: sqrt(-2 ln u0) * (cos if i even else sin)(2 pi u1),
//   evaluated in double and rounded to float.
#pragma once

#include <array>
#include <cstdint>

namespace avdit {

class Tensor;

std::array<uint32_t, 4> philox4x32_10(std::array<uint32_t, 4> counter, std::array<uint32_t, 2> key);

float rng_uniform(uint64_t seed, uint64_t stream, uint64_t index);  // in (0, 1)
float rng_normal(uint64_t seed, uint64_t stream, uint64_t index);   // N(0, 1)

// Fills an F32 tensor: element i (row-major) = mean + std * rng_normal(seed, stream, i).
void fill_normal(Tensor& t, uint64_t seed, uint64_t stream, float mean = 0.f, float std = 1.f);

// SplitMix64's finaliser: the counter hash of the cheap fills (ops::fill_normal's random weights,
// quant::random_nvfp4), where Philox's exact definition is not needed.
inline uint64_t splitmix64(uint64_t z) {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// A 64-bit stream id from a name (FNV-1a), so each checkpoint tensor gets its own stream.
uint64_t stream_id(const char* name);

}  // namespace avdit
