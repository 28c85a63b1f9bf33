// NaN/Inf detection of inputs (io/finite.h) in every float dtype, with the element's index named,
// and the numeric-option check.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

#include "core/error.h"
#include "io/finite.h"

namespace avdit {
namespace {

std::string rejection(const Tensor& t) {
  try {
    require_finite(t, "in.safetensors:x");
  } catch (const BadInput& e) {
    return e.what();
  }
  return "(accepted)";
}

TEST(Finite, EveryFloatDtypeAndPosition) {
  const float nan = std::numeric_limits<float>::quiet_NaN(),
              inf = std::numeric_limits<float>::infinity();
  for (DType dt : {DType::F32, DType::F64, DType::F16, DType::BF16, DType::F8_E4M3}) {
    for (float bad : {nan, inf, -inf}) {
      if (dt == DType::F8_E4M3 && std::isinf(bad)) continue;  // e4m3 has no infinity (saturates)
      for (int64_t pos : {0, 5, 23}) {
        Tensor t = Tensor::zeros({2, 3, 4}, DType::F32);
        for (int64_t i = 0; i < 24; ++i) t.f32()[i] = 0.25f * static_cast<float>(i) - 2.f;
        t.f32()[pos] = bad;
        const Tensor x = t.to(dt);
        ASSERT_EQ(first_non_finite(x), pos) << dtype_name(dt);
        const std::string msg = rejection(x);
        const std::string idx = pos == 0 ? "[0, 0, 0]" : pos == 5 ? "[0, 1, 1]" : "[1, 2, 3]";
        EXPECT_NE(msg.find("in.safetensors:x: element " + idx + " of shape [2, 3, 4] is " +
                           (std::isnan(bad) ? "NaN"
                            : bad > 0       ? "+Inf"
                                            : "-Inf")),
                  std::string::npos)
            << msg;
      }
    }
  }
}

TEST(Finite, FiniteExtremesAndIntegersPass) {
  const Tensor big =
      Tensor::from_floats({std::numeric_limits<float>::max(), -std::numeric_limits<float>::max(),
                           std::numeric_limits<float>::denorm_min(), 0.f, -0.f},
                          {5});
  EXPECT_FALSE(first_non_finite(big).has_value());
  // bf16's largest finite values stay finite; float's max rounds up to bf16 Inf and is caught.
  EXPECT_FALSE(first_non_finite(Tensor::from_floats({3.38e38f, -3.38e38f}, {2}).to(DType::BF16))
                   .has_value());
  EXPECT_EQ(first_non_finite(big.to(DType::BF16)), 0);
  const int32_t ints[] = {-1, 0, 2147483647};
  EXPECT_FALSE(first_non_finite(Tensor::from_data({3}, DType::I32, ints)).has_value());
}

TEST(Finite, Options) {
  EXPECT_NO_THROW(require_finite_option(7.5, "--shift"));
  try {
    require_finite_option(std::nan(""), "--guidance");
    FAIL();
  } catch (const BadInput& e) {
    EXPECT_EQ(std::string(e.what()), "--guidance nan: must be a finite number");
  }
  EXPECT_THROW(require_finite_option(-HUGE_VAL, "--shift"), BadInput);
}

}  // namespace
}  // namespace avdit
