// `avdit bench h3`: one forward of the full-width MiniMax-H3 transformer (config from
// ../shared/reference-configs, 50 blocks, random weights generated on the GPU) at given packed
// row counts and at the 864x480x56-frame canvas of the model's docs; the median forward, one
// block's time split into attention / GEMMs / the rest (CUDA events around each step), weights and
// peak activation bytes, against the PyTorch port's figures (TARGETS.md). Markdown and --json.
// --check DIR writes the h3-tiny golden's packed bf16 inputs and avdit's outputs for the peer's
// equality check (bench/peers/h3_peer.py --check).
#include <fmt/format.h>

#include <cmath>
#include <filesystem>
#include <functional>
#include <iterator>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "bench/report.h"
#include "bench_commands.h"
#include "core/error.h"
#include "io/safetensors.h"
#include "models/h3/config.h"
#include "models/h3/packing.h"
#include "run_checks.h"

#if AVDIT_HAVE_CUDA
#include "backend/cuda/attention_cudnn.h"
#include "backend/cuda/models/h3/gemm.h"
#include "backend/cuda/models/h3/kernels.h"
#include "backend/cuda/models/h3/model_cuda.h"
#include "backend/cuda/timer.h"
#include "models/h3/model.h"
#endif

namespace avdit::app {
namespace {

struct H3BenchOptions {
  std::string rows = "19456,40128";
  bool canvas = true;
  int64_t text_len = 512;
  int iters = 5;
  int warmup = 1;
  std::string precision = "bf16";
  std::string attention = "cudnn";
  std::string layout = "auto";
  int gemm_candidates = 8;
  bool probe = false;
  int64_t blocks = 0;  // 0: the config's
  std::string config = std::string(AVDIT_SHARED_DIR) + "/reference-configs/h3/FL2VA/transformer/config.json";
  std::string json;
  std::string check;
  std::string golden = std::string(AVDIT_SHARED_DIR) + "/golden/h3-tiny";
  uint64_t seed = 1;
};

#if AVDIT_HAVE_CUDA
namespace mh = ::avdit::models::h3;
namespace ch = ::avdit::cuda::h3;

// A synthetic packed sequence of exactly `rows` live rows: `text` text rows, 2 x `audio_t` audio
// rows, the rest video; two timesteps (video, audio), one document. Positions follow the
// reference's pattern loosely (they only feed the RoPE tables).
mh::PackedLayout synthetic_layout(int64_t rows, int64_t text, int64_t audio_t) {
  mh::PackedLayout l;
  AVDIT_REQUIRE(rows > text + 2 * audio_t && rows % mh::kPackedAlignment == 0,
                "bench h3: --rows {} must be a multiple of 64 above {} text + audio rows", rows, text + 2 * audio_t);
  l.text_len = text;
  l.audio_t = audio_t;
  l.seq_len = l.used_len = rows;
  const int64_t audio = 2 * audio_t, video = rows - text - audio;
  l.positions.resize(3 * rows);
  l.token_tags.resize(rows);
  l.input_ids.assign(rows, 0);
  for (int64_t r = 0; r < rows; ++r) {
    if (r < text) {
      l.text_pos.push_back(r);
      l.token_tags[r] = 1;
      l.positions[3 * r] = static_cast<double>(r);
    } else if (r < text + audio) {
      l.audio_pos.push_back(r);
      l.token_tags[r] = 2;
      l.positions[3 * r] = static_cast<double>(text + (r - text) % audio_t);
    } else {
      const int64_t v = r - text - audio;
      l.img_pos.push_back(r);
      l.target_img_pos.push_back(r);
      l.token_tags[r] = 0;
      l.positions[3 * r] = static_cast<double>(text + v / 1024) * 5.0 / 3.0;
      l.positions[3 * r + 1] = static_cast<double>((v / 32) % 32);
      l.positions[3 * r + 2] = static_cast<double>(v % 32);
    }
  }
  l.video_rows = video;
  l.audio_rows = audio;
  l.update_mask.assign(video, 1);
  l.update_audio_mask.assign(audio, 1);
  l.cu_seqlens = {0, rows, rows};
  l.refiner_cu_seqlens = {0, text, text};
  return l;
}

Tensor random_rows(cuda::Device& dev, int64_t n, int64_t w, uint64_t seed, DType dt) {
  Tensor t = cuda::cuda_empty(dev, {n, w}, dt);
  ch::fill_normal(dev.stream(), cuda::device_ptr(t), dt == DType::BF16, t.numel(), seed, 0.f, 1.f);
  return t;
}

// Attention FLOPs of one block (4 L^2 heads dh per document) and GEMM FLOPs (2 S N K).
double attention_flop(const mh::PackedLayout& l, const mh::H3Config& c) {
  double f = 0;
  for (size_t i = 0; i + 1 < l.cu_seqlens.size(); ++i) {
    const double n = static_cast<double>(l.cu_seqlens[i + 1] - l.cu_seqlens[i]);
    f += 4.0 * n * n * static_cast<double>(c.num_attention_heads * c.attention_head_dim);
  }
  return f;
}
double gemm_flop(int64_t S, const mh::H3Config& c) {
  const double H = c.hidden_size, I = c.inner_dim(), F = c.ffn_hidden_size;
  return 2.0 * static_cast<double>(S) * (3 * I * H + H * I + 2 * F * H + F * H);
}

ch::AttentionImpl attention_of(const std::string& name) {
  if (name == "cudnn") return ch::AttentionImpl::Cudnn;
  if (name == "opset") return ch::AttentionImpl::OpSet;
  AVDIT_REQUIRE(name == "flash", "bench h3: --attention flash, cudnn or opset (got {})", name);
  return ch::AttentionImpl::Flash;
}

ch::AttentionLayout layout_of(const std::string& name) {
  if (name == "legacy") return ch::AttentionLayout::Legacy;
  if (name == "ragged") return ch::AttentionLayout::Ragged;
  if (name == "split") return ch::AttentionLayout::Split;
  AVDIT_REQUIRE(name == "auto", "bench h3: --attention-layout auto, legacy, ragged or split (got {})", name);
  return ch::AttentionLayout::Auto;
}

// --probe: the cuDNN attention core at the H3 shape (56 x 128 heads, bf16, no LSE unless said) by
// how the documents are presented to it, alone and between the block's fc1 GEMMs (a card kept
// busy, as inside the forward): why attention ran 10-15% slower inside the forward than alone.
int run_probe(const H3BenchOptions& o) {
  cuda::Device dev;
  const int64_t heads = 56, dh = 128, H = 5376, F2 = 28672;
  const float scale = 1.0f / std::sqrt(128.0f);
  bench::Report rep("H3 attention core by document layout (cuDNN SDPA)");
  std::stringstream ss(o.rows);
  for (std::string item; std::getline(ss, item, ',');) {
    if (item.empty()) continue;
    const int64_t R = parse_int64(item, "bench h3: --rows");
    Tensor q = random_rows(dev, R, heads * dh, 21, DType::BF16).reshape({R, heads, dh});
    Tensor k = random_rows(dev, R, heads * dh, 22, DType::BF16).reshape({R, heads, dh});
    Tensor v = random_rows(dev, R, heads * dh, 23, DType::BF16).reshape({R, heads, dh});
    Tensor out = cuda::cuda_empty(dev, {R, heads, dh}, DType::BF16);
    Tensor lse = cuda::cuda_empty(dev, {R, heads}, DType::F32);
    auto cu_of = [&](const std::vector<int64_t>& cu) {
      Tensor t = Tensor::empty({static_cast<int64_t>(cu.size())}, DType::I32);
      for (size_t i = 0; i < cu.size(); ++i) t.data<int32_t>()[i] = static_cast<int32_t>(cu[i]);
      return cuda::to_device(dev, t);
    };
    auto flop = [&](const std::vector<int64_t>& cu) {
      double f = 0;
      for (size_t i = 0; i + 1 < cu.size(); ++i) {
        const double n = static_cast<double>(cu[i + 1] - cu[i]);
        f += 4.0 * n * n * heads * dh;
      }
      return f;
    };
    // The first n rows (or rows [r0, R)) as their own tensors: views into q, k, v, out.
    auto rows = [](const Tensor& t, int64_t r0, int64_t n) { return t.slice_rows(r0, r0 + n); };
    const int64_t pad = 37, live = R - pad, quarter = R / 4;
    const Tensor cu_full_empty = cu_of({0, R, R}), cu_one = cu_of({0, R}), cu_pad = cu_of({0, live, R}),
                 cu_tail = cu_of({0, pad}), cu_four = cu_of({0, quarter, 2 * quarter, 3 * quarter, R});
    struct Variant {
      std::string name;
      std::vector<int64_t> cu;
      std::function<void()> fn;
    };
    cuda::SdpaOut into{out, {lse, heads, 1}};
    std::vector<Variant> vars = {
        {"dense B=1 (no mask)", {0, R}, [&] { cuda::cudnn_sdpa(dev, q, k, v, scale, {}, &into, nullptr, false); }},
        {"dense B=1 + LSE", {0, R}, [&] { cuda::cudnn_sdpa(dev, q, k, v, scale, {}, &into, nullptr, true); }},
        {"ragged {0,R,R} max R (old forward)", {0, R},
         [&] { cuda::cudnn_sdpa(dev, q, k, v, scale, cu_full_empty, &into, nullptr, false); }},
        {"ragged {0,R} max R", {0, R}, [&] { cuda::cudnn_sdpa(dev, q, k, v, scale, cu_one, &into, nullptr, false); }},
        {"ragged {0,R-37,R} max R (old, padded layout)", {0, live, R},
         [&] { cuda::cudnn_sdpa(dev, q, k, v, scale, cu_pad, &into, nullptr, false); }},
        {"ragged {0,R-37,R} max R-37", {0, live, R},
         [&] { cuda::cudnn_sdpa(dev, q, k, v, scale, cu_pad, &into, nullptr, false, live); }},
        {"split: dense R-37 + ragged 37", {0, live, R},
         [&] {
           cuda::SdpaOut a{rows(out, 0, live), {}}, b{rows(out, live, pad), {}};
           cuda::cudnn_sdpa(dev, rows(q, 0, live), rows(k, 0, live), rows(v, 0, live), scale, {}, &a, nullptr, false);
           cuda::cudnn_sdpa(dev, rows(q, live, pad), rows(k, live, pad), rows(v, live, pad), scale, cu_tail, &b,
                            nullptr, false, pad);
         }},
        {"ragged 4 docs max R", {0, quarter, 2 * quarter, 3 * quarter, R},
         [&] { cuda::cudnn_sdpa(dev, q, k, v, scale, cu_four, &into, nullptr, false); }},
        {"ragged 4 docs max R/4", {0, quarter, 2 * quarter, 3 * quarter, R},
         [&] { cuda::cudnn_sdpa(dev, q, k, v, scale, cu_four, &into, nullptr, false, R - 3 * quarter); }},
    };
    for (const Variant& var : vars) {
      const bench::Timing t = cuda::time_on_stream(dev, var.fn, 2, o.iters);
      rep.row();
      rep.set("rows", R);
      rep.set("variant", var.name);
      rep.set("ms", t.median(), 3);
      rep.set("TFLOP/s", flop(var.cu) / (t.median() * 1e-3) / 1e12, 0);
    }
    // Hot: the dense core between two fc1-shaped GEMMs ([R, 5376] x [28672, 5376]^T), as in the
    // forward where attention follows the qkv GEMM on a card that never idles; 10 rounds, events
    // around the attention alone, median. And the same core run 20 times back to back.
    {
      ch::Gemm gemm(dev);
      Tensor x = random_rows(dev, R, H, 31, DType::BF16), w = random_rows(dev, F2, H, 32, DType::BF16);
      Tensor y = cuda::cuda_empty(dev, {R, F2}, DType::BF16);
      auto g = [&] {
        gemm.run({x.raw(), R, H, DType::BF16}, {w.raw(), F2, H, DType::BF16}, nullptr, cuda::device_ptr(y),
                 DType::BF16);
      };
      cudaEvent_t a, b, c;
      AVDIT_CUDA_CHECK(cudaEventCreate(&a));
      AVDIT_CUDA_CHECK(cudaEventCreate(&b));
      AVDIT_CUDA_CHECK(cudaEventCreate(&c));
      bench::Timing hot, gms, chain;
      g();
      vars[0].fn();
      dev.synchronize();
      for (int i = 0; i < 10; ++i) {
        g();
        g();
        AVDIT_CUDA_CHECK(cudaEventRecord(a, dev.stream()));
        vars[0].fn();
        AVDIT_CUDA_CHECK(cudaEventRecord(b, dev.stream()));
        g();
        AVDIT_CUDA_CHECK(cudaEventRecord(c, dev.stream()));
        AVDIT_CUDA_CHECK(cudaEventSynchronize(c));
        float ms = 0, gm = 0;
        AVDIT_CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
        AVDIT_CUDA_CHECK(cudaEventElapsedTime(&gm, b, c));
        hot.ms.push_back(ms);
        gms.ms.push_back(gm);
      }
      AVDIT_CUDA_CHECK(cudaEventRecord(a, dev.stream()));
      for (int i = 0; i < 20; ++i) vars[0].fn();
      AVDIT_CUDA_CHECK(cudaEventRecord(b, dev.stream()));
      AVDIT_CUDA_CHECK(cudaEventSynchronize(b));
      float ms = 0;
      AVDIT_CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
      chain.ms.push_back(ms / 20);
      cudaEventDestroy(a);
      cudaEventDestroy(b);
      cudaEventDestroy(c);
      const double f = flop({0, R});
      for (auto [name, t] : {std::pair<std::string, const bench::Timing*>{"dense, between fc1 GEMMs (hot)", &hot},
                             {"dense, 20 back to back (mean)", &chain}}) {
        rep.row();
        rep.set("rows", R);
        rep.set("variant", name);
        rep.set("ms", t->median(), 3);
        rep.set("TFLOP/s", f / (t->median() * 1e-3) / 1e12, 0);
      }
      rep.row();
      rep.set("rows", R);
      rep.set("variant", "fc1 GEMM after it (TFLOP/s of 2 R 5376 28672)");
      rep.set("ms", gms.median(), 3);
      rep.set("TFLOP/s", 2.0 * R * H * F2 / (gms.median() * 1e-3) / 1e12, 0);
    }
  }
  rep.emit(o.json);
  return 0;
}

int run_check(const H3BenchOptions& o) {
  cuda::Device dev;
  const Checkpoint ckpt = Checkpoint::open(o.golden);
  const mh::H3Model cpu(ckpt);
  ch::H3CudaModel gpu(dev, cpu.config(), cpu.weights(), ch::Precision::BF16);
  gpu.set_attention(attention_of(o.attention));
  const TensorMap in = read_all(std::filesystem::path(o.golden) / "inputs.safetensors");
  TensorMap dump;
  const Tensor text = gpu.refine_text(in.at("text_embeds"));
  const Tensor video = in.at("video_latent").to_f32(), audio = in.at("audio_latent").to_f32();
  const mh::PackedLayout l = mh::pack_layout(text.size(0), video.size(2), video.size(3), video.size(4), audio.size(2));
  // Read through a const copy: the fixture's tensors are memory-mapped (read-only).
  auto first = [&](const char* name) {
    const Tensor v = in.at(name).to_f32();
    return v.f32()[0];
  };
  const float tv = in.count("t_video") ? first("t_video") : mh::timestep_from_sigma(first("sigma_video"));
  const float ta = in.count("t_audio") ? first("t_audio") : mh::timestep_from_sigma(first("sigma_audio"));
  const mh::PackedTimesteps ts = mh::pack_timesteps(l, tv, ta);
  const ch::DeviceProblem p = gpu.prepare(l, ts);
  gpu.forward_device(p, cuda::to_device(dev, text.to(DType::BF16)),
                     cuda::to_device(dev, mh::patchify_video(video)), cuda::to_device(dev, mh::pack_audio(audio)),
                     &dump);
  auto i64 = [](const std::vector<int64_t>& v) {
    return Tensor::from_data({static_cast<int64_t>(v.size())}, DType::I64, v.data());
  };
  TensorMap out;
  for (const char* name : {"hidden_embed", "adaln_input", "rope_cos_sin_cache", "hidden_block0", "final_video_all",
                           "final_audio_all"})
    out[name] = dump.at(name);
  out["mod_rows"] = i64(p.mod_rows_host);
  out["inverse"] = i64(p.inverse_host);
  out["cu_seqlens"] = i64(l.cu_seqlens);
  std::filesystem::create_directories(o.check);
  const auto path = std::filesystem::path(o.check) / "h3_check.safetensors";
  write_safetensors(path, out);
  fmt::print("wrote {} (h3-tiny, bf16, {} rows, attention {})\n", path.string(), l.seq_len,
             ch::attention_name(gpu.attention_impl()));
  return 0;
}

struct Case {
  std::string name;
  mh::PackedLayout layout;
  double port_s = 0;  // the PyTorch port's forward (TARGETS.md), 0 = not measured there
  double target_s = 0;
};

int run_h3(const H3BenchOptions& o) {
  if (!o.check.empty()) return run_check(o);
  if (o.probe) return run_probe(o);
  mh::H3Config c = mh::H3Config::from_json(read_json(o.config));
  if (o.blocks > 0) c.num_layers = o.blocks;
  const ch::Precision prec = o.precision == "fp32" ? ch::Precision::F32 : ch::Precision::BF16;
  AVDIT_REQUIRE(o.precision == "fp32" || o.precision == "bf16", "bench h3: --precision fp32 or bf16");
  const ch::AttentionImpl att = attention_of(o.attention);

  std::vector<Case> cases;
  std::stringstream ss(o.rows);
  for (std::string item; std::getline(ss, item, ',');) {
    if (item.empty()) continue;
    const int64_t rows = parse_int64(item, "bench h3: --rows");
    Case k{fmt::format("rows {}", rows), synthetic_layout(rows, o.text_len, 186)};
    if (rows == 19456) k.port_s = 2.44, k.target_s = 1.88;
    if (rows == 40128) k.port_s = 7.11, k.target_s = 5.5;
    cases.push_back(std::move(k));
  }
  if (o.canvas) {
    // 864x480, 56 frames: latent 17 x 30 x 54 (16x spatial, 17k+5 frames -> 5k+2), Ta = 93.
    cases.push_back({"canvas 864x480x56f", mh::pack_layout(o.text_len, 17, 30, 54, 93)});
  }

  cuda::Device dev;
  fmt::print("H3 bench: {} blocks, H {}, {} heads x {}, ffn {}, {} weights, attention {}\n", c.num_layers,
             c.hidden_size, c.num_attention_heads, c.attention_head_dim, c.ffn_hidden_size, o.precision, o.attention);
  auto model = ch::H3CudaModel::random(dev, c, prec, o.seed);
  model->set_attention(att);
  model->set_attention_layout(layout_of(o.layout));
  model->set_gemm_candidates(o.gemm_candidates);
  fmt::print("weights {:.2f} GB generated on the device\n", model->weight_bytes() / 1e9);

  bench::Report rep("MiniMax-H3 forward, one H200");
  for (const Case& k : cases) {
    const mh::PackedLayout& l = k.layout;
    const mh::PackedTimesteps ts = mh::pack_timesteps(l, 0.37f, 0.61f);
    const size_t tuned_before = model->gemm().tune_log().size(), timed_before = model->layout_timings().size();
    const ch::DeviceProblem p = model->prepare(l, ts);
    for (size_t i = tuned_before; i < model->gemm().tune_log().size(); ++i) {
      const auto& r = model->gemm().tune_log()[i];
      fmt::print("GEMM [{}, {}] x [{}, {}]^T: {} candidates, heuristic's first {:.3f} ms, chosen #{} {:.3f} ms ({:.0f} "
                 "TFLOP/s)\n",
                 r.m, r.k, r.n, r.k, r.tried, r.first_ms, r.chosen, r.best_ms,
                 r.best_ms > 0 ? 2.0 * r.m * r.n * r.k / (r.best_ms * 1e-3) / 1e12 : 0.0);
    }
    for (size_t i = timed_before; i < model->layout_timings().size(); ++i) {
      const auto& t = model->layout_timings()[i];
      fmt::print("attention plan {} at {} rows: {:.3f} ms per core\n", ch::attention_layout_name(t.layout), t.rows,
                 t.ms);
    }
    const DType act = model->act_dtype();
    const Tensor text = random_rows(dev, l.text_len, c.hidden_size, o.seed + 11, act);
    const Tensor video = random_rows(dev, static_cast<int64_t>(l.img_pos.size()), c.video_patch_dim(), o.seed + 12,
                                     DType::F32);
    const Tensor audio = random_rows(dev, static_cast<int64_t>(l.audio_pos.size()), c.audio_latents_dim, o.seed + 13,
                                     DType::F32);
    // The adaLN tables alone: a sampler pays them once per step (new t), the forwards of one step
    // (CFG branches) share them; the timed forwards below reuse the cached tables.
    const bench::Timing tables = cuda::time_on_stream(
        dev,
        [&] {
          model->clear_adaln_cache();
          model->precompute_adaln(ts.unique);
        },
        1, 3);
    model->forward_device(p, text, video, audio);  // the arena
    dev.synchronize();
    const bench::Timing fwd = cuda::time_on_stream(
        dev, [&] { model->forward_device(p, text, video, audio); }, o.warmup, o.iters);
    // One block's split, from events around each of its steps (a separate, profiled forward).
    ch::BlockProfile prof;
    prof.block = c.num_layers / 2;
    model->forward_device(p, text, video, audio, nullptr, &prof);
    dev.synchronize();
    double att_ms = 0, gemm_ms = 0, rest_ms = 0;
    for (size_t i = 1; i < prof.marks.size(); ++i) {
      float ms = 0;
      AVDIT_CUDA_CHECK(cudaEventElapsedTime(&ms, prof.marks[i - 1].second, prof.marks[i].second));
      const std::string& cat = prof.marks[i].first;
      (cat == "attention" ? att_ms : cat == "gemm" ? gemm_ms : rest_ms) += ms;
    }
    const double block_ms = att_ms + gemm_ms + rest_ms;
    {  // every step of the profiled block, in order (the forward's step sequence)
      static const char* kSteps[] = {"qkv GEMM", "qk-norm+RoPE", "attention", "out_proj GEMM", "resid+norm2",
                                     "fc1 GEMM", "SwiGLU", "fc2 GEMM", "resid+norm1"};
      std::string line = fmt::format("{} block {} steps (ms):", k.name, prof.block);
      for (size_t i = 1; i < prof.marks.size(); ++i) {
        float ms = 0;
        AVDIT_CUDA_CHECK(cudaEventElapsedTime(&ms, prof.marks[i - 1].second, prof.marks[i].second));
        line += fmt::format(" {} {:.2f};", i - 1 < std::size(kSteps) ? kSteps[i - 1] : "?", ms);
      }
      fmt::print("{}\n", line);
    }
    const double s = fwd.median() / 1e3;
    rep.row();
    rep.set("case", k.name);
    rep.set("rows", l.seq_len);
    rep.set("live", l.used_len);
    rep.set("precision", o.precision);
    rep.set("attention", std::string(ch::attention_name(model->attention_impl())));
    rep.set("layout", std::string(ch::attention_layout_name(p.attention.layout)));
    rep.set("gemm cands", static_cast<int64_t>(o.gemm_candidates));
    rep.set("forward s", s, 3);
    rep.set("spread ms", fwd.max() - fwd.min(), 1);
    rep.set("adaLN tables ms", tables.median(), 2);
    rep.set("block ms", block_ms, 2);
    rep.set("attn ms", att_ms, 2);
    rep.set("attn %", block_ms > 0 ? 100 * att_ms / block_ms : 0.0, 0);
    rep.set("attn TFLOP/s", att_ms > 0 ? attention_flop(l, c) / (att_ms * 1e-3) / 1e12 : 0.0, 0);
    rep.set("gemm ms", gemm_ms, 2);
    rep.set("gemm %", block_ms > 0 ? 100 * gemm_ms / block_ms : 0.0, 0);
    rep.set("gemm TFLOP/s", gemm_ms > 0 ? gemm_flop(l.seq_len, c) / (gemm_ms * 1e-3) / 1e12 : 0.0, 0);
    rep.set("rest ms", rest_ms, 2);
    rep.set("rest %", block_ms > 0 ? 100 * rest_ms / block_ms : 0.0, 0);
    rep.set("weights GB", model->weight_bytes() / 1e9, 2);
    rep.set("peak act GB", model->peak_activation_bytes() / 1e9, 2);
    rep.set("port s", k.port_s, 2);
    rep.set("port / avdit", k.port_s > 0 ? k.port_s / s : 0.0, 2);
    rep.set("target s", k.target_s, 2);
  }
  rep.emit(o.json);
  return 0;
}
#endif

}  // namespace

Run add_bench_h3(CLI::App& bench) {
  auto o = std::make_shared<H3BenchOptions>();
  auto* cmd = bench.add_subcommand(
      "h3",
      "One forward of the full-width MiniMax-H3 DiT (random weights made on the GPU) at packed row\n"
      "counts and the 864x480x56-frame canvas: median forward, one block split into attention / GEMMs /\n"
      "the rest, weights and peak activations, vs the PyTorch port. Example: avdit bench h3 --rows 19456");
  cmd->add_option("--rows", o->rows, "Comma-separated packed row counts (multiples of 64)")->capture_default_str();
  cmd->add_flag("--canvas,!--no-canvas", o->canvas, "Also the 864x480x56-frame canvas")->capture_default_str();
  cmd->add_option("--text-len", o->text_len, "Text rows of each case")->capture_default_str();
  cmd->add_option("--iters", o->iters, "Timed forwards (median reported)")->capture_default_str();
  cmd->add_option("--warmup", o->warmup, "Untimed forwards first")->capture_default_str();
  cmd->add_option("--precision", o->precision, "bf16 or fp32")->capture_default_str();
  cmd->add_option("--attention", o->attention, "flash (ours), cudnn or opset")->capture_default_str();
  cmd->add_option("--attention-layout", o->layout,
                  "cuDNN document plan: auto, legacy (one ragged graph as packed), ragged (non-empty documents, "
                  "longest as the sequence dim) or split (first document dense + the rest ragged)")
      ->capture_default_str();
  cmd->add_option("--gemm-candidates", o->gemm_candidates,
                  "Time this many cuBLASLt candidates per block GEMM shape when planning (0: heuristic's first)")
      ->capture_default_str();
  cmd->add_flag("--probe", o->probe,
                "Instead: the cuDNN attention core at the H3 shape by document layout, alone and between GEMMs");
  cmd->add_option("--blocks", o->blocks, "Blocks (0: the config's)")->capture_default_str();
  cmd->add_option("--config", o->config, "H3 transformer config.json")->capture_default_str();
  cmd->add_option("--seed", o->seed, "Seed of the random weights")->capture_default_str();
  cmd->add_option("--json", o->json, "Also write the rows as JSON here");
  cmd->add_option("--check", o->check,
                  "Instead: run the h3-tiny golden in bf16 and write its packed inputs and avdit's outputs to "
                  "DIR/h3_check.safetensors for bench/peers/h3_peer.py --check");
  cmd->add_option("--golden", o->golden, "The h3-tiny golden folder (for --check)")->capture_default_str();
  return [o]() -> int {
#if AVDIT_HAVE_CUDA
    AVDIT_REQUIRE(o->iters >= 1 && o->warmup >= 0, "bench h3: --iters >= 1, --warmup >= 0");
    return run_h3(*o);
#else
    bench_needs_cuda("h3");
#endif
  };
}

}  // namespace avdit::app
