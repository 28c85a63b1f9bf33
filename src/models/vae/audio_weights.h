// The audio decoders' weights by official name: each tensor checked (present, the expected shape, a
// float dtype) with a message naming the checkpoint and the tensor, then placed on the context as
// F32; weight-normalised convolutions are folded into plain weights once, at load.
#pragma once

#include <string>

#include "core/tensor.h"

namespace avdit {
class Checkpoint;
}
namespace avdit::ops {
class Context;
}

namespace avdit::models::vae {

class AudioWeights {
 public:
  // prefix: prepended to every name (the official SA checkpoint's "pretransform.model.");
  // what: the family, for messages ("Oobleck decoder").
  AudioWeights(ops::Context& ctx, const Checkpoint& ckpt, std::string prefix, std::string what)
      : ctx_(ctx), ckpt_(ckpt), prefix_(std::move(prefix)), what_(std::move(what)) {}

  bool contains(const std::string& name) const;
  // The stored shape of `name` (BadInput when absent): for sizes the config does not state.
  Shape shape_of(const std::string& name) const;
  Tensor get(const std::string& name, const Shape& shape) const;
  // w = g * v / |v|, the norm over every dim but 0 (torch weight_norm, dim 0): per output channel
  // of a Conv1d weight [out, in, k], per input channel of a ConvTranspose1d weight [in, out, k].
  // g: [v_shape[0], 1, 1].
  Tensor weight_norm(const std::string& g, const std::string& v, const Shape& v_shape) const;

 private:
  Tensor host(const std::string& name, const Shape& shape) const;

  ops::Context& ctx_;
  const Checkpoint& ckpt_;
  std::string prefix_, what_;
};

}  // namespace avdit::models::vae
