// MAGI-2's cond / uncond text states: bf16 round trip of the values, zero-padding of both to the
// longer length with the true lengths kept, an empty uncond without a negative prompt.
#include <gtest/gtest.h>

#include "core/dtype.h"
#include "core/error.h"
#include "models/text/qwen35/cond_uncond.h"
#include "models/text/text_encoder.h"

namespace avdit::models::text {
namespace {

Tensor ramp(int64_t T, int64_t H, float base) {
  std::vector<float> v;
  for (int64_t i = 0; i < T * H; ++i) v.push_back(base + 1.0009765625f * i / 7.f);
  return Tensor::from_floats(v, {T, H});
}

float bf16_round(float x) { return bf16_to_f32(f32_to_bf16(x)); }

void expect_rows(const Tensor& got, const Tensor& src, int64_t len) {
  const int64_t H = got.size(1);
  for (int64_t r = 0; r < got.size(0); ++r)
    for (int64_t c = 0; c < H; ++c) {
      const float want = r < len ? bf16_round(src.f32()[r * H + c]) : 0.f;
      ASSERT_EQ(got.f32()[r * H + c], want) << "row " << r << " col " << c;
    }
}

TEST(Qwen35CondUncond, PadsTheShorterAndKeepsLengths) {
  const Tensor cond = ramp(3, 5, 0.1f), uncond = ramp(7, 5, -2.3f);
  const CondUncond r = pad_cond_uncond(cond, uncond);
  EXPECT_EQ(r.cond_len, 3);
  EXPECT_EQ(r.uncond_len, 7);
  ASSERT_EQ(r.cond.shape(), (Shape{7, 5}));
  ASSERT_EQ(r.uncond.shape(), (Shape{7, 5}));
  EXPECT_EQ(r.cond.dtype(), DType::F32);
  expect_rows(r.cond, cond, 3);
  expect_rows(r.uncond, uncond, 7);
  // The values really are rounded (the ramp is not bf16-representable).
  EXPECT_NE(r.uncond.f32()[1], uncond.f32()[1]);

  const CondUncond s = pad_cond_uncond(uncond, cond);  // the other side longer
  EXPECT_EQ(s.cond_len, 7);
  EXPECT_EQ(s.uncond_len, 3);
  expect_rows(s.uncond, cond, 3);
}

TEST(Qwen35CondUncond, NoNegativePromptGivesAnEmptyUncond) {
  const Tensor cond = ramp(4, 3, 1.f);
  const CondUncond r = pad_cond_uncond(cond, Tensor());
  EXPECT_EQ(r.uncond_len, 0);
  ASSERT_EQ(r.uncond.shape(), (Shape{4, 3}));
  expect_rows(r.uncond, cond, 0);  // all zeros
  expect_rows(r.cond, cond, 4);
}

TEST(Qwen35CondUncond, MismatchedWidthsAreRefused) {
  EXPECT_THROW(pad_cond_uncond(ramp(2, 3, 0), ramp(2, 4, 0)), BadInput);
  EXPECT_THROW(pad_cond_uncond(Tensor(), ramp(2, 4, 0)), BadInput);
}

// A stand-in encoder: the state of token ids is the ids themselves, one column per id.
class FakeEncoder final : public TextEncoder {
 public:
  std::string describe() const override { return "fake"; }
  int64_t hidden_size() const override { return 2; }
  Tensor encode(const std::vector<int32_t>& ids) const override {
    std::vector<float> v;
    for (int32_t id : ids) v.insert(v.end(), {id + 0.5f, -id * 1.0f / 3});
    return Tensor::from_floats(v, {static_cast<int64_t>(ids.size()), 2});
  }
};

TEST(Qwen35CondUncond, EncodesPromptAndNegative) {
  const FakeEncoder enc;
  const std::vector<int32_t> prompt = {5, 6}, negative = {1, 2, 3, 4};
  const CondUncond r = encode_cond_uncond(enc, prompt, &negative);
  EXPECT_EQ(r.cond_len, 2);
  EXPECT_EQ(r.uncond_len, 4);
  expect_rows(r.cond, enc.encode(prompt), 2);
  expect_rows(r.uncond, enc.encode(negative), 4);
  EXPECT_EQ(encode_cond_uncond(enc, prompt, nullptr).uncond_len, 0);
}

}  // namespace
}  // namespace avdit::models::text
