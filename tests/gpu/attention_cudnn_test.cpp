// The cuDNN attention path and its fused passes against CPU references on fresh random inputs:
// O and LSE of cuDNN SDPA and the full sinks + gate result against a float64 loop written here
// (small L), cuda::attention against the float32 CPU op at the models' widths (24 x 128 with sinks
// and gate, 56 x 128, GQA 32/8 x 128) at L in the thousands with several segments, and the fused
// QK-norm + RoPE pre-pass against ops::rms_norm + ops::rope_rotate_half_; and cuDNN's FP8 graph's
// repeatability (at the end).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <utility>
#include <optional>
#include <vector>

#include "backend/cuda/context.h"
#include "ops/attention.h"
#include "ops/cuda/attention_cudnn.h"
#include "ops/cuda/attention_portable.h"
#include "ops/cuda/attention_sink_gate.h"
#include "ops/linear_fp8.h"
#include "ops/rows.h"
#include "testing/fp8_attention_inputs.h"

namespace avdit::cuda {
namespace {

// ---- tolerances: normalised mean squared error sum (got - ref)^2 / sum ref^2 -----------------------
// Inputs are rounded to the storage dtype before either side sees them, so what remains is the
// path's own rounding: cuDNN rounds the probabilities P to the io dtype before the P.V product
// (relative 2^-8 for bf16, 2^-11 for f16, per term, mostly averaging out) and rounds O; the
// sink/gate pass rounds once more. Each rounding costs NMSE ~2.5e-6 (bf16) / ~4e-8 (f16). A wrong
// index, segment or formula gives 1e-2 .. 1.
constexpr double kNmseBf16 = 5e-5;
constexpr double kNmseF16 = 2e-6;
constexpr double kNmseF32 = 1e-10;  // the pre-pass in fp32 against the CPU ops (order of sums only)
// LSE is fp32 math on exactly the same (rounded) inputs: absolute error in natural-log units.
constexpr double kLseAbs = 2e-3;

double tol(DType d) { return d == DType::BF16 ? kNmseBf16 : d == DType::F16 ? kNmseF16 : kNmseF32; }

struct Rng {
  std::mt19937 gen;
  explicit Rng(uint32_t seed) : gen(seed) {}
  // Normal values rounded to `dtype`, returned as F32 (the CPU and the device see the same numbers).
  Tensor host(Shape shape, DType dtype = DType::F32, float scale = 1.f) {
    Tensor t = Tensor::empty(std::move(shape), DType::F32);
    std::normal_distribution<float> d(0.f, scale);
    for (int64_t i = 0; i < t.numel(); ++i) t.f32()[i] = d(gen);
    return dtype == DType::F32 ? t : t.to(dtype).to_f32();
  }
};

Tensor up(Device& dev, const Tensor& host_f32, DType dtype) { return to_device(dev, host_f32.to(dtype)); }
Tensor up_i32(Device& dev, const std::vector<int32_t>& v) {
  return to_device(dev, Tensor::from_data({static_cast<int64_t>(v.size())}, DType::I32, v.data()));
}

// ops::attention on a CUDA context over cu's documents (the plan the models use), output in `out`.
Tensor op_attention(ops::CudaContext& c, const Tensor& q, const Tensor& k, const Tensor& v, float scale,
                    const std::vector<int64_t>& cu, const Tensor* sinks, const Tensor* gate,
                    std::optional<DType> out = {}) {
  const ops::Segments seg = ops::plan_segments(c, cu, q.size(1), q.size(2), q.dtype());
  return ops::attention(c, q, k, v, scale, seg, sinks, gate, out);
}
// The portable fp32 kernel alone, F32 output.
Tensor portable(Device& dev, const Tensor& q, const Tensor& k, const Tensor& v, float scale, const Tensor& cu,
                const Tensor* sinks, const Tensor* gate) {
  Tensor y = cuda_empty(dev, q.shape(), DType::F32);
  portable_attention(dev, q, k, v, scale, cu, sinks, gate, y);
  return y;
}

double nmse(const Tensor& got, const Tensor& ref) {
  const Tensor g = got.to_f32(), r = ref.to_f32();
  EXPECT_EQ(g.numel(), r.numel());
  double num = 0, den = 0;
  for (int64_t i = 0; i < r.numel(); ++i) {
    const double a = std::as_const(g).f32()[i], b = std::as_const(r).f32()[i];
    if (!std::isfinite(a)) return INFINITY;
    num += (a - b) * (a - b);
    den += b * b;
  }
  return den > 0 ? num / den : num;
}

#define EXPECT_NMSE(got_host, ref, bound, what)                                             \
  do {                                                                                      \
    const double e_ = nmse(got_host, ref);                                                  \
    const std::string w_ = (what);                                                          \
    std::printf("  nmse %-72s %.2e (bound %.0e)\n", w_.c_str(), e_, double(bound));          \
    EXPECT_LE(e_, bound) << w_;                                                             \
  } while (0)

std::string label(const char* what, int64_t S, int64_t Hq, int64_t Hkv, int64_t D, DType dt, size_t segs) {
  return std::string(what) + " S=" + std::to_string(S) + " H=" + std::to_string(Hq) + "/" + std::to_string(Hkv) +
         " D=" + std::to_string(D) + " " + std::string(dtype_name(dt)) + " segs=" + std::to_string(segs);
}

// Segment boundaries of S tokens: `n` segments of random lengths (at least 1 token each).
std::vector<int64_t> segments(std::mt19937& gen, int64_t S, int n) {
  std::vector<int64_t> cu = {0};
  if (n <= 1) return {0, S};
  std::uniform_int_distribution<int64_t> d(1, S - 1);
  std::vector<int64_t> cuts;
  while (static_cast<int>(cuts.size()) < n - 1) {
    const int64_t c = d(gen);
    if (std::find(cuts.begin(), cuts.end(), c) == cuts.end()) cuts.push_back(c);
  }
  std::sort(cuts.begin(), cuts.end());
  cu.insert(cu.end(), cuts.begin(), cuts.end());
  cu.push_back(S);
  return cu;
}

std::vector<int32_t> i32(const std::vector<int64_t>& v) { return {v.begin(), v.end()}; }

// float64 reference: o (with sinks and gate when given) [S, Hq, D] and lse [S, Hq] (without sinks).
struct Ref64 {
  std::vector<double> o, lse;
};
Ref64 attention64(const Tensor& q, const Tensor& k, const Tensor& v, double scale, const std::vector<int64_t>& cu,
                  const Tensor* sinks, const Tensor* gate) {
  const int64_t S = q.size(0), Hq = q.size(1), D = q.size(2), Hkv = k.size(1);
  const float *pq = q.f32(), *pk = k.f32(), *pv = v.f32();
  Ref64 r{std::vector<double>(S * Hq * D), std::vector<double>(S * Hq)};
  std::vector<double> sc;
  for (size_t seg = 0; seg + 1 < cu.size(); ++seg)
    for (int64_t s = cu[seg]; s < cu[seg + 1]; ++s)
      for (int64_t h = 0; h < Hq; ++h) {
        const int64_t kh = h / (Hq / Hkv);
        sc.assign(cu[seg + 1] - cu[seg], 0.0);
        double m = -INFINITY;
        for (int64_t j = cu[seg]; j < cu[seg + 1]; ++j) {
          double dot = 0;
          for (int64_t d = 0; d < D; ++d) dot += double(pq[(s * Hq + h) * D + d]) * pk[(j * Hkv + kh) * D + d];
          sc[j - cu[seg]] = dot * scale;
          m = std::max(m, dot * scale);
        }
        double l = 0;
        for (double& x : sc) l += (x = std::exp(x - m));
        r.lse[s * Hq + h] = m + std::log(l);
        double den = l;
        if (sinks) den += std::exp(double(sinks->f32()[h]) - m);
        double g = 1;
        if (gate) g = 1 / (1 + std::exp(-double(gate->f32()[s * Hq + h])));
        for (int64_t d = 0; d < D; ++d) {
          double acc = 0;
          for (int64_t j = cu[seg]; j < cu[seg + 1]; ++j) acc += sc[j - cu[seg]] * pv[(j * Hkv + kh) * D + d];
          r.o[(s * Hq + h) * D + d] = acc / den * g;
        }
      }
  return r;
}

Tensor as_tensor(const std::vector<double>& v, Shape shape) {
  Tensor t = Tensor::empty(std::move(shape), DType::F32);
  for (size_t i = 0; i < v.size(); ++i) t.f32()[i] = static_cast<float>(v[i]);
  return t;
}

// LSE from the device in [S, Hq] order whatever layout cuDNN wrote.
Tensor lse_host(Device& dev, const LseView& l, int64_t S, int64_t Hq) {
  const Tensor raw = to_host(dev, l.lse);
  Tensor t = Tensor::empty({S, Hq}, DType::F32);
  for (int64_t s = 0; s < S; ++s)
    for (int64_t h = 0; h < Hq; ++h) t.f32()[s * Hq + h] = std::as_const(raw).f32()[s * l.stride_s + h * l.stride_h];
  return t;
}

class CudnnAttention : public ::testing::Test {
 protected:
  void SetUp() override {
    std::printf("  cuDNN backend version %d\n", cudnn_version());
    Tensor z = Tensor::empty({1, 1, 64}, DType::BF16);
    if (!cudnn_attention_available(dev, to_device(dev, z), to_device(dev, z), to_device(dev, z)))
      GTEST_SKIP() << "this build or GPU has no cuDNN SDPA: only the portable kernel runs";
  }
  Device dev;
  ops::CudaContext ctx{dev};
};

// cuDNN's O and LSE (natural log, scale included) against float64; then cuda::attention with sinks
// and gate (cuDNN + the sink/gate pass) against float64 and against the portable kernel.
TEST_F(CudnnAttention, SmallAgainstFloat64) {
  Rng rng(101);
  struct Case { int64_t S, Hq, Hkv, D; int segs; };
  const std::vector<Case> cases = {{37, 4, 2, 64, 1}, {130, 6, 3, 128, 3}, {77, 4, 4, 128, 4}, {64, 8, 2, 80, 2}};
  for (const Case& c : cases)
    for (DType dt : {DType::BF16, DType::F16}) {
      const Tensor q = rng.host({c.S, c.Hq, c.D}, dt), k = rng.host({c.S, c.Hkv, c.D}, dt),
                   v = rng.host({c.S, c.Hkv, c.D}, dt);
      const Tensor sinks = rng.host({c.Hq}, DType::F32, 2.f), gate = rng.host({c.S, c.Hq}, dt, 2.f);
      const auto cu = segments(rng.gen, c.S, c.segs);
      const double scale = 1.0 / std::sqrt(double(c.D));
      const Tensor qd = up(dev, q, dt), kd = up(dev, k, dt), vd = up(dev, v, dt);
      const Tensor cud = c.segs > 1 ? up_i32(dev, i32(cu)) : Tensor();

      const Ref64 plain = attention64(q, k, v, scale, cu, nullptr, nullptr);
      const SdpaOut r = cudnn_sdpa(dev, qd, kd, vd, float(scale), cud);
      EXPECT_NMSE(to_host(dev, r.o), as_tensor(plain.o, {c.S, c.Hq, c.D}), tol(dt),
                  label("cudnn O", c.S, c.Hq, c.Hkv, c.D, dt, cu.size() - 1));
      const Tensor lse = lse_host(dev, r.lse, c.S, c.Hq);
      double worst = 0;
      for (int64_t i = 0; i < c.S * c.Hq; ++i) worst = std::max(worst, std::fabs(lse.f32()[i] - plain.lse[i]));
      std::printf("  lse max abs diff %.2e (bound %.0e)\n", worst, kLseAbs);
      EXPECT_LE(worst, kLseAbs);

      const Tensor sd = to_device(dev, sinks), gd = up(dev, gate, dt);
      // The variants the benchmark compares: no stats (torch's inference graph) and, from cuDNN
      // 9.13, the sink applied by cuDNN itself.
      const SdpaOut plain_nostats = cudnn_sdpa(dev, qd, kd, vd, float(scale), cud, nullptr, nullptr, false);
      EXPECT_NMSE(to_host(dev, plain_nostats.o), as_tensor(plain.o, {c.S, c.Hq, c.D}), tol(dt),
                  label("cudnn O without stats", c.S, c.Hq, c.Hkv, c.D, dt, cu.size() - 1));
      if (cudnn_version() >= 91300) {
        const Ref64 with_sinks = attention64(q, k, v, scale, cu, &sinks, nullptr);
        const SdpaOut ns = cudnn_sdpa(dev, qd, kd, vd, float(scale), cud, nullptr, &sd, false);
        EXPECT_NMSE(to_host(dev, ns.o), as_tensor(with_sinks.o, {c.S, c.Hq, c.D}), tol(dt),
                    label("cudnn native sink", c.S, c.Hq, c.Hkv, c.D, dt, cu.size() - 1));
      }
      const Ref64 full = attention64(q, k, v, scale, cu, &sinks, &gate);
      // The exact LSE correction (cuDNN before 9.13, or a refused sink graph): O and LSE without
      // the sink, then the sink and the gate in one pass.
      const Tensor yl = sink_gate(dev, r.o, r.lse, &sd, &gd);
      EXPECT_NMSE(to_host(dev, yl), as_tensor(full.o, {c.S, c.Hq, c.D}), tol(dt),
                  label("LSE correction + gate", c.S, c.Hq, c.Hkv, c.D, dt, cu.size() - 1));
      // ops::attention: cuDNN's sink token when it has one, else the LSE correction.
      const Tensor y = op_attention(ctx, qd, kd, vd, float(scale), cu, &sd, &gd);
      EXPECT_NMSE(to_host(dev, y), as_tensor(full.o, {c.S, c.Hq, c.D}), tol(dt),
                  label("attention sinks+gate", c.S, c.Hq, c.Hkv, c.D, dt, cu.size() - 1));
      const Tensor yp = portable(dev, qd, kd, vd, float(scale), up_i32(dev, i32(cu)), &sd, &gd);
      EXPECT_NMSE(to_host(dev, yp), as_tensor(full.o, {c.S, c.Hq, c.D}), 1e-10,
                  label("portable (fp32 out)", c.S, c.Hq, c.Hkv, c.D, dt, cu.size() - 1));
      // An fp32 output from the cuDNN path: O rounded once by cuDNN, the pass itself exact.
      const Tensor y32 = op_attention(ctx, qd, kd, vd, float(scale), cu, &sd, &gd, DType::F32);
      EXPECT_EQ(y32.dtype(), DType::F32);
      EXPECT_NMSE(to_host(dev, y32), as_tensor(full.o, {c.S, c.Hq, c.D}), tol(dt),
                  label("attention fp32 out", c.S, c.Hq, c.Hkv, c.D, dt, cu.size() - 1));
    }
}

// The models' widths against the float32 CPU op, L in the thousands, several segments.
TEST_F(CudnnAttention, RealWidthsAgainstCpu) {
  Rng rng(102);
  struct Case { int64_t S, Hq, Hkv; int segs; bool sinks, gate; };
  const std::vector<Case> cases = {
      {2048, 24, 24, 3, true, true},   // MAGI-2 preview: 24 x 128, sinks, per-head gate
      {1536, 56, 56, 2, false, false},  // H3: 56 x 128, two documents
      {4096, 32, 8, 4, true, false},    // MAGI-2 refiner: 32 q / 8 kv heads
      {1024, 24, 24, 1, true, true}};   // one segment (the plain, non-ragged graph)
  const int64_t D = 128;
  for (const Case& c : cases)
    for (DType dt : {DType::BF16, DType::F16}) {
      const Tensor q = rng.host({c.S, c.Hq, D}, dt), k = rng.host({c.S, c.Hkv, D}, dt),
                   v = rng.host({c.S, c.Hkv, D}, dt);
      const Tensor sinks = rng.host({c.Hq}, DType::F32, 2.f), gate = rng.host({c.S, c.Hq}, dt, 2.f);
      const auto cu = segments(rng.gen, c.S, c.segs);
      const float scale = 1.0f / std::sqrt(float(D));
      Tensor ref = Tensor::empty(q.shape(), DType::F32);
      ops::Segments cpu_seg;
      cpu_seg.cu = cu;
      ops::cpu::attention(q, k, v, scale, cpu_seg, c.sinks ? &sinks : nullptr, nullptr, ref);
      if (c.gate)
        for (int64_t s = 0; s < c.S; ++s)
          for (int64_t h = 0; h < c.Hq; ++h) {
            const float g = 1.f / (1.f + std::exp(-std::as_const(gate).f32()[s * c.Hq + h]));
            for (int64_t d = 0; d < D; ++d) ref.f32()[(s * c.Hq + h) * D + d] *= g;
          }
      const Tensor cud = c.segs > 1 ? up_i32(dev, i32(cu)) : Tensor();
      const Tensor sd = to_device(dev, sinks), gd = up(dev, gate, dt);
      const Tensor qd = up(dev, q, dt), kd = up(dev, k, dt), vd = up(dev, v, dt);
      // The cuDNN path must run (not the fallback): cudnn_sdpa throws if cuDNN refuses the shape.
      (void)cudnn_sdpa(dev, qd, kd, vd, scale, cud);
      const Tensor y = op_attention(ctx, qd, kd, vd, scale, cu, c.sinks ? &sd : nullptr, c.gate ? &gd : nullptr);
      EXPECT_NMSE(to_host(dev, y), ref, tol(dt),
                  label(c.sinks ? (c.gate ? "vs cpu sinks+gate" : "vs cpu sinks") : "vs cpu", c.S, c.Hq, c.Hkv, D,
                        dt, cu.size() - 1));
    }
}

// Two calls give the same bits (the graph cache returns the same plan; no atomics in the pass).
TEST_F(CudnnAttention, Deterministic) {
  Rng rng(103);
  const Tensor q = up(dev, rng.host({300, 24, 128}), DType::BF16), k = up(dev, rng.host({300, 24, 128}), DType::BF16),
               v = up(dev, rng.host({300, 24, 128}), DType::BF16);
  const Tensor sinks = to_device(dev, rng.host({24})), gate = up(dev, rng.host({300, 24}), DType::BF16);
  const std::vector<int64_t> cu = {0, 100, 300};
  const Tensor a = to_host(dev, op_attention(ctx, q, k, v, 0.088f, cu, &sinks, &gate));
  const Tensor b = to_host(dev, op_attention(ctx, q, k, v, 0.088f, cu, &sinks, &gate));
  EXPECT_EQ(std::memcmp(a.raw(), b.raw(), static_cast<size_t>(a.nbytes())), 0);
}

// The post-pass alone with a row gather (MAGI-2 writes packed -> modality-sorted order in it).
TEST(SinkGate, GatherAgainstCpu) {
  Device dev;
  Rng rng(105);
  std::mt19937 gen(9);
  const int64_t S = 41, H = 5, D = 24;  // D % 8 == 0 but an odd row count
  for (DType dt : {DType::F32, DType::BF16, DType::F16}) {
    const Tensor o = rng.host({S, H, D}, dt), lse = rng.host({H, S}, DType::F32, 2.f);
    const Tensor sinks = rng.host({H}, DType::F32, 2.f), gate = rng.host({S, H}, dt, 2.f);
    std::vector<int32_t> rows(S);
    for (int64_t i = 0; i < S; ++i) rows[i] = static_cast<int32_t>(i);
    std::shuffle(rows.begin(), rows.end(), gen);
    Tensor ref = Tensor::empty({S, H, D}, DType::F32);
    for (int64_t r = 0; r < S; ++r)
      for (int64_t h = 0; h < H; ++h) {
        const double l = std::as_const(lse).f32()[h * S + rows[r]];
        const double c = std::exp(l - std::log(std::exp(l) + std::exp(double(std::as_const(sinks).f32()[h]))));
        const double g = 1 / (1 + std::exp(-double(std::as_const(gate).f32()[r * H + h])));
        for (int64_t d = 0; d < D; ++d)
          ref.f32()[(r * H + h) * D + d] = float(std::as_const(o).f32()[(rows[r] * H + h) * D + d] * c * g);
      }
    const Tensor rd = up_i32(dev, rows), sd = to_device(dev, sinks), gd = up(dev, gate, dt);
    const LseView lv{to_device(dev, lse), 1, S};
    const Tensor y = sink_gate(dev, up(dev, o, dt), lv, &sd, &gd, &rd);
    EXPECT_NMSE(to_host(dev, y), ref, dt == DType::F32 ? 1e-12 : tol(dt), "sink_gate gather " + std::string(dtype_name(dt)));
    // In place, no gather: identity rows.
    Tensor od = up(dev, o, dt);
    const Tensor y2 = sink_gate(dev, od, lv, &sd, nullptr);
    EXPECT_EQ(y2.raw(), od.raw());
  }
}


// ---- cuDNN's FP8 SDPA graph (a peer of ops::attention_fp8's own kernel in `bench attention`) --------
// ops::attention_fp8 itself runs the project's kernels: tests/gpu/attention_fp8_test.cpp.
class CudnnAttentionFp8 : public CudnnAttention {
 protected:
  void SetUp() override {
    CudnnAttention::SetUp();
    if (IsSkipped()) return;
    if (!cudnn_fp8_attention_available(dev))
      GTEST_SKIP() << "no cuDNN FP8 SDPA on this GPU (sm_90+, cuDNN >= 9.1)";
  }
};

struct Fp8Case {
  int64_t S, Hq, Hkv, D;
  std::vector<int64_t> cu;
  bool causal, anchored;
};

// Documents shorter than this gave cuDNN 9.14's FP8 graphs trouble (differing bytes).
constexpr int64_t kShortDocument = 1024;

// The dense graph of one document, from the same codes and scales: the same bytes twice in a row,
// and the same bytes whether the document's rows sit inside the whole tensor or alone in a fresh
// allocation, for the long document. H3's 336-row padding document is printed, not checked: cuDNN
// 9.14 gave differing bytes there (bench/notes/attention_fp8.md).
TEST_F(CudnnAttentionFp8, DenseDocumentSameBytesInPlaceAndAlone) {
  Rng rng(204);
  const Fp8Case c{1536, 56, 56, 128, {0, 1200, 1536}, false, true};
  const std::vector<Tensor> x = testing::fp8_attention_inputs(rng.gen, c.S, c.Hq, c.Hkv, c.D, c.cu, c.anchored);
  std::vector<ops::Fp8Weight> w;
  for (const Tensor& t : x)
    w.push_back(ops::quantize_fp8(ctx, up(dev, t, DType::BF16).reshape({c.S * c.Hq, c.D}), ops::Fp8Scaling::Tensor));
  Tensor p = Tensor::empty({2}, DType::F32);
  p.f32()[0] = 1.f / 448.f;
  p.f32()[1] = 448.f;
  const Tensor dp0 = to_device(dev, p.slice_rows(0, 1).clone()), dp1 = to_device(dev, p.slice_rows(1, 2).clone());
  SdpaFp8In whole;
  whole.q = w[0].codes.reshape({c.S, c.Hq, c.D});
  whole.k = w[1].codes.reshape({c.S, c.Hkv, c.D});
  whole.v = w[2].codes.reshape({c.S, c.Hkv, c.D});
  whole.descale_q = w[0].dequant;
  whole.descale_k = w[1].dequant;
  whole.descale_v = w[2].dequant;
  whole.descale_s = dp0;
  whole.scale_s = dp1;
  whole.scale_o = w[2].scales;
  const float scale = 1.0f / std::sqrt(float(c.D));
  for (size_t d = 0; d + 1 < c.cu.size(); ++d) {
    const int64_t r0 = c.cu[d], r1 = c.cu[d + 1];
    SdpaFp8In in = whole, alone = whole;
    for (Tensor SdpaFp8In::*t : {&SdpaFp8In::q, &SdpaFp8In::k, &SdpaFp8In::v}) {
      in.*t = (whole.*t).slice_rows(r0, r1);
      alone.*t = to_device(dev, to_host(dev, in.*t));  // a fresh allocation
    }
    Tensor o = ctx.zeros({c.S, c.Hq, c.D}, DType::F8_E4M3);
    std::vector<Tensor> got;
    for (int i = 0; i < 2; ++i) {
      Tensor slot = o.slice_rows(r0, r1);
      ASSERT_TRUE(cudnn_sdpa_fp8(dev, in, scale, slot));
      got.push_back(to_host(dev, slot));
    }
    Tensor oa = ctx.zeros({r1 - r0, c.Hq, c.D}, DType::F8_E4M3);
    ASSERT_TRUE(cudnn_sdpa_fp8(dev, alone, scale, oa));
    got.push_back(to_host(dev, oa));
    auto differing = [&](const Tensor& a, const Tensor& b) {
      int64_t n = 0;
      for (int64_t i = 0; i < a.nbytes(); ++i)
        n += static_cast<const uint8_t*>(a.raw())[i] != static_cast<const uint8_t*>(b.raw())[i];
      return n;
    };
    const int64_t twice = differing(got[0], got[1]), placed = differing(got[0], got[2]);
    std::printf("  document [%lld, %lld) of %lld x %lld x %lld: %lld bytes differ between two calls, %lld "
                "between in place and alone%s\n",
                (long long)r0, (long long)r1, (long long)c.S, (long long)c.Hq, (long long)c.D, (long long)twice,
                (long long)placed, r1 - r0 < kShortDocument ? " (short: printed only)" : "");
    if (r1 - r0 < kShortDocument) continue;  // what cuDNN does there, for the record
    EXPECT_EQ(twice, 0);
    EXPECT_EQ(placed, 0);
  }
}

}  // namespace
}  // namespace avdit::cuda
