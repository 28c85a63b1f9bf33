// `avdit bench attention`: the attention shapes of our models at 16k-128k tokens on one GPU —
// cuDNN SDPA (the core), the sink + gate pass over O, both together, ops::attention (what the
// models call) and the project's own Hopper kernel (ops::attention's Own plan: FlashAttention-3's
// arrangement with the sink and gate inside, where it applies) — in TFLOP/s against the
// dense-GEMM ceiling and, given the peer's JSON (bench/peers/attention_peer.py), against torch SDPA
// and, where the peer ran with --fa4-site, FlashAttention-4.
// FLOP convention: non-causal full attention, 4 L^2 Hq D (QK^T and PV, 2 flops per multiply-add).
#include <fmt/format.h>

#include <cmath>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <functional>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/report.h"
#include "bench_commands.h"
#include "core/error.h"
#include "io/output_file.h"
#include "io/safetensors.h"
#include "run_checks.h"

#if AVDIT_HAVE_CUDA
#include "backend/cuda/context.h"
#include "backend/cuda/timer.h"
#include "ops/attention.h"
#include "ops/attention_fp8.h"
#include "ops/linear_fp8.h"
#include "ops/cuda/attention_cudnn.h"
#endif

namespace avdit::app {
namespace {

struct AttnOptions {
  std::string lens = "16384,32768,65536,131072";
  std::string dtypes = "bf16,fp16";
  std::string shapes = "preview,h3,refiner";
  int iters = 10;
  int warmup = 2;
  double ceiling = 770;  // TFLOP/s, measured dense bf16 GEMM on the H200 (TARGETS.md)
  std::string json;
  std::string peer;
  std::string dump;
  int64_t dump_len = 600;
};

#if AVDIT_HAVE_CUDA

struct Shape3 {
  std::string name;
  int64_t hq, hkv, d;
  bool sinks_gate;
};

const std::vector<Shape3> kShapes = {{"preview", 24, 24, 128, true},  // MAGI-2 preview: sinks + per-head gate
                                     {"h3", 56, 56, 128, false},      // MiniMax-H3
                                     {"refiner", 32, 8, 128, false}};  // MAGI-2 refiner, GQA 4:1

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string t; std::getline(ss, t, ',');)
    if (!t.empty()) out.push_back(t);
  return out;
}

DType parse_dtype(const std::string& s) {
  if (s == "bf16") return DType::BF16;
  if (s == "fp16") return DType::F16;
  throw BadInput(fmt::format("bench attention: --dtype {}: expected bf16 or fp16", s));
}

// A device tensor of deterministic normal values (never zeros): a host block of a prime length is
// generated once and tiled, which costs seconds less than generating 10^9 values at 128k tokens and
// does not change the time of attention (no data-dependent paths).
Tensor filled(cuda::Device& dev, Shape shape, DType dt, float scale, uint32_t seed) {
  constexpr int64_t kBlock = 1048573;  // prime: rows do not line up with the period
  Tensor host = Tensor::empty({kBlock}, DType::F32);
  std::mt19937 gen(seed);
  std::normal_distribution<float> nd(0.f, scale);
  for (int64_t i = 0; i < kBlock; ++i) host.f32()[i] = nd(gen);
  const Tensor block = cuda::to_device(dev, host.to(dt));
  Tensor t = cuda::cuda_empty(dev, std::move(shape), dt);
  const int64_t n = t.numel(), es = dtype_nbytes(dt, 1);
  for (int64_t off = 0; off < n; off += kBlock) {
    const int64_t m = std::min(kBlock, n - off);
    AVDIT_CUDA_CHECK(cudaMemcpyAsync(static_cast<char*>(cuda::device_ptr(t)) + off * es, block.raw(),
                                     static_cast<size_t>(m * es), cudaMemcpyDeviceToDevice, dev.stream()));
  }
  dev.synchronize();
  return t;
}

// Peer rows (bench/peers/attention_peer.py --json) keyed by shape/dtype/L/backend: TFLOP/s.
double peer_tflops(const nlohmann::json& peer, const std::string& shape, const std::string& dt, int64_t L,
                   const std::string& backend) {
  if (!peer.is_array()) return 0;
  for (const auto& r : peer)
    if (r.value("shape", "") == shape && r.value("dtype", "") == dt && r.value("L", int64_t{0}) == L &&
        r.value("backend", "") == backend)
      return r.value("tflops", 0.0);
  return 0;
}

void write_bin(const std::filesystem::path& p, const Tensor& host) {
  write_file_atomic(p, std::string_view(static_cast<const char*>(host.raw()),
                                        static_cast<size_t>(host.nbytes())));
}

// Small deterministic inputs and avdit's output for the peer's equality check: q, k, v, gate in
// the io dtype, sinks F32, cu_seqlens I32 (two segments), out in the io dtype; meta.json says shapes.
void dump_case(cuda::Device& dev, const AttnOptions& o, const Shape3& sh, const std::string& dts) {
  const DType dt = parse_dtype(dts);
  const int64_t L = o.dump_len;
  const std::vector<int32_t> cu = {0, static_cast<int32_t>(L / 3), static_cast<int32_t>(L)};
  std::mt19937 gen(17);
  auto host = [&](Shape s, DType d, float scale) {
    Tensor t = Tensor::empty(std::move(s), DType::F32);
    std::normal_distribution<float> nd(0.f, scale);
    for (int64_t i = 0; i < t.numel(); ++i) t.f32()[i] = nd(gen);
    return t.to(d);
  };
  const Tensor q = host({L, sh.hq, sh.d}, dt, 1.f), k = host({L, sh.hkv, sh.d}, dt, 1.f),
               v = host({L, sh.hkv, sh.d}, dt, 1.f), gate = host({L, sh.hq}, dt, 2.f),
               sinks = host({sh.hq}, DType::F32, 2.f);
  ops::CudaContext ctx(dev);
  const ops::Segments seg = ops::plan_segments(ctx, {0, L / 3, L}, sh.hq, sh.d, dt);
  const Tensor sd = ctx.upload(sinks), gd = ctx.upload(gate);
  const float scale = 1.0f / std::sqrt(static_cast<float>(sh.d));
  const Tensor y = ctx.download(ops::attention(ctx, ctx.upload(q), ctx.upload(k), ctx.upload(v), scale, seg,
                                               sh.sinks_gate ? &sd : nullptr, sh.sinks_gate ? &gd : nullptr));
  const std::filesystem::path dir = std::filesystem::path(o.dump) / fmt::format("{}_{}", sh.name, dts);
  std::filesystem::create_directories(dir);
  write_bin(dir / "q.bin", q);
  write_bin(dir / "k.bin", k);
  write_bin(dir / "v.bin", v);
  write_bin(dir / "gate.bin", gate);
  write_bin(dir / "sinks.bin", sinks);
  write_bin(dir / "out.bin", y);
  nlohmann::json meta = {{"L", L},          {"hq", sh.hq},   {"hkv", sh.hkv},           {"d", sh.d},
                         {"dtype", dts},    {"scale", scale}, {"sinks_gate", sh.sinks_gate},
                         {"cu_seqlens", cu}};
  write_file_atomic(dir / "meta.json", meta.dump(2) + "\n");
}

int run_attention(const AttnOptions& o) {
  cuda::Device dev;
  ops::CudaContext ctx(dev);
  const auto lens = split(o.lens);
  const auto dtypes = split(o.dtypes);
  const auto shapes = split(o.shapes);
  nlohmann::json peer;
  if (!o.peer.empty()) {
    peer = read_json(o.peer);
  }
  const std::string date = bench::utc_now();
  std::printf("device: %s (sm_%d%d), cuDNN %d, %s; median of %d runs after %d warm-up\n", dev.props().name,
              dev.props().major, dev.props().minor, cuda::cudnn_version(), date.c_str(), o.iters, o.warmup);
  if (!o.dump.empty())
    for (const auto& name : shapes)
      for (const auto& dts : dtypes)
        for (const auto& sh : kShapes)
          if (sh.name == name) dump_case(dev, o, sh, dts);

  bench::Report rep("attention: cuDNN SDPA + sink/gate pass (FLOPs 4 L^2 Hq D, non-causal)");
  for (const auto& name : shapes) {
    const Shape3* sh = nullptr;
    for (const auto& s : kShapes)
      if (s.name == name) sh = &s;
    if (!sh) throw BadInput(fmt::format("bench attention: --shapes {}: expected preview, h3 or refiner", name));
    for (const auto& dts : dtypes) {
      const DType dt = parse_dtype(dts);
      for (const auto& ls : split(o.lens)) {
        const int64_t L = parse_int64(ls, "bench attention: --len");
        AVDIT_REQUIRE(L > 0, "bench attention: --len {}", ls);
        const Tensor q = filled(dev, {L, sh->hq, sh->d}, dt, 1.f, 1), k = filled(dev, {L, sh->hkv, sh->d}, dt, 1.f, 2),
                     v = filled(dev, {L, sh->hkv, sh->d}, dt, 1.f, 3);
        const Tensor gate = filled(dev, {L, sh->hq}, dt, 2.f, 4), sinks = filled(dev, {sh->hq}, DType::F32, 2.f, 5);
        const float scale = 1.0f / std::sqrt(static_cast<float>(sh->d));
        cuda::SdpaOut buf{cuda::cuda_empty(dev, {L, sh->hq, sh->d}, dt), {cuda::cuda_empty(dev, {L * sh->hq}, DType::F32)}};
        cuda::SdpaOut r = cuda::cudnn_sdpa(dev, q, k, v, scale, {}, &buf);  // builds the graph (untimed)
        const Tensor* sp = sh->sinks_gate ? &sinks : nullptr;
        const Tensor* gp = sh->sinks_gate ? &gate : nullptr;
        const auto core = cuda::time_on_stream(dev, [&] { cuda::cudnn_sdpa(dev, q, k, v, scale, {}, &buf); },
                                               o.warmup, o.iters);
        bench::Timing pass;
        if (sh->sinks_gate)
          pass = cuda::time_on_stream(dev, [&] { cuda::sink_gate(dev, r.o, r.lse, sp, gp); }, o.warmup, o.iters);
        // The same core without the LSE output (torch's inference graph) and with cuDNN's own sink
        // (>= 9.13): what the LSE output and the separate correction cost.
        const auto plain = cuda::time_on_stream(
            dev, [&] { cuda::cudnn_sdpa(dev, q, k, v, scale, {}, &buf, nullptr, false); }, o.warmup, o.iters);
        bench::Timing native;
        if (sh->sinks_gate && cuda::cudnn_version() >= 91300)
          native = cuda::time_on_stream(
              dev,
              [&] {
                cuda::SdpaOut x = cuda::cudnn_sdpa(dev, q, k, v, scale, {}, &buf, &sinks, false);
                cuda::sink_gate(dev, x.o, {}, nullptr, gp);
              },
              o.warmup, o.iters);
        const auto total = cuda::time_on_stream(
            dev,
            [&] {
              cuda::SdpaOut x = cuda::cudnn_sdpa(dev, q, k, v, scale, {}, &buf);
              if (sh->sinks_gate) cuda::sink_gate(dev, x.o, x.lse, sp, gp);
            },
            o.warmup, o.iters);
        // ops::attention itself (what the models call): the path below through the op's plan.
        const ops::Segments seg = ops::plan_segments(ctx, {0, L}, sh->hq, sh->d, dt);
        Tensor op_out = cuda::cuda_empty(dev, {L, sh->hq, sh->d}, dt);
        const auto op = cuda::time_on_stream(
            dev, [&] { ops::attention_into(ctx, q, k, v, scale, seg, sp, gp, op_out); }, o.warmup, o.iters);
        // The project's own kernel (the Own plan) where it applies: sm_90, bf16, head dim 128.
        const bool own_applies = dev.props().major == 9 && dev.props().minor == 0 && dt == DType::BF16 && sh->d == 128;
        bench::Timing own;
        if (own_applies) {
          const ops::Segments own_seg = ops::cuda::plan_segments_as(ctx, {0, L}, ops::SegmentPlan::Own);
          own = cuda::time_on_stream(
              dev, [&] { ops::attention_into(ctx, q, k, v, scale, own_seg, sp, gp, op_out); }, o.warmup, o.iters);
        }
        // The FP8 option (ops::attention_fp8: its quantize pass included; sinks, no gate), where the
        // project's Hopper FP8 kernel runs it (where the own bf16 kernel does).
        bench::Timing fp8, fp8_graph;
        if (own_applies) {
          fp8 = cuda::time_on_stream(
              dev, [&] { ops::attention_fp8_into(ctx, q, k, v, scale, seg, op_out, sp); }, o.warmup, o.iters);
          // The same from a CUDA graph (as the models' steps run): without the host's launches and
          // allocations between the timing events.
          const uint64_t key = 0xf8a7000000000000ull ^ (static_cast<uint64_t>(L) << 8) ^ std::hash<std::string>{}(sh->name);
          auto graphed = [&] {
            ctx.run_fixed(key, [&] { ops::attention_fp8_into(ctx, q, k, v, scale, seg, op_out, sp); });
          };
          graphed();  // eager
          graphed();  // captured
          fp8_graph = cuda::time_on_stream(dev, graphed, o.warmup, o.iters);
          ctx.forget_fixed();
        }
        // cuDNN's FP8 SDPA (per-tensor scales, e4m3 output) on codes made beforehand: its core alone,
        // so the FP8 column above (quantize pass included) is the conservative side of the ratio.
        bench::Timing cudnn_fp8;
        if (own_applies && cuda::cudnn_fp8_attention_available(dev)) {
          auto codes = [&](const Tensor& x) {
            return ops::quantize_fp8(ctx, x.reshape({x.size(0) * x.size(1), x.size(2)}), ops::Fp8Scaling::Tensor);
          };
          const ops::Fp8Weight wq = codes(q), wk = codes(k), wv = codes(v);
          cuda::SdpaFp8In in;
          in.q = wq.codes.reshape(q.shape());
          in.k = wk.codes.reshape(k.shape());
          in.v = wv.codes.reshape(v.shape());
          in.descale_q = wq.dequant;
          in.descale_k = wk.dequant;
          in.descale_v = wv.dequant;
          // P's codes at 448 (P <= 1); O's at v's scale.
          Tensor host_p = Tensor::zeros({8}, DType::F32);
          host_p.f32()[0] = 1.f / 448.f;  // 16-byte slots: cuDNN's alignment
          host_p.f32()[4] = 448.f;
          const Tensor p_scales = cuda::to_device(dev, host_p);
          in.descale_s = p_scales.slice_rows(0, 1);
          in.scale_s = p_scales.slice_rows(4, 5);
          in.scale_o = wv.scales;
          Tensor o8 = ctx.empty(q.shape(), DType::F8_E4M3);
          if (cuda::cudnn_sdpa_fp8(dev, in, scale, o8))
            cudnn_fp8 = cuda::time_on_stream(dev, [&] { cuda::cudnn_sdpa_fp8(dev, in, scale, o8); }, o.warmup, o.iters);
        }
        const double flop = 4.0 * double(L) * double(L) * double(sh->hq) * double(sh->d);
        // The headline is the path cuda::attention takes: cuDNN's sink token + the gate pass when
        // cuDNN has it (>= 9.13), the LSE correction pass otherwise; without sinks, the no-LSE core.
        const bool use_native = sh->sinks_gate && !native.ms.empty();
        const bench::Timing& path = use_native ? native : (sh->sinks_gate ? total : plain);
        const double tf = flop / (path.median() * 1e-3) / 1e12;
        const double tf_core = flop / (core.median() * 1e-3) / 1e12;
        const double peer_cudnn = peer_tflops(peer, sh->name, dts, L, "cudnn");
        const double peer_flash = peer_tflops(peer, sh->name, dts, L, "flash");
        // FlashAttention-4 (the peer's --fa4-site): with its learnable sink where the shape has sinks.
        const double peer_fa4 = peer_tflops(peer, sh->name, dts, L, sh->sinks_gate ? "fa4+sink" : "fa4");
        rep.row();
        rep.set("shape", fmt::format("{} {}{}x{}", sh->name, sh->hq, sh->hkv != sh->hq ? fmt::format("/{}", sh->hkv) : "",
                                     sh->d));
        rep.set("dtype", dts);
        rep.set("L", L);
        rep.set("sinks+gate", std::string(sh->sinks_gate ? "yes" : "no"));
        rep.set("LSE core ms", core.median(), 2);
        rep.set("no-LSE core ms", plain.median(), 2);
        rep.set("pass ms", sh->sinks_gate ? pass.median() : 0.0, 3);
        rep.set("LSE path ms", total.median(), 2);
        rep.set("path", std::string(use_native ? "sink token" : (sh->sinks_gate ? "LSE corr." : "no LSE")));
        rep.set("path ms", path.median(), 2);
        rep.set("spread ms", path.max() - path.min(), 2);
        rep.set("LSE core TFLOP/s", tf_core, 0);
        rep.set("TFLOP/s", tf, 0);
        rep.set(fmt::format("of {:.0f}", o.ceiling), tf / o.ceiling, 3);
        rep.set("vs torch cuDNN", peer_cudnn > 0 ? tf / peer_cudnn : 0.0, 3);
        rep.set("vs torch FA2", peer_flash > 0 ? tf / peer_flash : 0.0, 3);
        rep.set("ops::attention ms", op.median(), 2);
        const double tf_own = own_applies ? flop / (own.median() * 1e-3) / 1e12 : 0.0;
        rep.set("own ms", own_applies ? own.median() : 0.0, 2);
        rep.set("own TFLOP/s", tf_own, 0);
        rep.set("own vs path", own_applies ? path.median() / own.median() : 0.0, 3);
        rep.set("own vs torch cuDNN", own_applies && peer_cudnn > 0 ? tf_own / peer_cudnn : 0.0, 3);
        rep.set("own vs FA4", own_applies && peer_fa4 > 0 ? tf_own / peer_fa4 : 0.0, 3);
        const double tf_fp8 = own_applies ? flop / (fp8.median() * 1e-3) / 1e12 : 0.0;
        rep.set("fp8 ms", own_applies ? fp8.median() : 0.0, 2);
        rep.set("fp8 TFLOP/s", tf_fp8, 0);
        rep.set("fp8 graph ms", own_applies ? fp8_graph.median() : 0.0, 2);
        rep.set("fp8 vs own", own_applies ? own.median() / fp8.median() : 0.0, 3);
        rep.set("fp8 vs torch cuDNN", own_applies && peer_cudnn > 0 ? tf_fp8 / peer_cudnn : 0.0, 3);
        rep.set("cuDNN fp8 core ms", cudnn_fp8.ms.empty() ? 0.0 : cudnn_fp8.median(), 2);
        rep.set("fp8 vs cuDNN fp8", cudnn_fp8.ms.empty() ? 0.0 : cudnn_fp8.median() / fp8.median(), 3);
      }
    }
  }
  rep.emit(o.json);
  return 0;
}

#endif

}  // namespace

Run add_bench_attention(CLI::App& bench) {
  auto o = std::make_shared<AttnOptions>();
  auto* cmd = bench.add_subcommand(
      "attention",
      "Attention at the models' shapes (MAGI-2 preview 24x128 with sinks and gate, H3 56x128, MAGI-2\n"
      "refiner 32/8x128): cuDNN SDPA, the sink/gate pass, TFLOP/s (4 L^2 Hq D) vs the GEMM ceiling and\n"
      "the torch peer. Example: avdit bench attention --len 65536 --dtype bf16 --shapes preview");
  cmd->add_option("--len", o->lens, "Comma-separated token counts L")->capture_default_str();
  cmd->add_option("--dtype", o->dtypes, "Comma-separated io dtypes: bf16, fp16")->capture_default_str();
  cmd->add_option("--shapes", o->shapes, "Comma-separated: preview, h3, refiner")->capture_default_str();
  cmd->add_option("--iters", o->iters, "Timed runs (median reported)")->capture_default_str();
  cmd->add_option("--warmup", o->warmup, "Untimed runs first")->capture_default_str();
  cmd->add_option("--ceiling", o->ceiling, "TFLOP/s ceiling for the fraction column")->capture_default_str();
  cmd->add_option("--json", o->json, "Also write the rows as JSON here");
  cmd->add_option("--peer", o->peer, "JSON of bench/peers/attention_peer.py for the 'vs torch' columns");
  cmd->add_option("--dump", o->dump,
                  "Write small deterministic inputs and avdit's outputs here (per shape and dtype) for the "
                  "peer's equality check");
  cmd->add_option("--dump-len", o->dump_len, "L of the --dump cases (two segments)")->capture_default_str();
  return [o]() -> int {
#if AVDIT_HAVE_CUDA
    AVDIT_REQUIRE(o->iters >= 1 && o->warmup >= 0, "bench attention: --iters >= 1, --warmup >= 0");
    return run_attention(*o);
#else
    bench_needs_cuda("attention");
#endif
  };
}

}  // namespace avdit::app
