// Every CUDA op against its CPU reference (ops/ops.h, or the model code's own CPU loop for the
// model-specific ops) on fresh random inputs at several shapes, odd sizes and the real widths of
// both models, in F32 and BF16 storage; plus a determinism check (two runs, same bits).
// Like ggml's test-backend-ops: one harness, a tolerance declared per op and dtype (NMSE).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <tuple>
#include <utility>
#include <vector>

#include "backend/cuda/ops_cuda.h"
#include "models/h3/layers.h"
#include "models/magi2/layers.h"
#include "ops/ops.h"

namespace avdit::cuda {
namespace {

// ---- tolerances (normalised mean squared error, sum (got - ref)^2 / sum ref^2) -------------------
// A wrong index, layout or formula gives NMSE ~ 1e-2 .. 1; these bounds sit far below that and
// above the rounding each path is allowed.
// F32: the kernels use fp32 math like the CPU, so only the order of sums, FMA contraction and
// expf's last bits differ (~1e-7 relative, NMSE ~1e-14).
constexpr double kNmseF32Pointwise = 1e-12;  // silu, sigmoid, add, mul, swiglu*, modulation, rope
constexpr double kNmseF32Reduce = 1e-10;     // rms_norm, fp32 linear, attention (long fp32 sums)
// BF16 storage: inputs are rounded to bf16 before either side sees them; the output's own
// rounding dominates: at most half an ulp, 2^-8 relative, so NMSE <= 1.5e-5 for any data.
constexpr double kNmseBf16Out = 4e-5;
// bf16 / f16 operands with an fp32 output: tensor-core accumulation, whose internal rounding
// is not IEEE-sequential fp32 and is not documented; 1e-6 is ~1e-3 relative, still far from a bug.
constexpr double kNmseF32OutBf16In = 1e-6;

double tol(DType out, bool reduce) {
  if (out == DType::F32) return reduce ? kNmseF32Reduce : kNmseF32Pointwise;
  return kNmseBf16Out;
}

struct Rng {
  std::mt19937 gen;
  explicit Rng(uint32_t seed) : gen(seed) {}
  // Normal values (never all zeros) rounded to `dtype` and returned as F32, so that the CPU
  // reference and the device see exactly the same numbers.
  Tensor host(Shape shape, DType dtype = DType::F32, float scale = 1.f, float mean = 0.f) {
    Tensor t = Tensor::empty(std::move(shape), DType::F32);
    std::normal_distribution<float> d(mean, scale);
    float* p = t.f32();
    for (int64_t i = 0; i < t.numel(); ++i) p[i] = d(gen);
    return dtype == DType::F32 ? t : t.to(dtype).to_f32();
  }
};

// Uploads an F32 host tensor stored as `dtype`.
Tensor up(Device& dev, const Tensor& host_f32, DType dtype) { return to_device(dev, host_f32.to(dtype)); }

Tensor up_i32(Device& dev, const std::vector<int32_t>& v) {
  return to_device(dev, Tensor::from_data({static_cast<int64_t>(v.size())}, DType::I32, v.data()));
}

double nmse(const Tensor& got_host, const Tensor& ref_host) {
  const Tensor g = got_host.to_f32(), r = ref_host.to_f32();
  EXPECT_EQ(g.numel(), r.numel());
  const float *pg = std::as_const(g).f32(), *pr = std::as_const(r).f32();
  double num = 0, den = 0;
  for (int64_t i = 0; i < r.numel(); ++i) {
    if (!std::isfinite(pg[i])) return INFINITY;
    const double e = double(pg[i]) - double(pr[i]);
    num += e * e;
    den += double(pr[i]) * pr[i];
  }
  return den > 0 ? num / den : num;
}

// Prints every comparison (the figures go into the device-run note) and checks the bound.
#define EXPECT_CLOSE(dev, got_device, ref, tolerance, what)                                \
  do {                                                                                     \
    const double e_ = nmse(to_host(dev, got_device), ref);                                 \
    const std::string w_ = (what);                                                         \
    std::printf("  nmse %-70s %.2e (bound %.0e)\n", w_.c_str(), e_, double(tolerance));     \
    EXPECT_LE(e_, tolerance) << w_;                                                        \
  } while (0)

std::string dt_name(DType d) { return std::string(dtype_name(d)); }
std::string name(const std::string& op, const Shape& s, DType d) {
  return op + " " + shape_str(s) + " " + dt_name(d);
}

constexpr DType kDtypes[] = {DType::F32, DType::BF16};

// ---- tests --------------------------------------------------------------------------------------

TEST(CudaOps, HostDeviceRoundTripAndCast) {
  Device dev;
  Rng rng(1);
  for (const Shape& s : {Shape{1}, Shape{7, 13}, Shape{3, 5, 129}}) {
    const Tensor x = rng.host(s);
    const Tensor back = to_host(dev, to_device(dev, x));
    ASSERT_EQ(std::memcmp(back.raw(), x.raw(), static_cast<size_t>(x.nbytes())), 0);
    for (DType d : {DType::BF16, DType::F16}) {
      // Device rounding must equal the host's exact round-to-nearest-even, bit for bit.
      const Tensor dc = to_host(dev, cast(dev, to_device(dev, x), d));
      const Tensor hc = x.to(d);
      EXPECT_EQ(std::memcmp(dc.raw(), hc.raw(), static_cast<size_t>(hc.nbytes())), 0) << dtype_name(d);
      const Tensor wide = to_host(dev, cast(dev, to_device(dev, hc), DType::F32));
      EXPECT_EQ(std::memcmp(wide.raw(), hc.to_f32().raw(), static_cast<size_t>(wide.nbytes())), 0);
    }
  }
}

TEST(CudaOps, GatherRows) {
  Device dev;
  Rng rng(2);
  const Tensor x = rng.host({9, 3, 5});
  const std::vector<int32_t> idx = {8, 0, 3, 3, 7, 1};
  const Tensor y = to_host(dev, gather_rows(dev, to_device(dev, x), up_i32(dev, idx)));
  for (size_t r = 0; r < idx.size(); ++r)
    EXPECT_EQ(std::memcmp(static_cast<const float*>(y.raw()) + r * 15, static_cast<const float*>(x.raw()) + idx[r] * 15,
                          15 * sizeof(float)),
              0);
  EXPECT_THROW(gather_rows(dev, to_device(dev, x), up_i32(dev, {9})), RuntimeFailure);
}

TEST(CudaOps, Linear) {
  Device dev;
  Rng rng(3);
  // {M, K, N}: odd sizes, a 3-D x, and the model widths (MAGI-2 hidden 3072, MoE D_moe 256 /
  // expert 1280; H3 hidden 5376, ffn 14336), with N cut to keep the CPU reference quick.
  struct Case { Shape x; int64_t n; bool bias; };
  const std::vector<Case> cases = {{{1, 7}, 3, true},        {{7, 13}, 5, false},     {{2, 9, 64}, 129, true},
                                   {{33, 3072}, 3 * 128 + 1, true}, {{77, 256}, 2560, false}, {{77, 1280}, 256, true},
                                   {{45, 5376}, 1024, false}, {{19, 14336}, 512, true}};
  for (const Case& c : cases) {
    const int64_t K = c.x.back();
    // (x dtype, w dtype, out dtype): fp32 mode, bf16 production, bf16 -> fp32 out, mixed (widened).
    for (auto [xd, wd, od] : {std::tuple{DType::F32, DType::F32, DType::F32}, {DType::BF16, DType::BF16, DType::BF16},
                              {DType::BF16, DType::BF16, DType::F32}, {DType::F32, DType::BF16, DType::F32},
                              {DType::F16, DType::F16, DType::F32}}) {
      const Tensor x = rng.host(c.x, xd), w = rng.host({c.n, K}, wd, 1.f / std::sqrt(float(K)));
      const Tensor b = rng.host({c.n}, od == DType::F32 ? DType::F32 : od);
      const Tensor ref = ops::linear(x, w, c.bias ? &b : nullptr);
      const Tensor bd = up(dev, b, DType::F32);
      const Tensor y = linear(dev, up(dev, x, xd), up(dev, w, wd), c.bias ? &bd : nullptr, od);
      ASSERT_EQ(y.dtype(), od);
      ASSERT_EQ(y.shape(), ref.shape());
      const double t = od == DType::F32 ? (xd == DType::F32 ? kNmseF32Reduce : kNmseF32OutBf16In) : kNmseBf16Out;
      EXPECT_CLOSE(dev, y, ref, t,
                   name("linear", c.x, xd) + " w " + dt_name(wd) + " N " + std::to_string(c.n) + " -> " +
                       dt_name(od) + (c.bias ? " +bias" : ""));
    }
  }
}

TEST(CudaOps, LinearResidual) {
  // y = x . w^T (+ bias) + residual: the residual is cuBLASLt's C operand when it has the output's
  // dtype (MAGI-2's MoE sums its three outputs this way), else added after the GEMM.
  Device dev;
  Rng rng(14);
  struct Case { Shape x; int64_t n; bool bias; };
  for (const Case& c : {Case{{7, 13}, 5, false}, Case{{2, 9, 64}, 129, true}, Case{{77, 1280}, 256, false},
                        Case{{33, 3072}, 384, true}}) {
    const int64_t K = c.x.back();
    Shape ys = c.x;
    ys.back() = c.n;
    for (auto [xd, od, rd] : {std::tuple{DType::F32, DType::F32, DType::F32}, {DType::BF16, DType::BF16, DType::BF16},
                              {DType::BF16, DType::F32, DType::F32}, {DType::BF16, DType::BF16, DType::F32}}) {
      const Tensor x = rng.host(c.x, xd), w = rng.host({c.n, K}, xd, 1.f / std::sqrt(float(K)));
      const Tensor b = rng.host({c.n}, DType::F32), r = rng.host(ys, rd, 2.f);
      const Tensor ref = ops::add(ops::linear(x, w, c.bias ? &b : nullptr), r);
      const Tensor bd = up(dev, b, DType::F32), rdv = up(dev, r, rd);
      const Tensor y = linear(dev, up(dev, x, xd), up(dev, w, xd), c.bias ? &bd : nullptr, od, &rdv);
      ASSERT_EQ(y.dtype(), od);
      ASSERT_EQ(y.shape(), ref.shape());
      const double t = od == DType::F32 ? (xd == DType::F32 ? kNmseF32Reduce : kNmseF32OutBf16In) : kNmseBf16Out;
      EXPECT_CLOSE(dev, y, ref, t,
                   name("linear + residual", c.x, xd) + " -> " + dt_name(od) + " residual " + dt_name(rd) +
                       (c.bias ? " +bias" : ""));
    }
  }
  const Tensor x = up(dev, rng.host({4, 8}, DType::BF16), DType::BF16);
  const Tensor w = up(dev, rng.host({3, 8}, DType::BF16), DType::BF16);
  const Tensor bad = up(dev, rng.host({4, 4}, DType::BF16), DType::BF16);
  EXPECT_THROW(linear(dev, x, w, nullptr, DType::BF16, &bad), BadInput);  // [4, 4] for a [4, 3] output
}

TEST(CudaOps, LinearUnalignedWeightSlice) {
  // Per-modality weights are row slices of one tensor; a slice can start at any 2-byte offset.
  Device dev;
  Rng rng(4);
  const Tensor x = rng.host({5, 37}, DType::BF16), w = rng.host({9, 37}, DType::BF16, 0.2f);
  const Tensor wd = up(dev, w, DType::BF16).slice_rows(1, 8);  // starts 74 bytes in
  const Tensor y = linear(dev, up(dev, x, DType::BF16), wd, nullptr, DType::F32);
  EXPECT_CLOSE(dev, y, ops::linear(x, w.slice_rows(1, 8)), kNmseF32OutBf16In, "linear unaligned slice");
}

TEST(CudaOps, AddBias) {
  // The epilogue of linear's cublasGemmEx fallback (taken when cuBLASLt has no kernel).
  Device dev;
  Rng rng(13);
  for (const Shape& s : {Shape{3, 5}, Shape{2, 7, 129}}) {
    const Tensor y = rng.host(s), b = rng.host({s.back()}, DType::BF16);
    Tensor ref = y.clone();
    for (int64_t i = 0; i < ref.numel(); ++i) ref.f32()[i] += std::as_const(b).f32()[i % s.back()];
    const Tensor bd = up(dev, b, DType::BF16);
    EXPECT_CLOSE(dev, add_bias(dev, to_device(dev, y), &bd, DType::F32), ref, kNmseF32Pointwise, name("add_bias", s, DType::F32));
    EXPECT_CLOSE(dev, add_bias(dev, to_device(dev, y), &bd, DType::BF16), ref, kNmseBf16Out, name("add_bias", s, DType::BF16));
  }
}

TEST(CudaOps, RmsNorm) {
  Device dev;
  Rng rng(5);
  for (const Shape& s : {Shape{5, 37}, Shape{33, 3072}, Shape{17, 5376}, Shape{9, 24, 128}, Shape{4, 56, 128}}) {
    const int64_t D = s.back();
    for (DType dt : kDtypes)
      for (bool one_plus : {false, true})
        for (bool has_w : {true, false}) {
          const Tensor x = rng.host(s, dt, 2.f, 0.3f), w = rng.host({D}, dt, 0.3f, one_plus ? 0.f : 1.f);
          const Tensor ref = ops::rms_norm(x, has_w ? w : Tensor(), 1e-6f, one_plus);
          const Tensor y = rms_norm(dev, up(dev, x, dt), has_w ? up(dev, w, dt) : Tensor(), 1e-6f, one_plus);
          EXPECT_CLOSE(dev, y, ref, tol(dt, true),
                       name("rms_norm", s, dt) + (one_plus ? " (1+w)" : " w") + (has_w ? "" : " none"));
        }
  }
}

TEST(CudaOps, RmsNormPerModalityWeights) {
  // Three weight rows (video, audio, text); each token picks one; q/k norms share it across heads.
  Device dev;
  Rng rng(6);
  for (const Shape& s : {Shape{11, 3072}, Shape{10, 24, 128}, Shape{7, 5, 33}}) {
    const int64_t T = s[0], D = s.back();
    for (DType dt : kDtypes) {
      const Tensor x = rng.host(s, dt), w = rng.host({3, D}, dt, 0.3f);
      std::vector<int32_t> group(static_cast<size_t>(T));
      for (int64_t t = 0; t < T; ++t) group[static_cast<size_t>(t)] = static_cast<int32_t>((t * 7 + 1) % 3);
      std::vector<Tensor> parts;
      for (int64_t t = 0; t < T; ++t)
        parts.push_back(ops::rms_norm(x.slice_rows(t, t + 1), w.select(group[static_cast<size_t>(t)]), 1e-6f, true));
      const Tensor ref = ops::concat_rows(parts);
      const Tensor gd = up_i32(dev, group);
      const Tensor y = rms_norm(dev, up(dev, x, dt), up(dev, w, dt), 1e-6f, true, &gd, DType::F32);
      EXPECT_CLOSE(dev, y, ref, kNmseF32Reduce, name("rms_norm grouped", s, dt));
    }
  }
}

TEST(CudaOps, UnaryAndBinary) {
  Device dev;
  Rng rng(7);
  for (const Shape& s : {Shape{1}, Shape{7, 13}, Shape{33, 3072}, Shape{5, 14336}}) {
    for (DType dt : kDtypes) {
      const Tensor a = rng.host(s, dt, 3.f), b = rng.host(s, dt);
      const Tensor ad = up(dev, a, dt), bd = up(dev, b, dt);
      EXPECT_CLOSE(dev, silu(dev, ad), ops::silu(a), tol(dt, false), name("silu", s, dt));
      EXPECT_CLOSE(dev, sigmoid(dev, ad), ops::sigmoid(a), tol(dt, false), name("sigmoid", s, dt));
      EXPECT_CLOSE(dev, add(dev, ad, bd), ops::add(a, b), tol(dt, false), name("add", s, dt));
      EXPECT_CLOSE(dev, mul(dev, ad, bd), ops::mul(a, b), tol(dt, false), name("mul", s, dt));
      Tensor acc = up(dev, a, DType::F32);  // the residual stream stays F32; b may be bf16
      add_(dev, acc, bd);
      EXPECT_CLOSE(dev, acc, ops::add(a, b), kNmseF32Pointwise, name("add_", s, dt));
    }
  }
}

// add and mul take a 16-byte vector kernel when every operand is F32 / BF16 and 16-byte aligned (plus
// the scalar kernel for the tail), else the scalar kernel alone. Both must give the same bits: the same
// values are added once from fresh (aligned) allocations and once from views one element in (every
// pointer misaligned), in every dtype mix, at a length with a tail.
TEST(CudaOps, BinaryVectorPathMatchesScalarPath) {
  Device dev;
  Rng rng(17);
  const int64_t n = 3 * 3072 + 5;
  for (DType at : {DType::F32, DType::BF16})
    for (DType bt : {DType::F32, DType::BF16}) {
      const Tensor a = rng.host({n + 1}, at, 3.f), b = rng.host({n + 1}, bt);
      // Aligned: a[1:], b[1:] as fresh allocations. Misaligned: views at element 1 of a, b.
      const Tensor a_al = up(dev, a.slice_rows(1, n + 1).clone(), at), b_al = up(dev, b.slice_rows(1, n + 1).clone(), bt);
      const Tensor a_mis = up(dev, a, at).slice_rows(1, n + 1), b_mis = up(dev, b, bt).slice_rows(1, n + 1);
      const std::string what = std::string(dtype_name(at)) + " + " + std::string(dtype_name(bt));
      for (int op = 0; op < 3; ++op) {
        Tensor got_al, got_mis;
        if (op == 0) {
          got_al = to_host(dev, add(dev, a_al, b_al));
          got_mis = to_host(dev, add(dev, a_mis, b_mis));
        } else if (op == 1) {
          got_al = to_host(dev, mul(dev, a_al, b_al));
          got_mis = to_host(dev, mul(dev, a_mis, b_mis));
        } else {  // in place, a F32 accumulator as the residual stream keeps it
          Tensor acc_al = up(dev, a.slice_rows(1, n + 1).clone(), DType::F32);
          Tensor acc_mis = up(dev, a, DType::F32).slice_rows(1, n + 1);
          add_(dev, acc_al, b_al);
          add_(dev, acc_mis, b_mis);
          got_al = to_host(dev, acc_al);
          got_mis = to_host(dev, acc_mis);
        }
        ASSERT_EQ(got_al.nbytes(), got_mis.nbytes());
        EXPECT_EQ(std::memcmp(got_al.raw(), got_mis.raw(), got_al.nbytes()), 0)
            << what << (op == 0 ? " add" : op == 1 ? " mul" : " add_") << ": vector and scalar paths differ";
        // And both against the CPU op (the values, not only the paths' agreement).
        const Tensor ref = op == 1 ? ops::mul(a.slice_rows(1, n + 1).to_f32(), b.slice_rows(1, n + 1).to_f32())
                                   : ops::add(a.slice_rows(1, n + 1).to_f32(), b.slice_rows(1, n + 1).to_f32());
        const Tensor g = got_al.to_f32();
        double worst = 0;
        for (int64_t i = 0; i < n; ++i)
          worst = std::max(worst, std::fabs(double(g.f32()[i]) - ref.f32()[i]) / (std::fabs(ref.f32()[i]) + 1e-3));
        const bool bf16_out = op == 2 ? false : at == DType::BF16;
        EXPECT_LE(worst, bf16_out ? 1.0 / 256 : 1e-6) << what << " op " << op;
      }
    }
}

// swiglu7 on interleaved pairs takes a vector kernel for aligned BF16 input and output with a multiple
// of 8 outputs: the same bits as the scalar kernel, which runs on a view one pair in (misaligned).
TEST(CudaOps, Swiglu7InterleavedVectorPathMatchesScalarPath) {
  Device dev;
  Rng rng(18);
  const int64_t rows = 9, width = 1280;
  const Tensor u = rng.host({rows * 2 * width + 2}, DType::BF16, 2.f);
  const Tensor u_al = up(dev, u.slice_rows(2, u.numel()).clone(), DType::BF16).reshape({rows, 2 * width});
  const Tensor u_mis = up(dev, u, DType::BF16).slice_rows(2, u.numel()).reshape({rows, 2 * width});
  const Tensor got_al = to_host(dev, swiglu7_interleaved(dev, u_al));
  const Tensor got_mis = to_host(dev, swiglu7_interleaved(dev, u_mis));
  ASSERT_EQ(got_al.nbytes(), got_mis.nbytes());
  EXPECT_EQ(std::memcmp(got_al.raw(), got_mis.raw(), got_al.nbytes()), 0) << "vector and scalar paths differ";
  const Tensor ref = models::magi2::swiglu7_interleaved(u.slice_rows(2, u.numel()).clone().reshape({rows, 2 * width}));
  EXPECT_CLOSE(dev, to_device(dev, got_al), ref, tol(DType::BF16, false), "swiglu7_interleaved vector path");
}

// swiglu7_interleaved into columns [col, col + width) of a wider buffer (the MAGI-2 MoE writes the shared
// expert's h beside the routed experts' output): the same bits as the plain call, every other column
// untouched; the vector kernel (BF16, col and row length multiples of 8) and the scalar one (F32 out; an
// odd column) both. concat_columns / slice_columns: exact copies against the host.
TEST(CudaOps, Swiglu7IntoColumnsAndConcat) {
  Device dev;
  Rng rng(19);
  const int64_t rows = 7, width = 1280;
  const Tensor u = up(dev, rng.host({rows, 2 * width}, DType::BF16, 4.f), DType::BF16);
  struct Case { DType out; int64_t L, col; };
  for (const Case& c : {Case{DType::BF16, 4352, 3072}, Case{DType::BF16, 1296, 8}, Case{DType::F32, 1300, 17}}) {
    const Tensor fill = rng.host({rows, c.L}, c.out, 1.f).to(c.out);  // (host() returns F32)
    Tensor into = up(dev, fill, c.out);
    swiglu7_interleaved(dev, u, c.out, &into, c.col);
    const Tensor got = to_host(dev, into), plain = to_host(dev, swiglu7_interleaved(dev, u, c.out));
    const size_t es = c.out == DType::F32 ? 4 : 2;
    int64_t bad_in = 0, bad_out = 0;
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t j = 0; j < c.L; ++j) {
        const char* g = static_cast<const char*>(got.raw()) + (r * c.L + j) * es;
        const bool inside = j >= c.col && j < c.col + width;
        const char* want = inside ? static_cast<const char*>(plain.raw()) + (r * width + j - c.col) * es
                                  : static_cast<const char*>(fill.raw()) + (r * c.L + j) * es;
        (inside ? bad_in : bad_out) += std::memcmp(g, want, es) != 0;
      }
    EXPECT_EQ(bad_in, 0) << "L " << c.L << " col " << c.col;
    EXPECT_EQ(bad_out, 0) << "L " << c.L << " col " << c.col << ": columns outside the slice changed";
  }
  Tensor too_narrow = cuda_empty(dev, {rows, width}, DType::BF16);
  EXPECT_THROW(swiglu7_interleaved(dev, u, DType::BF16, &too_narrow, 1), BadInput);

  const Tensor a = rng.host({5, 3}, DType::BF16, 1.f).to(DType::BF16), b = rng.host({5, 11}, DType::BF16, 1.f).to(DType::BF16);
  const Tensor ab = to_host(dev, concat_columns(dev, up(dev, a, DType::BF16), up(dev, b, DType::BF16)));
  ASSERT_EQ(ab.shape(), (Shape{5, 14}));
  int64_t bad = 0;
  for (int64_t r = 0; r < 5; ++r) {
    bad += std::memcmp(static_cast<const char*>(ab.raw()) + r * 28, static_cast<const char*>(a.raw()) + r * 6, 6) != 0;
    bad += std::memcmp(static_cast<const char*>(ab.raw()) + r * 28 + 6, static_cast<const char*>(b.raw()) + r * 22, 22) != 0;
  }
  EXPECT_EQ(bad, 0);
  const Tensor back = to_host(dev, slice_columns(dev, up(dev, ab, DType::BF16), 3, 11));
  EXPECT_EQ(std::memcmp(back.raw(), b.raw(), size_t(b.nbytes())), 0);
  EXPECT_THROW(concat_columns(dev, up(dev, a, DType::BF16), up(dev, rng.host({4, 2}, DType::BF16, 1.f), DType::BF16)),
               BadInput);
  EXPECT_THROW(slice_columns(dev, up(dev, ab, DType::BF16), 10, 5), BadInput);
}

TEST(CudaOps, GatedActivations) {
  Device dev;
  Rng rng(8);
  // rows x width (of the output): odd, MAGI-2 expert 1280 and dense, H3 ffn 14336.
  for (auto [rows, width] : {std::pair<int64_t, int64_t>{3, 5}, {17, 1280}, {9, 6144}, {6, 14336}}) {
    for (DType dt : kDtypes) {
      // Scale 4 so that the clamps at +-7 are exercised.
      const Tensor u = rng.host({rows, 2 * width}, dt, 4.f);
      const Tensor g = rng.host({rows, width}, dt, 4.f), l = rng.host({rows, width}, dt, 4.f);
      const Tensor ud = up(dev, u, dt);
      EXPECT_CLOSE(dev, swiglu(dev, ud), models::h3::swiglu(u), tol(dt, false), name("swiglu", u.shape(), dt));
      EXPECT_CLOSE(dev, swiglu7_interleaved(dev, ud), models::magi2::swiglu7_interleaved(u), tol(dt, false),
                   name("swiglu7_interleaved", u.shape(), dt));
      EXPECT_CLOSE(dev, swiglu7_split(dev, up(dev, g, dt), up(dev, l, dt)), models::magi2::swiglu7_split(g, l),
                   tol(dt, false), name("swiglu7_split", g.shape(), dt));
      // bf16 input, fp32 output: only the input rounding, which both sides share.
      EXPECT_CLOSE(dev, swiglu7_interleaved(dev, ud, DType::F32), models::magi2::swiglu7_interleaved(u),
                   kNmseF32Pointwise, name("swiglu7_interleaved ->F32", u.shape(), dt));
    }
  }
}

TEST(CudaOps, ModulationAndGatedResidual) {
  Device dev;
  Rng rng(9);
  for (auto [S, H] : {std::pair<int64_t, int64_t>{5, 7}, {21, 3072}, {13, 5376}}) {
    for (DType dt : kDtypes) {
      // adaLN table [T, 3H] = shift | scale | gate, T = 4 rows (modalities x timesteps).
      const int64_t T = 4;
      const Tensor x = rng.host({S, H}, dt), f = rng.host({S, H}, dt), table = rng.host({T, 3 * H}, dt, 0.5f);
      std::vector<int32_t> idx(static_cast<size_t>(S));
      std::vector<int64_t> idx64(static_cast<size_t>(S));
      for (int64_t r = 0; r < S; ++r) idx64[static_cast<size_t>(r)] = idx[static_cast<size_t>(r)] = (r * 5 + 2) % T;
      const float* tb = std::as_const(table).f32();
      const models::h3::ModRows shift{tb, 3 * H}, scale{tb + H, 3 * H}, gate{tb + 2 * H, 3 * H};
      Tensor ref_mod = x.clone();
      models::h3::modulate_(ref_mod, shift, scale, idx64);
      Tensor ref_res = x.clone();
      models::h3::gated_residual_(ref_res, gate, f, idx64);

      const Tensor td = up(dev, table, dt), id = up_i32(dev, idx);
      EXPECT_CLOSE(dev, modulate(dev, up(dev, x, dt), {td, 0}, {td, H}, id), ref_mod, tol(dt, false),
                   name("modulate", x.shape(), dt));
      Tensor xd = up(dev, x, DType::F32);  // the residual stream is F32 in both modes
      gated_residual_(dev, xd, {td, 2 * H}, up(dev, f, dt), id);
      EXPECT_CLOSE(dev, xd, ref_res, kNmseF32Pointwise, name("gated_residual_", x.shape(), dt));
    }
  }
}

TEST(CudaOps, RopeRotateHalf) {
  Device dev;
  Rng rng(10);
  // {S, H, D, R}: partial rotary (R < D), full rotary, odd sizes.
  for (auto [S, H, D, R] : {std::tuple<int64_t, int64_t, int64_t, int64_t>{3, 1, 6, 4}, {11, 3, 64, 32},
                            {37, 24, 128, 64}, {19, 56, 128, 128}}) {
    for (DType dt : kDtypes) {
      Tensor x = rng.host({S, H, D}, dt);
      // Real angles: cos / sin of random phases (tables stay F32, as the models keep them).
      Tensor cos = Tensor::empty({S, R / 2}, DType::F32), sin = Tensor::empty({S, R / 2}, DType::F32);
      const Tensor ph = rng.host({S, R / 2}, DType::F32, 3.f);
      for (int64_t i = 0; i < ph.numel(); ++i) {
        cos.f32()[i] = std::cos(std::as_const(ph).f32()[i]);
        sin.f32()[i] = std::sin(std::as_const(ph).f32()[i]);
      }
      Tensor xd = up(dev, x, dt);
      rope_rotate_half_(dev, xd, to_device(dev, cos), to_device(dev, sin));
      ops::rope_rotate_half_(x, cos, sin);
      EXPECT_CLOSE(dev, xd, x, tol(dt, false), name("rope R=" + std::to_string(R), x.shape(), dt));
    }
  }
}

TEST(CudaOps, Attention) {
  Device dev;
  Rng rng(11);
  struct Case { int64_t S, Hq, Hkv, D; std::vector<int64_t> cu; bool sinks, gate; };
  const std::vector<Case> cases = {
      {13, 2, 1, 32, {}, false, false},                  // GQA 2:1, one segment
      {29, 3, 3, 80, {0, 1, 17, 29}, true, false},       // odd D, a one-token segment, sinks
      {97, 24, 8, 128, {0, 40, 41, 97}, true, true},     // MAGI-2 heads 24 x 128, GQA 3:1, sinks + gate
      {70, 56, 56, 128, {0, 30, 70}, false, false},      // H3 56 x 128, two documents
      {33, 4, 2, 256, {0, 33}, true, true}};             // the kernel's largest head dim
  for (const Case& c : cases) {
    for (DType dt : kDtypes) {
      const Tensor q = rng.host({c.S, c.Hq, c.D}, dt), k = rng.host({c.S, c.Hkv, c.D}, dt),
                   v = rng.host({c.S, c.Hkv, c.D}, dt);
      const Tensor sinks = rng.host({c.Hq}, DType::F32, 2.f), gate = rng.host({c.S, c.Hq}, dt, 2.f);
      const float scale = 1.0f / std::sqrt(float(c.D));
      Tensor ref = ops::attention(q, k, v, scale, c.cu, c.sinks ? &sinks : nullptr);
      if (c.gate)
        for (int64_t s = 0; s < c.S; ++s)
          for (int64_t h = 0; h < c.Hq; ++h) {
            const float g = 1.f / (1.f + std::exp(-std::as_const(gate).f32()[s * c.Hq + h]));
            for (int64_t d = 0; d < c.D; ++d) ref.f32()[(s * c.Hq + h) * c.D + d] *= g;
          }
      std::vector<int32_t> cu32(c.cu.begin(), c.cu.end());
      const Tensor cud = cu32.empty() ? Tensor() : up_i32(dev, cu32);
      const Tensor sd = to_device(dev, sinks), gd = up(dev, gate, dt);
      const Tensor y = attention(dev, up(dev, q, dt), up(dev, k, dt), up(dev, v, dt), scale, cud,
                                 c.sinks ? &sd : nullptr, c.gate ? &gd : nullptr);
      EXPECT_CLOSE(dev, y, ref, tol(dt, true),
                   name("attention", q.shape(), dt) + " kv " + std::to_string(c.Hkv) + (c.sinks ? " sinks" : "") +
                       (c.gate ? " gate" : ""));
    }
  }
}

TEST(CudaOps, DeterministicBits) {
  Device dev;
  Rng rng(12);
  const Tensor x = up(dev, rng.host({77, 3072}), DType::BF16), w = up(dev, rng.host({2048, 3072}, DType::F32, 0.02f), DType::BF16);
  const Tensor q = up(dev, rng.host({97, 24, 128}), DType::BF16), k = up(dev, rng.host({97, 8, 128}), DType::BF16),
               v = up(dev, rng.host({97, 8, 128}), DType::BF16);
  const Tensor sinks = to_device(dev, rng.host({24}));
  const Tensor cu = up_i32(dev, {0, 50, 97});
  auto run = [&] {
    std::vector<Tensor> outs;
    outs.push_back(to_host(dev, linear(dev, x, w, nullptr, DType::BF16)));
    outs.push_back(to_host(dev, linear(dev, x, w, nullptr, DType::F32)));
    outs.push_back(to_host(dev, rms_norm(dev, x, Tensor(), 1e-6f)));
    outs.push_back(to_host(dev, attention(dev, q, k, v, 0.088f, cu, &sinks)));
    return outs;
  };
  const auto a = run(), b = run();
  for (size_t i = 0; i < a.size(); ++i)
    EXPECT_EQ(std::memcmp(a[i].raw(), b[i].raw(), static_cast<size_t>(a[i].nbytes())), 0) << "output " << i;
}

TEST(CudaOps, BadInputIsReported) {
  Device dev;
  const Tensor host = Tensor::from_floats({1, 2, 3, 4}, {2, 2});
  EXPECT_THROW(silu(dev, host), BadInput);  // a host tensor given to a device op
  const Tensor d = to_device(dev, host);
  EXPECT_THROW(add(dev, d, to_device(dev, Tensor::from_floats({1, 2, 3}, {3}))), BadInput);
  EXPECT_THROW(linear(dev, d, to_device(dev, Tensor::from_floats({1, 2, 3}, {1, 3}))), BadInput);
  EXPECT_THROW(cast(dev, d, DType::I32), BadInput);
}

}  // namespace
}  // namespace avdit::cuda
