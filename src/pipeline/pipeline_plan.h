// What a pipeline folder holds and what a run keeps on the GPU at each stage (the stages run one
// after the other, each component freed before the next loads): `avdit inspect PIPELINE_DIR`.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "pipeline/pipeline_dir.h"

namespace avdit::pipeline {

struct ComponentPlan {
  std::string stage;      // "encode", "sample", "refine" (MAGI-2), "decode video", "decode audio"
  std::string component;  // "text encoder", "DiT", ...
  std::string path;
  std::string kind;        // model_type / family
  int64_t files = 0;
  int64_t disk_bytes = 0;  // every file of the folder
  int64_t params = 0;      // parameters the run reads (H3's encoder: 50 of 64 layers)
  int64_t read_bytes = 0;  // their bytes on disk
  int64_t resident_bytes = 0;  // on the GPU during the stage: the read parameters in `dtype`
  bool configs_only = false;   // no weight files (`generate --random-weights` runs such a folder)
};

// One row per component in stage order. `resident_dtype_bytes`: 2 for a bf16 run, 4 for fp32
// (MAGI-2's Qwen3.5 encoder runs fp32 activations and the decoders keep fp32 weights, so those
// are counted at 4).
std::vector<ComponentPlan> plan_pipeline(const PipelineComponents& c, int resident_dtype_bytes);

}  // namespace avdit::pipeline
