// The refiner's config, packing, block reordering and attention range lists against
// ../shared/golden/magi2-refiner-tiny (inputs.safetensors, sampler.safetensors): every integer
// exact (token order, block ranges, the raw range list row by row, MagiAttention's merged view,
// the coalesced per-segment key ranges), coordinates and packed rows bit for bit; and the bad
// input a user can give (a latent of the wrong shape, a window the op cannot take) refused with
// BadInput.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "core/error.h"
#include "io/safetensors.h"
#include "models/magi2/refiner/config.h"
#include "models/magi2/refiner/packing.h"
#include "models/magi2/refiner/window_ranges.h"
#include "ops/context.h"
#include "ops/windowed_attention.h"

namespace avdit::models::magi2::refiner {
namespace {

const std::filesystem::path kShared(AVDIT_SHARED_DIR);
const std::filesystem::path kFixture = kShared / "golden" / "magi2-refiner-tiny";

std::vector<int64_t> ints(const Tensor& t) {
  const Tensor w = t.to(DType::I64);
  return std::vector<int64_t>(w.data<int64_t>(), w.data<int64_t>() + w.numel());
}

std::vector<int64_t> flat(const std::vector<ops::Range>& q, const std::vector<ops::Range>& k) {
  std::vector<int64_t> out;
  for (size_t i = 0; i < q.size(); ++i) out.insert(out.end(), {q[i].begin, q[i].end});
  (void)k;
  return out;
}

std::vector<int64_t> q_of(const std::vector<ops::RangePair>& rows) {
  std::vector<int64_t> out;
  for (const auto& r : rows) out.insert(out.end(), {r.q.begin, r.q.end});
  return out;
}
std::vector<int64_t> k_of(const std::vector<ops::RangePair>& rows) {
  std::vector<int64_t> out;
  for (const auto& r : rows) out.insert(out.end(), {r.k.begin, r.k.end});
  return out;
}

RefinerConfig tiny_config() { return parse_refiner_config(read_json(kFixture / "config.json")); }

TEST(Magi2RefinerConfig, OfficialConfigMergesOverThePreview) {
  const nlohmann::json merged =
      read_config_with_extends(kShared / "reference-configs" / "magi2" / "magi2_refiner.json");
  EXPECT_FALSE(merged.contains("extends"));
  // From the preview file, kept by the merge; and the refiner's own keys beside them.
  EXPECT_TRUE(merged.at("arch_config").contains("moe_config"));
  EXPECT_EQ(merged.at("evaluation_config").at("shift"), 7.0);
  EXPECT_TRUE(merged.at("evaluation_config").at("use_magi2_refiner").get<bool>());
  const RefinerConfig c = parse_refiner_config(merged);
  EXPECT_EQ(c.num_layers, 30);
  EXPECT_EQ(c.hidden_size, 4096);
  EXPECT_EQ(c.num_heads_q, 32);
  EXPECT_EQ(c.num_heads_kv, 8);
  EXPECT_EQ(c.intermediate, 10920);
  EXPECT_EQ(c.mm_layers, (std::vector<int64_t>{0, 1, 28, 29}));
  EXPECT_EQ(c.local_attn_layers.size(), 30u);
  const WindowConfig& w = c.data_proxy.window;
  EXPECT_EQ(w.block_t, 8);
  EXPECT_EQ(w.block_h, 4);
  EXPECT_EQ(w.block_w, 4);
  EXPECT_EQ(w.radius_t, 2);
  EXPECT_TRUE(w.auto_range_merge);
  EXPECT_EQ(c.sampler.num_inference_steps, 5);
  EXPECT_EQ(c.sampler.shift, 5.0);  // magi2_refiner_shift, not the preview's 7
  EXPECT_EQ(c.sampler.video_guidance, 2.0f);
  EXPECT_EQ(c.sampler.audio_guidance, 5.0f);
  EXPECT_EQ(c.sampler.noise_value, 220);
  EXPECT_EQ(c.sampler.audio_noise_scale, -1.0);
  EXPECT_FALSE(c.sampler.use_cfg_trick);

  const RefinerConfig t = tiny_config();
  EXPECT_EQ(t.num_layers, 4);
  EXPECT_EQ(t.intermediate, 340);
  EXPECT_EQ(t.mm_layers, (std::vector<int64_t>{0, 3}));
}

TEST(Magi2RefinerConfig, RefusesWindowsItCannotTake) {
  nlohmann::json j = read_json(kFixture / "config.json");
  auto& window = j["evaluation_config"]["magi2_refiner_data_proxy_config"]["attn_config"]["window"];
  window["block_mode"] = "scan";
  EXPECT_THROW(parse_refiner_config(j), BadInput);
  window["block_mode"] = "grid";
  window["block_t_radius"] = -1;
  EXPECT_THROW(parse_refiner_config(j), BadInput);
  window["block_t_radius"] = 2;
  j["evaluation_config"]["magi2_refiner_data_proxy_config"]["attn_config"]["mode"] = "dense";
  EXPECT_THROW(parse_refiner_config(j), BadInput);
  EXPECT_THROW(parse_refiner_config(read_json(kShared / "golden" / "magi2-tiny" / "config.json")),
               BadInput);
}

TEST(Magi2RefinerPacking, MatchesDataProxy) {
  const RefinerConfig c = tiny_config();
  const TensorMap in = read_all(kFixture / "inputs.safetensors");
  const Tensor& video = in.at("video_latent");
  const Tensor& audio = in.at("audio_latent");
  const Tensor& text = in.at("txt_feat");
  const RefinerLayout l = refiner_layout(c, video.shape(), audio.size(1), text.size(1));
  ASSERT_EQ(l.tokens(), 1755);
  EXPECT_EQ(std::vector<int64_t>(l.token_order.begin(), l.token_order.end()),
            ints(in.at("token_order")));
  EXPECT_EQ(std::vector<int64_t>(l.token_restore_order.begin(), l.token_restore_order.end()),
            ints(in.at("token_restore_order")));
  EXPECT_EQ(std::vector<int64_t>(l.modality.begin(), l.modality.end()),
            ints(in.at("modality_mapping")));
  EXPECT_EQ(ints(in.at("block_grid_shape")),
            (std::vector<int64_t>{l.grid.nt, l.grid.nh, l.grid.nw}));
  EXPECT_EQ(flat(l.grid.blocks, {}), ints(in.at("video_block_ranges")));
  const Tensor& coords = in.at("coords_mapping");
  ASSERT_EQ(l.coords.shape(), coords.shape());
  for (int64_t i = 0; i < coords.numel(); ++i)
    ASSERT_EQ(l.coords.f32()[i], coords.f32()[i]) << "coords_mapping element " << i;
  const Tensor x = packed_x(c, l, video, audio, text);
  const Tensor& want = in.at("x");
  ASSERT_EQ(x.shape(), want.shape());
  for (int64_t i = 0; i < want.numel(); ++i)
    ASSERT_EQ(x.f32()[i], want.f32()[i]) << "x element " << i;
}

TEST(Magi2RefinerRanges, RawMergedAndCoalescedMatchTheGolden) {
  const RefinerConfig c = tiny_config();
  const TensorMap in = read_all(kFixture / "inputs.safetensors");
  const RefinerLayout l = refiner_layout(c, in.at("video_latent").shape(),
                                         in.at("audio_latent").size(1), in.at("txt_feat").size(1));
  const std::vector<ops::RangePair> rows =
      window_range_list(l.grid, c.data_proxy.window, l.tokens());
  ASSERT_EQ(rows.size(), 820u);
  EXPECT_EQ(q_of(rows), ints(in.at("q_ranges")));
  EXPECT_EQ(k_of(rows), ints(in.at("k_ranges")));

  const ops::MergedRanges m = ops::merge_ranges(rows);
  EXPECT_EQ(flat(m.q, {}), ints(in.at("merged.q_ranges")));
  EXPECT_EQ(q_of(m.sorted), ints(in.at("merged.sorted_q_ranges")));
  EXPECT_EQ(k_of(m.sorted), ints(in.at("merged.sorted_k_ranges")));
  EXPECT_EQ(m.offsets, ints(in.at("merged.qk_map")));

  ops::CpuContext ctx;
  const ops::WindowPlan plan = ops::plan_window(ctx, rows, l.tokens(), l.tokens());
  std::vector<int64_t> cq, ck;
  for (size_t s = 0; s < plan.segments.size(); ++s)
    for (int64_t r = plan.offsets[s]; r < plan.offsets[s + 1]; ++r) {
      cq.insert(cq.end(), {plan.segments[s].begin, plan.segments[s].end});
      ck.insert(ck.end(), {plan.keys[r].begin, plan.keys[r].end});
    }
  EXPECT_EQ(cq, ints(in.at("coalesced.q_ranges")));
  EXPECT_EQ(ck, ints(in.at("coalesced.k_ranges")));
  EXPECT_EQ(plan.offsets, ints(in.at("coalesced.offsets")));
  EXPECT_EQ(plan.pairs, 2890625);  // the README's count of allowed pairs
}

TEST(Magi2RefinerRanges, SamplerGeometryMatchesBothPasses) {
  const RefinerConfig c = tiny_config();
  const TensorMap s = read_all(kFixture / "sampler.safetensors");
  const Shape video{1, 48, 9, 8, 13};
  for (const auto& [pass, text_len] :
       {std::pair<std::string, int64_t>{"cond", 24}, {"uncond", 31}}) {
    const RefinerLayout l = refiner_layout(c, video, 0, text_len);
    const auto rows = window_range_list(l.grid, c.data_proxy.window, l.tokens());
    EXPECT_EQ(q_of(rows), ints(s.at("ranges." + pass + ".q_ranges"))) << pass;
    EXPECT_EQ(k_of(rows), ints(s.at("ranges." + pass + ".k_ranges"))) << pass;
  }
}

TEST(Magi2RefinerPacking, RefusesLatentsOfTheWrongShape) {
  const RefinerConfig c = tiny_config();
  EXPECT_THROW(refiner_layout(c, {1, 47, 9, 8, 13}, 0, 24), BadInput);  // channels
  EXPECT_THROW(refiner_layout(c, {2, 48, 9, 8, 13}, 0, 24), BadInput);  // batch
  EXPECT_THROW(refiner_layout(c, {1, 48, 9, 8}, 0, 24), BadInput);      // rank
  EXPECT_THROW(refiner_layout(c, {1, 48, 0, 8, 13}, 0, 24), BadInput);  // empty grid
}

}  // namespace
}  // namespace avdit::models::magi2::refiner
