// H3CudaModel: the MiniMax-H3 DiT forward on one GPU, mirroring models::h3::H3Model (the CPU
// oracle) step for step, in two precisions:
//   F32  — fp32 weights and activations, fp32 GEMMs and the op set's fp32 attention: the parity
//          mode, held to the CPU path's golden bounds;
//   BF16 — the production mode: bf16 weights and activations as the reference's bf16 model, fp32
//          islands where it keeps them (patch projections, time embedder, output heads, RoPE
//          angles, every norm / softmax / accumulation), tensor-core flash attention.
// Weights are uploaded once. Activations live in one arena sized for the largest sequence seen
// (grown, never shrunk), so the block loop allocates nothing and never synchronises the host. The
// adaLN projections depend only on t: they are computed once per distinct timestep set, for every
// block at once, and cached.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backend/cuda/device.h"
#include "backend/cuda/models/h3/gemm.h"
#include "core/tensor.h"
#include "models/h3/config.h"
#include "models/h3/model.h"
#include "models/h3/packing.h"
#include "models/h3/weights.h"

namespace avdit::cuda::h3 {

enum class Precision { F32, BF16 };
const char* precision_name(Precision p);

// The attention core of the bf16 mode. Flash: our tensor-core kernel (flash_attention_sm90.cu);
// Cudnn: cuDNN's fused SDPA (backend/cuda/attention_cudnn.h) into the arena; OpSet:
// cuda::attention (whatever the op set picks; allocates its output). The F32 mode always uses
// the op set's fp32 attention.
enum class AttentionImpl { Flash, Cudnn, OpSet };
const char* attention_name(AttentionImpl a);

// How the cuDNN core covers the packed documents (planned on the host from the layout's
// cu_seqlens, so the forward never waits for the device):
//   Legacy — one ragged graph over cu_seqlens as packed (empty documents included), sequence dim S;
//   Ragged — one ragged graph over the non-empty documents, sequence dim = the longest of them;
//   Split  — the first document as one dense sequence (no padding mask, no offsets: cuDNN's plain
//            kernel, what the standalone benchmark and torch's SDPA run), the rest (H3: the < 64
//            pad rows) as one ragged graph sized by its longest document. At most two launches
//            whatever the number of documents.
// Auto: for the bf16 cuDNN core at >= H3CudaModel::kTuneMinRows rows, Split and Ragged are each timed once per
// packed layout at prepare() and the faster kept (neither wins everywhere: bench/NOTES.md);
// otherwise Split.
enum class AttentionLayout { Auto, Legacy, Ragged, Split };
const char* attention_layout_name(AttentionLayout l);

// The cuDNN calls of one packed layout: rows [0, dense_rows) as one dense sequence, then the
// ragged segments tail_cu (relative to dense_rows, non-empty) with sequence dim tail_max.
struct AttentionPlan {
  Tensor cu;               // I32 cu_seqlens as packed, on the device (flash kernel, op set)
  int64_t dense_rows = 0;
  Tensor tail_cu;          // I32 on the device; undefined: no ragged part
  int64_t tail_max = 0;
  AttentionLayout layout = AttentionLayout::Split;  // the plan's layout (never Auto)
};
// Host planning of `cu` (cu[0] == 0, non-decreasing, cu.back() == S) under `layout`.
AttentionPlan plan_attention(Device& dev, const std::vector<int64_t>& cu, AttentionLayout layout);

// One transformer block on the device (refiner blocks leave adaln_* undefined).
struct DeviceBlock {
  Tensor norm1, norm2, qkv_proj, q_norm, k_norm, out_proj, fc1, fc2, adaln_weight, adaln_bias;
};

struct DeviceWeights {
  Tensor video_patch_proj_weight, video_patch_proj_bias, audio_patch_proj_weight, audio_patch_proj_bias;
  Tensor condition_proj_weight, condition_proj_bias;
  Tensor time_proj_in_weight, time_proj_in_bias, time_proj_out_weight, time_proj_out_bias;
  Tensor adaln_t_table_host;  // curve variant: interpolated on the host (M rows), then uploaded
  Tensor rope_inv_freq_host;  // [L] F32 on the host: RoPE angles are built on the host per layout
  std::vector<DeviceBlock> refiner_blocks;
  Tensor refiner_final_norm;
  std::vector<DeviceBlock> blocks;
  Tensor final_norm, final_adaln_weight, final_adaln_bias;
  Tensor video_out_weight, video_out_bias, audio_out_weight, audio_out_bias;
};

// The device form of one packed layout + its timesteps (built once per layout; a sampler keeps
// the layout and only the timesteps change).
struct DeviceProblem {
  int64_t seq_len = 0, used_len = 0, text_len = 0, n_img = 0, n_audio = 0;
  std::vector<float> unique_timesteps;
  Tensor mod_rows;    // I32 [S]: inverse * 3 + modality (the block adaLN row of each packed row)
  Tensor inverse;     // I32 [S]: the final layer's row (timestep index)
  AttentionPlan attention;  // cu_seqlens on the device and the cuDNN calls covering them
  Tensor rope_cos, rope_sin;  // F32 [S, 3 L] (values rounded to bf16 in the bf16 mode)
  Tensor text_pos, img_pos, audio_pos;  // I32
  Tensor update_mask, update_audio_mask;  // U8
  // Host copies for the dumps.
  std::vector<int64_t> mod_rows_host, inverse_host;
};

// Outputs on the device (F32): video_out [n_img, 96] with keyframe rows zeroed, audio_out [2 T_a, 32].
struct DeviceOutput {
  Tensor video_out, audio_out;
};

// Per-block time split (benchmarks): CUDA events around every step of one chosen block.
struct BlockProfile {
  int64_t block = -1;  // which block to profile (-1: none)
  std::vector<std::pair<std::string, cudaEvent_t>> marks;  // (category of the step that ends here, event)
  void mark(cudaStream_t st, const char* category);
  ~BlockProfile();
};

class H3CudaModel : public models::h3::H3Forward {
 public:
  // Uploads the host weights (checkpoint dtypes) in the precision's storage.
  H3CudaModel(Device& dev, const models::h3::H3Config& config, const models::h3::H3Weights& host,
              Precision precision);
  // Random weights generated on the device (deterministic in `seed`, never zeros; the golden
  // README's scales), full variant: benchmarks at full width without a 66 GB checkpoint.
  static std::unique_ptr<H3CudaModel> random(Device& dev, const models::h3::H3Config& config, Precision precision,
                                             uint64_t seed);

  const models::h3::H3Config& config() const override { return config_; }
  Precision precision() const { return precision_; }
  DType act_dtype() const { return precision_ == Precision::BF16 ? DType::BF16 : DType::F32; }
  int64_t weight_bytes() const { return weight_bytes_; }
  // The activation arena plus the adaLN tables: the forward's whole working memory.
  int64_t peak_activation_bytes() const { return arena_bytes_ + table_bytes_; }
  // The bf16 mode's attention core (default Flash). Cudnn falls back to Flash when the build has
  // no cuDNN.
  void set_attention(AttentionImpl a) { attention_ = a; }
  AttentionImpl attention_impl() const { return attention_; }
  // The cuDNN core's document plan (benchmarks compare them); takes effect at the next prepare().
  void set_attention_layout(AttentionLayout l) { layout_ = l; }
  AttentionLayout attention_layout() const { return layout_; }
  // GEMM algorithm selection: prepare() times this many of cuBLASLt's heuristic candidates for the
  // four block GEMM shapes of its row count (bf16, >= kTuneMinRows rows; 0, the default: the
  // heuristic's first, no timing). Small problems (tests, tiny models) never tune, so their bytes
  // do not depend on a timing. See gemm.h.
  static constexpr int64_t kTuneMinRows = 4096;
  void set_gemm_candidates(int n) { gemm_candidates_ = n; }
  const Gemm& gemm() const { return gemm_; }
  // What Auto timed at prepare(): (rows, layout, ms of one attention core).
  struct LayoutTiming {
    int64_t rows;
    AttentionLayout layout;
    float ms;
  };
  const std::vector<LayoutTiming>& layout_timings() const { return layout_timings_; }
  // CUDA graphs for the host forward() (default on; bf16 mode with the flash core, no dumps): the
  // whole forward of a packed layout is captured once into a graph over fixed device buffers and
  // replayed every step, so a step costs one graph launch, one upload of its inputs (text, patch
  // rows, adaLN row indices, packed into one pinned buffer), one copy of its adaLN tables when the
  // timesteps changed, and one download, instead of ~65 launches and ~10 synchronous copies. A new
  // layout, a new number of distinct timesteps or a grown arena captures again. Off: every call
  // enqueues the kernels one by one (the F32 mode and the other attention cores always do).
  void set_cuda_graphs(bool on) { graphs_ = on; }
  bool cuda_graphs() const { return graphs_; }
  struct GraphStats {
    int64_t captures = 0, replays = 0;
    size_t nodes = 0;  // kernels, copies and memsets in the last captured graph
  };
  const GraphStats& graph_stats() const { return graph_stats_; }

  // --- host tensors in / out (CLI, tests, samplers) ----------------------------------------------
  // The H3Forward interface (what models::h3::forward_from_inputs / velocity and pipeline/generate_h3
  // run): host tensors in and out. const as the interface wants; the arena, plan and table caches
  // inside are mutable state.
  using models::h3::H3Forward::forward;
  using models::h3::H3Forward::refine_text;
  Tensor refine_text(const Tensor& text_embeds, TensorMap* dump) const override {
    return const_cast<H3CudaModel*>(this)->refine_text(text_embeds, dump);
  }
  models::h3::PackedOutput forward(const models::h3::PackedLayout& layout,
                                   const models::h3::PackedTimesteps& timesteps, const Tensor& text_refined,
                                   const Tensor& video_rows, const Tensor& audio_rows,
                                   TensorMap* dump) const override {
    return const_cast<H3CudaModel*>(this)->forward(layout, timesteps, text_refined, video_rows, audio_rows, dump);
  }
  // With dumps: as H3Model::refine_text / forward, same dump names (block0_qkv, q_normed...
  // included; dumps synchronise).
  Tensor refine_text(const Tensor& text_embeds, TensorMap* dump);
  models::h3::PackedOutput forward(const models::h3::PackedLayout& layout,
                                   const models::h3::PackedTimesteps& timesteps, const Tensor& text_refined,
                                   const Tensor& video_rows, const Tensor& audio_rows, TensorMap* dump);

  // The adaLN tables of a timestep set, computed now (else on the first forward that needs them),
  // and the cache dropped (benchmarks time the per-step table cost with these).
  void precompute_adaln(const std::vector<float>& unique_timesteps) { tables_for(unique_timesteps); }
  void clear_adaln_cache();

  // --- device entry (benchmarks, samplers) -------------------------------------------------------
  DeviceProblem prepare(const models::h3::PackedLayout& layout, const models::h3::PackedTimesteps& timesteps);
  // text_refined [L, H] in the activation dtype or F32; video_rows [n_img, 96], audio_rows
  // [n_audio, 32] F32; all on the device. Enqueues only: no host synchronisation unless `dump`.
  DeviceOutput forward_device(const DeviceProblem& p, const Tensor& text_refined, const Tensor& video_rows,
                              const Tensor& audio_rows, TensorMap* dump = nullptr, BlockProfile* profile = nullptr);

 private:
  H3CudaModel(Device& dev, const models::h3::H3Config& config, Precision precision);
  struct Tables {
    Tensor storage;             // every block table, then the final one, in one allocation (one copy
                                // moves them into a graph's buffer)
    std::vector<Tensor> block;  // per block [M, 18 H] act dtype, views of storage
    Tensor final;               // [M, 2 H] act dtype, a view of storage
    Tensor t_emb, adaln_input;  // F32 [M, Dt] (t_emb undefined for the curve variant)
  };
  const Tables& tables_for(const std::vector<float>& unique);
  // Views of the block and final tables inside `storage` ([n_blocks M 18 H + M 2 H] act dtype).
  Tables table_views(const Tensor& storage, int64_t M) const;
  // forward_device's body: enqueues the forward of p with the given tables and inputs (text in the
  // activation dtype when text_act, else F32) into caller-owned outputs [n_img, 96], [n_audio, 32] F32.
  // Allocates nothing and never synchronises unless dump: what a graph capture records.
  void enqueue_forward(const DeviceProblem& p, const Tables& tab, const void* text, bool text_act, const void* video,
                       const void* audio, float* video_out, float* audio_out, TensorMap* dump, BlockProfile* profile);
  // The host forward through a captured graph (set_cuda_graphs).
  models::h3::PackedOutput forward_graphed(const models::h3::PackedLayout& layout,
                                           const models::h3::PackedTimesteps& timesteps, const Tensor& text_refined,
                                           const Tensor& video_rows, const Tensor& audio_rows);
  // prepare() without the two per-call uploads (mod_rows, inverse left undefined): checks the layout,
  // takes its cached device part and fills the per-call host fields.
  DeviceProblem describe(const models::h3::PackedLayout& l, const models::h3::PackedTimesteps& ts);
  // The layout-only device part, rebuilt when the layout changes (see layout_parts_).
  const DeviceProblem& layout_device_part(const models::h3::PackedLayout& l);
  void ensure_arena(int64_t S);
  Tensor upload(const Tensor& host, bool keep_f32);
  Tensor slice(int64_t offset_bytes, Shape shape, DType dtype) const;
  // softmax(q k^T / sqrt(dh)) v inside each cu document, by the configured implementation.
  Tensor attend(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionPlan& plan, int64_t S);
  // The layout prepare() plans with: layout_, or under Auto the faster of Split and Ragged for
  // this cu_seqlens, timed once on arena scratch (synchronises) and cached.
  AttentionLayout resolve_layout(const std::vector<int64_t>& cu);
  // Times the block GEMM candidates for S rows on arena scratch (prepare(); synchronises).
  void tune_gemms(int64_t S);

  Device& dev_;
  models::h3::H3Config config_;
  Precision precision_;
  DeviceWeights w_;
  Gemm gemm_;
  int64_t weight_bytes_ = 0;
  AttentionImpl attention_ = AttentionImpl::Flash;
  // Deterministic defaults: a choice made by timing can differ between processes, and so would the
  // output bytes (issue 6: two runs, one SHA-256). `avdit bench h3` opts into Auto and 8 candidates.
  AttentionLayout layout_ = AttentionLayout::Split;
  int gemm_candidates_ = 0;
  std::map<std::vector<int64_t>, AttentionLayout> chosen_layouts_;
  std::vector<LayoutTiming> layout_timings_;
  // Arena: x, h, t (out of attention / MLP), core, and the big region shared by qkv/q/k/v and
  // fc1/swiglu; sized for arena_rows_.
  std::shared_ptr<void> arena_;
  int64_t arena_rows_ = 0, arena_bytes_ = 0;
  int64_t off_x_ = 0, off_h_ = 0, off_t_ = 0, off_core_ = 0, off_big_ = 0, off_heads_ = 0;
  std::map<std::vector<uint32_t>, Tables> tables_;
  int64_t table_bytes_ = 0;
  // The layout-only part of the last prepare() (attention plan, RoPE tables, row indices, masks):
  // a sampler calls forward with one layout every step, and rebuilding these cost host time (RoPE
  // on the host) and about ten small synchronous uploads per step. Reused when the layout's
  // vectors and the planned attention layout are equal.
  struct LayoutParts {
    models::h3::PackedLayout layout;  // the key (matches() compares what the device part is built from)
    AttentionLayout planned = AttentionLayout::Split;
    DeviceProblem device;  // only attention, rope_*, *_pos and the masks are set
    bool matches(const models::h3::PackedLayout& l, AttentionLayout planned_layout) const;
  };
  std::optional<LayoutParts> layout_parts_;
  uint64_t layout_generation_ = 0, arena_generation_ = 0;  // bumped when layout_parts_ / arena_ are rebuilt
  bool graphs_ = true;
  struct Graph;  // model_cuda_graph.cpp
  struct GraphDeleter {  // defined where Graph is complete (the constructors need a complete deleter)
    void operator()(Graph* g) const;
  };
  std::unique_ptr<Graph, GraphDeleter> graph_;
  GraphStats graph_stats_;
};

}  // namespace avdit::cuda::h3
