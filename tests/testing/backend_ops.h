// The harness of the backend op tests (ggml's test-backend-ops manner): a case runs one op on an
// execution context from host inputs; the runner runs it on the CPU (the oracle) and on the GPU on
// the same fresh random inputs and compares every output by normalised mean squared error against a
// tolerance stated per case (0: the bits must be equal).
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "backend/cuda/context.h"
#include "core/tensor.h"
#include "ops/context.h"

namespace avdit::test_util {

// Fresh random host tensor, normal(mean, std), stored in dtype (values rounded to it).
inline Tensor random_tensor(Shape shape, DType dtype, uint32_t seed, float std = 1.f,
                            float mean = 0.f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(mean, std);
  Tensor t = Tensor::empty(std::move(shape), DType::F32);
  for (int64_t i = 0; i < t.numel(); ++i) t.f32()[i] = d(rng);
  return t.to(dtype);
}

// sum (a - b)^2 / sum b^2 over float tensors (0 when both are all zero).
inline double nmse(const Tensor& a, const Tensor& b) {
  const Tensor x = a.to(DType::F64), y = b.to(DType::F64);
  double num = 0, den = 0;
  for (int64_t i = 0; i < y.numel(); ++i) {
    const double d = x.data<double>()[i] - y.data<double>()[i];
    num += d * d;
    den += y.data<double>()[i] * y.data<double>()[i];
  }
  return den > 0 ? num / den : num;
}

struct OpCase {
  std::string name;
  double tolerance;  // NMSE bound; 0: bit-exact
  // Runs the op on ctx (upload its inputs with ctx.upload) and returns its outputs (any context).
  std::function<std::vector<Tensor>(ops::Context& ctx)> run;
};

// Runs the case on both contexts and compares the outputs.
inline void check_case(ops::Context& cpu, ops::Context& gpu, const OpCase& c) {
  const std::vector<Tensor> want = c.run(cpu);
  const std::vector<Tensor> got = c.run(gpu);
  ASSERT_EQ(want.size(), got.size()) << c.name;
  for (size_t i = 0; i < want.size(); ++i) {
    const Tensor g = gpu.download(got[i]), w = cpu.download(want[i]);
    ASSERT_EQ(g.shape(), w.shape()) << c.name << " output " << i;
    ASSERT_EQ(g.dtype(), w.dtype()) << c.name << " output " << i;
    if (c.tolerance == 0) {
      const bool same = std::memcmp(g.raw(), w.raw(), static_cast<size_t>(w.nbytes())) == 0;
      std::printf("  %-58s out %zu  %s\n", c.name.c_str(), i, same ? "bit-exact" : "DIFFERS");
      EXPECT_TRUE(same) << c.name << " output " << i;
    } else {
      const double e = nmse(g, w);
      std::printf("  %-58s out %zu  NMSE %.2e (tol %.0e)\n", c.name.c_str(), i, e, c.tolerance);
      EXPECT_LE(e, c.tolerance) << c.name << " output " << i;
      EXPECT_TRUE(std::isfinite(e)) << c.name << " output " << i;
    }
  }
}

// Tolerances of the op cases: bit-exact, F32 outputs, BF16 outputs (NMSE).
constexpr double kExact = 0, kF32 = 1e-9, kBf16 = 1e-4;
inline double tol_for(DType out) { return out == DType::F32 ? kF32 : kBf16; }

// A host I32 index tensor.
inline Tensor indices(const std::vector<int64_t>& v) {
  Tensor t = Tensor::empty({static_cast<int64_t>(v.size())}, DType::I32);
  for (size_t i = 0; i < v.size(); ++i) t.data<int32_t>()[i] = static_cast<int32_t>(v[i]);
  return t;
}

// The fixture: one CPU and one CUDA context per process, a case checked across them.
class BackendOpsTest : public ::testing::Test {
 protected:
  static ops::CpuContext& cpu() {
    static ops::CpuContext c;
    return c;
  }
  static ops::CudaContext& gpu() {
    static ops::CudaContext c;
    return c;
  }
  void check(const OpCase& c) { check_case(cpu(), gpu(), c); }
};

}  // namespace avdit::test_util
