// conv3d (ops/conv3d.h) through cuDNN: a cudnn-frontend graph of conv_fprop and the fp32 bias add,
// one rounding to y's dtype, built once per shape key and kept. It takes BF16/F16 operands (a
// replicate time pad runs on a copy of x with its edge frames added, since cuDNN pads with zeros
// only); everything else, and any shape cuDNN refuses, runs on conv3d.cu's im2col path.
#pragma once

#include <string>

#include "backend/cuda/context.h"
#include "ops/conv3d.h"

namespace avdit::ops::cuda {

enum class Conv3dPath { Im2col, Cudnn };
const char* conv3d_path_name(Conv3dPath p);

// The path ops::cuda::conv3d takes for these (already checked) operands: Cudnn when this build has
// cuDNN, x and w are both BF16 or both F16, the pointers are 16-byte aligned and cuDNN builds a
// graph for the key (a replicate time pad: the key of the padded copy) (built here on a key's first call and kept, so the
// convolution that follows reuses it). `why`, when given, receives the reason for Im2col.
Conv3dPath conv3d_path(CudaContext& c, const Tensor& x, const Tensor& w, const Tensor* bias,
                       const Conv3dGeometry& g, const Tensor& y, std::string* why = nullptr);

// Enqueues the convolution through cuDNN when conv3d_path says Cudnn and returns true; otherwise
// enqueues nothing and returns false.
bool conv3d_cudnn(CudaContext& c, const Tensor& x, const Tensor& w, const Tensor* bias,
                  const Conv3dGeometry& g, Tensor& y);

// The im2col + cuBLASLt path whatever the operands (conv3d.cu): the fallback, and what benchmarks
// and tests compare cuDNN with.
void conv3d_im2col(CudaContext& c, const Tensor& x, const Tensor& w, const Tensor* bias,
                   const Conv3dGeometry& g, Tensor& y);

}  // namespace avdit::ops::cuda
