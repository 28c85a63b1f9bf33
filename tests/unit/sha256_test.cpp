// SHA-256 against the FIPS 180-4 / NIST example vectors, padding boundaries (lengths around 56 and
// 64 bytes, values from Python's hashlib), chunked updates and a tensor's raw bytes.
#include <gtest/gtest.h>

#include <string>

#include "core/sha256.h"
#include "core/tensor.h"

namespace avdit {
namespace {

TEST(Sha256, NistVectors) {
  EXPECT_EQ(sha256_hex(std::string_view("")), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha256_hex(std::string_view("abc")), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(sha256_hex(std::string_view("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq")),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(sha256_hex(std::string_view("abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopq"
                                        "klmnopqrlmnopqrsmnopqrstnopqrstu")),
            "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1");
  EXPECT_EQ(sha256_hex(std::string(1000000, 'a')), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(Sha256, PaddingBoundaries) {
  const std::pair<int, const char*> cases[] = {
      {55, "9f4390f8d30c2dd92ec9f095b65e2b9ae9b0a925a5258e241c9f1e910f734318"},
      {56, "b35439a4ac6f0948b6d6f9e3c6af0f5f590ce20f1bde7090ef7970686ec6738a"},
      {63, "7d3e74a05d7db15bce4ad9ec0658ea98e3f06eeecf16b4c6fff2da457ddc2f34"},
      {64, "ffe054fe7ae0cb6dc65c3af9b61d5209f439851db43d0ba5997337df154668eb"},
      {65, "635361c48bb9eab14198e76ea8ab7f1a41685d6ad62aa9146d301d4f17eb0ae0"},
      {119, "31eba51c313a5c08226adf18d4a359cfdfd8d2e816b13f4af952f7ea6584dcfb"},
      {120, "2f3d335432c70b580af0e8e1b3674a7c020d683aa5f73aaaedfdc55af904c21c"},
  };
  for (const auto& [n, hex] : cases) EXPECT_EQ(sha256_hex(std::string(n, 'a')), hex) << n << " bytes";
}

TEST(Sha256, ChunkedUpdatesMatchOneShot) {
  std::string msg;
  for (int i = 0; i < 1000; ++i) msg += static_cast<char>((i * 7919) & 0xff);
  const std::string whole = sha256_hex(std::string_view(msg));
  for (size_t chunk : {1u, 3u, 63u, 64u, 65u, 200u}) {
    Sha256 h;
    for (size_t i = 0; i < msg.size(); i += chunk) h.update(std::string_view(msg).substr(i, chunk));
    EXPECT_EQ(h.hex_digest(), whole) << "chunk " << chunk;
  }
}

TEST(Sha256, TensorBytes) {
  // Little-endian float32 bytes of [1, -2.5, 0, 3.25] (hashlib over struct.pack('<4f', ...)).
  const Tensor t = Tensor::from_floats({1.0f, -2.5f, 0.0f, 3.25f}, {2, 2});
  EXPECT_EQ(sha256_hex(t), "685b7ddd99d5c6487e584654c8e84ceb0d9b47eea2d0eaa7cd4c1aed901ca064");
}

}  // namespace
}  // namespace avdit
