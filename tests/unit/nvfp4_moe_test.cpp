// NVFP4 routed experts in the CPU MAGI-2 MoE: fake quantisation (bf16 weights holding the quantise
// -> dequantise values) and the packed path (dequantised per expert on the fly) give bit-identical
// layer outputs over millions of values, and the three ways to get packed experts (fake,
// --nvfp4-experts at load time, a checkpoint written by `avdit quantize`) agree bit for bit on the
// golden tiny model, whose one-step difference from bf16 experts is printed (reported, not
// asserted). Also: quantize's errors.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <tuple>

#include "core/error.h"
#include "core/rng.h"
#include "io/safetensors.h"
#include "models/magi2/api.h"
#include "models/magi2/dump.h"
#include "models/magi2/model.h"
#include "models/magi2/packing.h"
#include "models/magi2/quantize.h"
#include "models/magi2/weights.h"
#include "ops/context.h"
#include "quant/nvfp4.h"
#include "quant/nvfp4_checkpoint.h"
#include "testing/compare.h"
#include "testing/nvfp4_fake.h"

namespace avdit::models::magi2 {
namespace {

namespace fs = std::filesystem;
using test_util::same_bits;
using test_util::write_fake_quantised;

fs::path temp_dir(const std::string& tag) {
  const fs::path p = fs::temp_directory_path() / fmt::format("avdit_nvfp4_{}_{}", tag, ::getpid());
  fs::remove_all(p);
  return p;
}

nlohmann::json moe_config() {
  // MoE widths that are multiples of 16 (NVFP4 blocks run along K = D_moe for W_gate / W_up, De for
  // W_down).
  return nlohmann::json::parse(R"({
    "arch_config": {
      "num_layers": 2, "hidden_size": 128, "head_dim": 32, "num_query_groups": 1,
      "video_in_channels": 16, "audio_in_channels": 8, "text_in_channels": 24,
      "params_dtype": "bfloat16", "intermediate_factor": 2, "mm_layers": [0],
      "activation_type": "swiglu7", "attn_softcap": -1.0,
      "attn_gating": {"enable": true}, "attn_sinks": {"enable": true, "sink_token_num": 1},
      "mhc_config": {"enable": true, "num_stream": 2, "alpha_init": 0.01},
      "moe_config": {"score_func": "sigmoid", "route_norm": true, "route_scale": 2.5, "moe_layers": [1],
                     "num_heads": 2, "num_experts": 16, "top_k": 3, "expert_intermediate_size": 96,
                     "shared_expert_intermediate_size": 32, "modality_specific_expert_intermediate_size": 16,
                     "split_merge_intermediate_size": 128}
    },
    "evaluation_config": {"data_proxy_config": {"t_patch_size": 1, "patch_size": 2,
                          "spatial_rope_interpolation": "extra", "add_time_token": false, "time_channel_dim": 32}}
  })");
}

// The MoE sub-layer of layer 1 on x (permuted rows of the given modalities): its experts_out and
// mlp_out.
struct MoeRun {
  Tensor experts_out, mlp_out;
};
MoeRun run_moe(const Magi2Model& model, const std::vector<int32_t>& modality, const Tensor& x) {
  ops::Context& ctx = model.ctx();
  const int64_t L = static_cast<int64_t>(modality.size());
  Tensor coords =
      Tensor::zeros({L, 9}, DType::F32);  // singleton axes: the RoPE table is not used here
  for (int64_t l = 0; l < L; ++l)
    for (int a = 3; a < 9; ++a) coords.f32()[l * 9 + a] = 1.0f;
  const Magi2Plan plan = model.plan(modality, coords, {0, L});
  DumpProbe probe;
  const ProbeScope scope(ctx.observer(), &probe);
  const Tensor out = model.moe_mlp(1, plan, x);
  // The dump is in packed order; compare in the same order on both sides.
  return MoeRun{probe.tensors().at("layers.1.moe.experts_out"), ctx.download(out).to_f32()};
}

TEST(Nvfp4Moe, FakeQuantisationEqualsPackedPathBitForBit) {
  const fs::path dir = temp_dir("moe"), packed_dir = temp_dir("moe_packed"),
                 fake_dir = temp_dir("moe_fake");
  init_checkpoint(moe_config(), dir, 99);
  write_fake_quantised(dir, fake_dir);
  quant::quantize_checkpoint_nvfp4_experts(dir, packed_dir, false);
  const Checkpoint ckpt = Checkpoint::open(dir), fake_ckpt = Checkpoint::open(fake_dir),
                   packed_ckpt = Checkpoint::open(packed_dir);
  LoadOptions at_load;
  at_load.nvfp4_experts = true;

  // 4096 tokens of every modality through the MoE layer, fp32 and emulated-bf16 precision.
  const int64_t L = 4096;
  std::vector<int32_t> modality(L);
  for (int64_t l = 0; l < L; ++l) modality[l] = static_cast<int32_t>((l * 7) % 3);
  ops::CpuContext ctx;
  const Magi2Config c = config_from_checkpoint(ckpt);
  Tensor x = Tensor::empty({L, c.hidden_size}, DType::F32);
  fill_normal(x, 5, 1);
  int64_t compared = 0;
  for (DType act : {DType::F32, DType::BF16}) {
    const Magi2Model fake(ctx, fake_ckpt, act), packed(ctx, ckpt, act, at_load),
        from_file(ctx, packed_ckpt, act);
    ASSERT_TRUE(packed.weights().layers[1].moe &&
                packed.weights().layers[1].moe_mlp.experts.nvfp4());
    ASSERT_TRUE(from_file.weights().layers[1].moe_mlp.experts.nvfp4());
    EXPECT_TRUE(packed.weights().layers[1].moe_mlp.experts.gate.empty());  // no bf16 copy kept
    const MoeRun a = run_moe(fake, modality, x), b = run_moe(packed, modality, x),
                 f = run_moe(from_file, modality, x);
    const char* mode = act == DType::BF16 ? " bf16" : " fp32";
    for (const auto& [name, ta, tb, tf] :
         {std::tuple{"experts_out", a.experts_out, b.experts_out, f.experts_out},
          std::tuple{"mlp_out", a.mlp_out, b.mlp_out, f.mlp_out}}) {
      EXPECT_TRUE(same_bits(ta, tb)) << name << mode << ": fake vs packed at load";
      EXPECT_TRUE(same_bits(ta, tf)) << name << mode << ": fake vs packed checkpoint";
      compared += ta.numel();
    }
  }
  // Expert parallelism: a rank holding experts [4, 12) reads only those rows of the packed tensors
  // and computes the same partial sums as packing its bf16 rows at load time.
  LoadOptions range;
  range.expert_range = std::pair<int64_t, int64_t>{4, 12};
  const Magi2Model part_file(ctx, packed_ckpt, DType::F32, range);
  range.nvfp4_experts = true;
  const Magi2Model part_load(ctx, ckpt, DType::F32, range),
      all_load(ctx, ckpt, DType::F32, at_load);
  ASSERT_EQ(part_file.weights().layers[1].moe_mlp.experts.up_q[0].groups(), 8);
  const Tensor pf = run_moe(part_file, modality, x).experts_out,
               pl = run_moe(part_load, modality, x).experts_out;
  EXPECT_TRUE(same_bits(pf, pl)) << "experts [4, 12): packed checkpoint vs load time";
  EXPECT_FALSE(same_bits(pf, run_moe(all_load, modality, x).experts_out));
  std::printf("fake == packed (load time and checkpoint) over %lld MoE output values\n",
              static_cast<long long>(compared));
  EXPECT_GE(compared, 2'000'000);
  for (const fs::path& d : {dir, packed_dir, fake_dir}) fs::remove_all(d);
}

TEST(Nvfp4Moe, GoldenTinyOneStepPackedCheckpointEqualsLoadTimePacking) {
  const fs::path golden = fs::path(AVDIT_SHARED_DIR) / "golden" / "magi2-tiny";
  const fs::path out = temp_dir("golden"), fake_dir = temp_dir("golden_fake");
  const quant::QuantizeSummary s = quant::quantize_checkpoint_nvfp4_experts(golden, out, false);
  EXPECT_EQ(s.packed_tensors, 2 * 3);  // two MoE layers x W_gate, W_up, W_down
  write_fake_quantised(golden, fake_dir);
  const Checkpoint bf16_ckpt = Checkpoint::open(golden), packed_ckpt = Checkpoint::open(out),
                   fake_ckpt = Checkpoint::open(fake_dir);
  const Magi2Config c = config_from_checkpoint(bf16_ckpt);
  const TensorMap inputs = read_all(golden / "inputs.safetensors");
  const PackedSequence seq = pack_inputs(c, inputs);
  LoadOptions at_load;
  at_load.nvfp4_experts = true;
  ops::CpuContext ctx;
  for (DType act : {DType::F32, DType::BF16}) {
    auto output = [&](const Checkpoint& ckpt, const LoadOptions& load) {
      const Magi2Model model(ctx, ckpt, act, load);
      return forward_packed(model, seq, false).at("model_output");
    };
    const Tensor ref = output(bf16_ckpt, {});
    const Tensor a = output(bf16_ckpt, at_load);
    const Tensor b = output(packed_ckpt, {});
    const Tensor f = output(fake_ckpt, {});
    EXPECT_TRUE(same_bits(a, b)) << "packed checkpoint vs --nvfp4-experts at load time";
    EXPECT_TRUE(same_bits(a, f)) << "packed vs fake quantisation";
    // The number for the note: how far NVFP4 experts move one forward step (model_output).
    const Tensor rf = ref.to_f32(), af = a.to_f32();
    double num = 0, den = 0, max_abs = 0, max_ref = 0;
    for (int64_t i = 0; i < rf.numel(); ++i) {
      const double d = double(af.f32()[i]) - rf.f32()[i];
      num += d * d;
      den += double(rf.f32()[i]) * rf.f32()[i];
      max_abs = std::max(max_abs, std::fabs(d));
      max_ref = std::max(max_ref, std::fabs(double(rf.f32()[i])));
    }
    std::printf(
        "golden magi2-tiny, %s activations, one step: NVFP4 vs bf16 experts model_output relative "
        "RMS %.4e, "
        "max |diff| %.4e (%.4e of max |ref|), %lld values\n",
        act == DType::BF16 ? "bf16" : "fp32", std::sqrt(num / den), max_abs, max_abs / max_ref,
        static_cast<long long>(rf.numel()));
    EXPECT_GT(num, 0.0);  // the experts did change (the comparison is not vacuous)
  }
  fs::remove_all(out);
  fs::remove_all(fake_dir);
}

TEST(Nvfp4Moe, QuantizeErrors) {
  const fs::path golden = fs::path(AVDIT_SHARED_DIR) / "golden" / "magi2-tiny";
  const fs::path out = temp_dir("errors");
  fs::create_directories(out);
  EXPECT_THROW(quantize_nvfp4_experts(golden, out, false),
               BadInput);  // output exists
  fs::remove_all(out);
  const fs::path h3 = fs::path(AVDIT_SHARED_DIR) / "golden" / "h3-tiny";
  EXPECT_THROW(quantize_nvfp4_experts(h3, out, false), BadInput);  // not MAGI-2
  EXPECT_FALSE(fs::exists(out));
  EXPECT_THROW(quantize_nvfp4_experts(golden / "nope", out, false), BadInput);
  // A packed checkpoint cannot be packed again.
  quantize_nvfp4_experts(golden, out, false);
  const fs::path again = temp_dir("again");
  EXPECT_THROW(quantize_nvfp4_experts(out, again, false), BadInput);
  EXPECT_FALSE(fs::exists(again));
  // No temporary folder is left beside the output after a failure.
  for (const auto& e : fs::directory_iterator(out.parent_path()))
    EXPECT_EQ(e.path().filename().string().find(".avdit_nvfp4_again"), std::string::npos)
        << e.path();
  fs::remove_all(out);
}

}  // namespace
}  // namespace avdit::models::magi2
