// SHA-256 (FIPS 180-4), our own small implementation: `avdit generate` prints the digest of each
// output tensor's bytes so two runs (or two machines) can be compared at a glance.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace avdit {

class Tensor;

// Incremental hasher: update() any number of times, then digest() once.
class Sha256 {
 public:
  Sha256();
  void update(std::span<const uint8_t> bytes);
  void update(std::string_view bytes);
  std::array<uint8_t, 32> digest();  // finalises; the hasher must not be updated afterwards
  std::string hex_digest();          // 64 lowercase hex digits

 private:
  void block(const uint8_t* p);

  std::array<uint32_t, 8> h_;
  std::array<uint8_t, 64> buf_{};
  size_t buf_len_ = 0;
  uint64_t total_bytes_ = 0;
  bool finished_ = false;
};

std::string sha256_hex(std::span<const uint8_t> bytes);
std::string sha256_hex(std::string_view bytes);
// The digest of a tensor's raw bytes in its dtype, row-major, little-endian (as written to safetensors).
std::string sha256_hex(const Tensor& t);

}  // namespace avdit
