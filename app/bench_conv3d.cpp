// `avdit bench conv3d`: the video VAEs' 3-D convolution (channel-last; cuDNN or im2col + cuBLASLt,
// each row says which ran) at the Wan2.2 decoder's real widths and 720p feature maps, BF16, against
// PyTorch's conv3d (cuDNN, channels_last_3d) on the same shapes in the same device call
// (bench/peers/conv3d_peer.py).
#include <fmt/format.h>

#include <chrono>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "bench/report.h"
#include "bench_commands.h"
#include "core/error.h"
#include "run_checks.h"
#if AVDIT_HAVE_CUDA
#include "backend/cuda/context.h"
#include "backend/cuda/timer.h"
#include "ops/conv3d.h"
#include "ops/cuda/conv3d_cudnn.h"
#include "ops/random.h"
#endif

namespace avdit::app {
namespace {

struct Conv3dBenchOptions {
  // T,H,W,Cin,Cout,k: input frames and size, channels, cubic kernel (causal time pad k-1, space
  // pad k/2, stride 1: the Wan2.2 decoder's convolutions).
  std::string shapes =
      "4,88,160,1024,1024,3;4,176,320,512,512,3;4,352,640,256,256,3;4,352,640,256,12,3";
  int iters = 5;
  int warmup = 2;
  std::string path = "auto";  // auto (what the op picks), cudnn, im2col
  std::string json;
};

#if AVDIT_HAVE_CUDA
int run(const Conv3dBenchOptions& o) {
  ops::CudaContext ctx;
  bench::Report report("conv3d (Wan2.2 decoder convolutions, BF16), one H200");
  std::stringstream all(o.shapes);
  for (std::string item; std::getline(all, item, ';');) {
    std::vector<int64_t> v;
    std::stringstream ss(item);
    for (std::string x; std::getline(ss, x, ',');) v.push_back(parse_int64(x, "--shapes"));
    AVDIT_REQUIRE(v.size() == 6, "--shapes '{}': expected T,H,W,Cin,Cout,k", item);
    const int64_t T = v[0], H = v[1], W = v[2], Cin = v[3], Cout = v[4], k = v[5];
    Tensor x = ctx.empty({T, H, W, Cin}, DType::BF16);
    Tensor w = ctx.empty({Cout, k, k, k, Cin}, DType::BF16);
    Tensor b = ctx.empty({Cout}, DType::F32);
    ops::fill_normal(ctx, x, 1, 0.f, 1.f);
    ops::fill_normal(ctx, w, 2, 0.f, 0.02f);
    ops::fill_normal(ctx, b, 3, 0.f, 0.02f);
    ops::Conv3dGeometry g;
    g.pad_front = k - 1;
    g.pad_top = g.pad_bottom = g.pad_left = g.pad_right = k / 2;
    // The path the op takes on these operands (cuDNN's graph is built here, outside the timing).
    const Tensor probe = ctx.empty({T, H, W, Cout}, DType::BF16);
    std::string why;
    const ops::cuda::Conv3dPath picked = ops::cuda::conv3d_path(ctx, x, w, &b, g, probe, &why);
    const bool im2col = o.path == "im2col";
    AVDIT_REQUIRE(o.path != "cudnn" || picked == ops::cuda::Conv3dPath::Cudnn,
                  "--path cudnn: shape '{}' does not run on cuDNN ({})", item, why);
    const ops::cuda::Conv3dPath ran = im2col ? ops::cuda::Conv3dPath::Im2col : picked;
    // Each run allocates its output from the context's pool, as a decoder's layer does.
    const bench::Timing t = cuda::time_on_stream(
        ctx.dev(),
        [&] {
          if (im2col) {
            Tensor y = ctx.empty({T, H, W, Cout}, DType::BF16);
            ops::cuda::conv3d_im2col(ctx, x, w, &b, g, y);
          } else {
            const Tensor y = ops::conv3d(ctx, x, w, &b, g, DType::BF16);
          }
        },
        o.warmup, o.iters);
    const double flop = 2.0 * T * H * W * Cout * (k * k * k * Cin);
    report.row();
    report.set("shape", fmt::format("{}x{}x{} {}->{} k{}", T, H, W, Cin, Cout, k));
    report.set("GFLOP", flop / 1e9, 1);
    report.set("ms", t.median(), 3);
    report.set("TFLOP/s", flop / (t.median() * 1e-3) / 1e12, 0);
    report.set("path", ops::cuda::conv3d_path_name(ran));
    if (!why.empty() && !im2col) report.set("why im2col", why);
  }
  report.emit(o.json);
  return 0;
}
#endif

}  // namespace

Run add_bench_conv3d(CLI::App& bench) {
  auto* cmd = bench.add_subcommand(
      "conv3d",
      "The video VAEs' conv3d at the Wan2.2 decoder's widths (720p maps, BF16): median time per\n"
      "shape. Peer: bench/peers/conv3d_peer.py (PyTorch / cuDNN). Example: avdit bench conv3d");
  auto o = std::make_shared<Conv3dBenchOptions>();
  cmd->add_option("--shapes", o->shapes, "Semicolon-separated T,H,W,Cin,Cout,k")
      ->capture_default_str();
  cmd->add_option("--iters", o->iters, "Timed runs (median reported)")->capture_default_str();
  cmd->add_option("--warmup", o->warmup, "Untimed runs first")->capture_default_str();
  cmd->add_option("--path", o->path,
                  "auto (the op's choice: cuDNN for BF16 when it takes the shape), cudnn (refuse\n"
                  "shapes it does not take) or im2col (the im2col + cuBLASLt path)")
      ->check(CLI::IsMember({"auto", "cudnn", "im2col"}))
      ->capture_default_str();
  cmd->add_option("--json", o->json, "Also write the rows as JSON here");
  return [o]() -> int {
#if AVDIT_HAVE_CUDA
    return run(*o);
#else
    (void)o;
    bench_needs_cuda("conv3d");
#endif
  };
}

}  // namespace avdit::app
