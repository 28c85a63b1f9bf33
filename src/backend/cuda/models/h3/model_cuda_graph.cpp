// The H3 host forward replayed from a CUDA graph (H3CudaModel::set_cuda_graphs).
//
// Why: a tiny-model step is ~0.14 ms of GPU work behind ~65 launches and ~10 synchronous small
// copies, so the host, not the GPU, set the step time (issue 6: GPU busy 10-23% of an h3-tiny bf16
// step). The forward of one packed layout is the same kernel sequence every step; only the data
// changes (latents, timesteps). So the sequence is captured once over fixed device buffers and each
// step only refills those buffers:
//   - `in`: text [L, H] F32 | video rows [n_img, Vd] F32 | audio rows [n_audio, Ad] F32 |
//     mod_rows [S] I32 | inverse [S] I32, staged in one pinned host buffer: one upload per step;
//   - `tables`: the adaLN tables of the step's timesteps (computed, and cached, eagerly by
//     tables_for), one device-to-device copy when the timestep set changes (not between the
//     conditional and unconditional passes of one step);
//   - `out`: video_out | audio_out F32, one download into pinned memory.
// Everything else the graph reads (weights, the layout's RoPE tables, positions and masks, the
// arena) has a fixed address while the layout, the number of distinct timesteps and the arena stay;
// when one of them changes the graph is captured again.
#include <cuda_runtime.h>
#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "backend/cuda/models/h3/model_cuda.h"
#include "core/error.h"

namespace avdit::cuda::h3 {
namespace mh = ::avdit::models::h3;

namespace {

constexpr int64_t kAlign = 256;
int64_t align_up(int64_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

struct PinnedDeleter {
  void operator()(void* p) const { cudaFreeHost(p); }
};

}  // namespace

struct H3CudaModel::Graph {
  // What the graph was captured for: any change captures again.
  uint64_t layout_generation = 0, arena_generation = 0;
  int64_t M = 0;  // distinct timesteps (the tables' row count)
  cudaGraphExec_t exec = nullptr;
  std::shared_ptr<void> in, out;  // device buffers (cudaMalloc; freed by the deleter)
  std::unique_ptr<void, PinnedDeleter> in_host, out_host;
  int64_t in_bytes = 0, out_floats = 0;
  int64_t off_video = 0, off_audio = 0, off_rows = 0, off_inverse = 0;  // byte offsets in `in`
  Tables tables;                     // the graph's copy of the current adaLN tables
  std::vector<float> tables_for_ts;  // which timestep set `tables` holds (empty: none yet)
  DeviceProblem p;                   // the layout part, with mod_rows / inverse inside `in`
  ~Graph() {
    if (exec) cudaGraphExecDestroy(exec);
  }
};

void H3CudaModel::GraphDeleter::operator()(Graph* g) const { delete g; }

namespace {

std::shared_ptr<void> device_alloc(int64_t bytes, const char* what) {
  void* p = nullptr;
  const cudaError_t err = cudaMalloc(&p, static_cast<size_t>(bytes));
  if (err != cudaSuccess)
    throw RuntimeFailure(fmt::format("H3 CUDA graph: out of GPU memory for the {} buffer ({} bytes): {}", what, bytes,
                                     cudaGetErrorString(err)));
  return std::shared_ptr<void>(p, [](void* q) { cudaFree(q); });
}

std::unique_ptr<void, PinnedDeleter> pinned_alloc(int64_t bytes) {
  void* p = nullptr;
  AVDIT_CUDA_CHECK(cudaHostAlloc(&p, static_cast<size_t>(bytes), cudaHostAllocDefault));
  return std::unique_ptr<void, PinnedDeleter>(p);
}

// A 2-D host input of the given shape (F32 after to_f32): the caller's tensor or BadInput naming it.
Tensor host_rows(const Tensor& t, int64_t rows, int64_t cols, const char* what) {
  AVDIT_REQUIRE(t.defined() && t.ndim() == 2 && t.size(0) == rows && t.size(1) == cols,
                "H3 CUDA forward: {} must be [{}, {}], found {}", what, rows, cols,
                t.defined() ? t.shape_str() : std::string("nothing"));
  return t.to_f32();
}

}  // namespace

mh::PackedOutput H3CudaModel::forward_graphed(const mh::PackedLayout& layout, const mh::PackedTimesteps& timesteps,
                                              const Tensor& text_refined, const Tensor& video_rows,
                                              const Tensor& audio_rows) {
  const mh::H3Config& c = config_;
  const int64_t Vd = c.video_patch_dim(), Ad = c.audio_latents_dim, H = c.hidden_size;
  DeviceProblem d = describe(layout, timesteps);
  const int64_t S = d.seq_len;
  const Tensor text = host_rows(text_refined, d.text_len, H, "text_refined");
  const Tensor video = host_rows(video_rows, d.n_img, Vd, "video rows");
  const Tensor audio = host_rows(audio_rows, d.n_audio, Ad, "audio rows");
  const Tables& tab = tables_for(d.unique_timesteps);  // eager (and cached) when the timesteps are new
  ensure_arena(S);
  const auto M = static_cast<int64_t>(d.unique_timesteps.size());
  const cudaStream_t st = dev_.stream();

  if (!graph_ || graph_->layout_generation != layout_generation_ || graph_->arena_generation != arena_generation_ ||
      graph_->M != M) {
    graph_.reset();
    std::unique_ptr<Graph, GraphDeleter> g(new Graph);
    g->layout_generation = layout_generation_;
    g->arena_generation = arena_generation_;
    g->M = M;
    int64_t off = align_up(d.text_len * H * 4);
    g->off_video = off;
    off += align_up(d.n_img * Vd * 4);
    g->off_audio = off;
    off += align_up(d.n_audio * Ad * 4);
    g->off_rows = off;
    off += align_up(S * 4);
    g->off_inverse = off;
    off += align_up(S * 4);
    g->in_bytes = off;
    g->out_floats = d.n_img * Vd + d.n_audio * Ad;
    g->in = device_alloc(g->in_bytes, "input");
    g->out = device_alloc(std::max<int64_t>(g->out_floats, 1) * 4, "output");
    g->in_host = pinned_alloc(g->in_bytes);
    g->out_host = pinned_alloc(std::max<int64_t>(g->out_floats, 1) * 4);
    const Tensor tables = cuda_empty(dev_, {tab.storage.numel()}, act_dtype());
    g->tables = table_views(tables, M);
    char* in = static_cast<char*>(g->in.get());
    g->p = d;
    g->p.mod_rows = Tensor::wrap(g->in, in + g->off_rows, {S}, DType::I32, avdit::Device::CUDA);
    g->p.inverse = Tensor::wrap(g->in, in + g->off_inverse, {S}, DType::I32, avdit::Device::CUDA);
    float* out = static_cast<float*>(g->out.get());

    // Capture (nothing runs): thread-local mode, so only this thread's unsafe calls break it.
    AVDIT_CUDA_CHECK(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
    cudaGraph_t graph = nullptr;
    try {
      enqueue_forward(g->p, g->tables, in, /*text_act=*/false, in + g->off_video, in + g->off_audio, out,
                      out + d.n_img * Vd, nullptr, nullptr);
    } catch (...) {
      cudaStreamEndCapture(st, &graph);  // leave the stream usable, then report the first error
      if (graph) cudaGraphDestroy(graph);
      cudaGetLastError();
      throw;
    }
    AVDIT_CUDA_CHECK(cudaStreamEndCapture(st, &graph));
    size_t nodes = 0;
    cudaGraphGetNodes(graph, nullptr, &nodes);
    const cudaError_t err = cudaGraphInstantiate(&g->exec, graph, 0);
    cudaGraphDestroy(graph);
    AVDIT_CUDA_CHECK(err);
    graph_stats_.nodes = nodes;
    ++graph_stats_.captures;
    graph_ = std::move(g);
  }
  Graph& g = *graph_;

  // Inputs into the pinned staging buffer, then one upload.
  char* h = static_cast<char*>(g.in_host.get());
  std::memcpy(h, text.raw(), static_cast<size_t>(text.nbytes()));
  std::memcpy(h + g.off_video, video.raw(), static_cast<size_t>(video.nbytes()));
  std::memcpy(h + g.off_audio, audio.raw(), static_cast<size_t>(audio.nbytes()));
  auto* rows = reinterpret_cast<int32_t*>(h + g.off_rows);
  auto* inverse = reinterpret_cast<int32_t*>(h + g.off_inverse);
  for (int64_t r = 0; r < S; ++r) {
    rows[r] = static_cast<int32_t>(d.mod_rows_host[r]);
    inverse[r] = static_cast<int32_t>(d.inverse_host[r]);
  }
  AVDIT_CUDA_CHECK(cudaMemcpyAsync(g.in.get(), h, static_cast<size_t>(g.in_bytes), cudaMemcpyHostToDevice, st));
  if (g.tables_for_ts != d.unique_timesteps) {
    AVDIT_CUDA_CHECK(cudaMemcpyAsync(device_ptr(g.tables.storage), tab.storage.raw(),
                                     static_cast<size_t>(tab.storage.nbytes()), cudaMemcpyDeviceToDevice, st));
    g.tables_for_ts = d.unique_timesteps;
  }
  AVDIT_CUDA_CHECK(cudaGraphLaunch(g.exec, st));
  ++graph_stats_.replays;
  AVDIT_CUDA_CHECK(cudaMemcpyAsync(g.out_host.get(), g.out.get(), static_cast<size_t>(g.out_floats) * 4,
                                   cudaMemcpyDeviceToHost, st));
  dev_.synchronize();
  const auto* o = static_cast<const float*>(g.out_host.get());
  return {Tensor::from_data({d.n_img, Vd}, DType::F32, o), Tensor::from_data({d.n_audio, Ad}, DType::F32, o + d.n_img * Vd)};
}

}  // namespace avdit::cuda::h3
