// The Wan2.2 VAE's building blocks (vae2_2.py's CausalConv3d, RMSNorm, ResidualBlock,
// AttentionBlock), shared by its decoder and encoder, on channel-last video [T, H, W, C] (batch 1).
// The reference runs the network chunk by chunk in time, each causal convolution keeping the last
// two frames it saw (its feature cache); FeatureCache is that state, so a chunked run equals the
// whole-sequence one. Activations take the dtype of the weights they meet: F32 weights give the
// float32 oracle; BF16 weights give the reference under bf16 autocast (convolutions and linears
// in, out and rounded in bf16; the RMSNorms and SiLU in float32, rounded where a convolution
// reads them).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/observer.h"
#include "core/tensor.h"
#include "ops/conv3d.h"

namespace avdit {
class Checkpoint;
}
namespace avdit::ops {
class Context;
}

namespace avdit::models::vae::wan22 {

// The reference's CACHE_T: a temporal-3 causal convolution sees two frames before each output.
inline constexpr int64_t kCacheFrames = 2;

// A convolution's weights in conv3d's layout. kt > 1 convolutions are causal in time.
struct Conv {
  Tensor w;  // [Cout, kt, kh, kw, Cin]
  Tensor b;  // [Cout]
  int64_t out() const { return w.size(0); }
  int64_t in() const { return w.size(4); }
  int64_t kt() const { return w.size(1); }
};

// One slot per causal convolution, in call order: the frames before the current chunk that the
// convolution reads (undefined before its first call). next is reset at every chunk.
struct FeatureCache {
  std::vector<Tensor> slots;
  size_t next = 0;
  Tensor& slot();
};

// Intermediates of a chunked run, gathered over the chunks only while a probe wants them and
// reported once for the whole clip (the goldens store whole-clip tensors).
class ChunkPoints {
 public:
  explicit ChunkPoints(ops::Context& ctx) : ctx_(ctx) {}
  void add(const Point& p, const Tensor& t);
  void emit();

 private:
  ops::Context& ctx_;
  std::map<std::string, std::vector<Tensor>> parts_;
};

struct ResidualBlockWeights {
  Tensor gamma1, gamma2;  // RMSNorm gammas [in], [out]
  Conv conv1, conv2;      // residual.2 (in -> out), residual.6 (out -> out), 3x3x3 causal
  Conv shortcut;          // 1x1x1 when in != out (else undefined)
};

struct AttentionBlockWeights {
  Tensor gamma;                               // [C]
  Tensor to_qkv_w, to_qkv_b, proj_w, proj_b;  // [3C, C], [3C], [C, C], [C]
};

// Reads `name`.weight / .bias (PyTorch's Conv3d or Conv2d layout), checking Cout and Cin.
Conv load_conv(const Checkpoint& ckpt, const std::string& name, int64_t out, int64_t in);
// Reads an RMSNorm gamma of `channels` (any trailing 1-dims) as [channels].
Tensor load_gamma(const Checkpoint& ckpt, const std::string& name, int64_t channels);
ResidualBlockWeights load_residual_block(const Checkpoint& ckpt, const std::string& prefix,
                                         int64_t in, int64_t out);
AttentionBlockWeights load_attention_block(const Checkpoint& ckpt, const std::string& prefix,
                                           int64_t channels);
// The output channels of `prefix`.residual.2 (a residual block's width), 0 when absent.
int64_t residual_block_out(const Checkpoint& ckpt, const std::string& prefix);
// The residual blocks `prefix`0, `prefix`1, ... while they exist, the first taking `in` channels;
// *next is the index after the last (where a stage's resample sits), *out the last width.
std::vector<ResidualBlockWeights> load_residual_run(const Checkpoint& ckpt,
                                                    const std::string& prefix, int64_t in,
                                                    int64_t* next, int64_t* out);

// act itself when it is F32 or BF16 (the precisions these VAEs run in); BadInput naming `what`
// otherwise.
DType require_act(DType act, const char* what);

// Places every tensor of a block on ctx: the convolution and linear weights in `act` (F32 or
// BF16), biases and RMSNorm gammas in F32.
void place(ops::Context& ctx, Conv& c, DType act = DType::F32);
void place(ops::Context& ctx, ResidualBlockWeights& w, DType act = DType::F32);
void place(ops::Context& ctx, AttentionBlockWeights& w, DType act = DType::F32);

// A convolution without time context: kernel 1 in time (or a 2-D one), spatial zero padding kh/2.
// Every convolution's output has its weights' dtype.
Tensor conv(ops::Context& ctx, const Conv& c, const Tensor& x);
// CausalConv3d with its feature cache: the slot's frames (zeros where it has fewer than two) go
// before x, then the slot keeps the last two frames of that input. kt == 1 uses no slot.
Tensor causal_conv(ops::Context& ctx, const Conv& c, const Tensor& x, FeatureCache& cache);
// The same with the slot given (Resample's time_conv looks at its slot before it convolves).
Tensor causal_conv(ops::Context& ctx, const Conv& c, const Tensor& x, Tensor& slot);
// vae2_2.RMSNorm over channels: F.normalize(x) * sqrt(C) * gamma, in float32 (autocast keeps
// F.normalize's norm in float32) and rounded once to `out`.
Tensor rms_norm(ops::Context& ctx, const Tensor& x, const Tensor& gamma, DType out = DType::F32);
Tensor residual_block(ops::Context& ctx, const ResidualBlockWeights& w, const Tensor& x,
                      FeatureCache& cache);
// Single-head self-attention over the positions of each frame, plus the input.
Tensor attention_block(ops::Context& ctx, const AttentionBlockWeights& w, const Tensor& x);

}  // namespace avdit::models::vae::wan22
