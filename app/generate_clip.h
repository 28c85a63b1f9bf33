// `avdit generate --model PIPELINE_DIR --prompt ...`: the whole pipeline of a release folder, from a
// prompt to an mp4 with its sound (src/pipeline/text_to_clip.h), with the per-stage table.
#pragma once

#include <CLI/CLI.hpp>

#include <optional>
#include <string>

#include "enhance_options.h"
#include "route_options.h"

namespace avdit::app {

struct ClipArgs {
  std::string prompt, negative_prompt;
  bool no_negative = false;
  std::optional<double> seconds;
  std::string dit, text_encoder, tokenizer, video_vae, audio_vae;  // component overrides
  std::string text_device;                                         // default: --device
  std::string cache_dir;
  bool no_cache = false;
  bool no_adaln_table = false;
  bool random_weights = false;  // the folder's configs with random weights (seeded by --seed)
  std::string keep_latents;
  int crf = 18;
  std::string enhance_url, enhance_model;
  EnhanceCli enhance;
  // MAGI-2's refiner stage (on by default when the folder has refiner/).
  std::string refiner;
  bool refine = false, no_refine = false;
  std::optional<int> refine_steps;
  std::optional<double> refine_shift;
  std::optional<float> refine_video_guidance, refine_audio_guidance;
  std::optional<int64_t> refine_height, refine_width;
};

// The pipeline options of `generate` (added beside its latent-only ones).
void add_clip_options(CLI::App* cmd, ClipArgs& a);

// What both modes share, resolved by cmd_generate.cpp.
struct ClipCommon {
  std::string model, out, device, precision, latent_shape;
  std::optional<int> steps;
  uint64_t seed = 0;
  std::optional<float> video_guidance, audio_guidance;
  std::optional<int64_t> frames, height, width;
  bool nvfp4_experts = false, json = false;
  RouteCli routes;
  std::string step_cache;  // --step-cache (step_cache_options.h)
  std::string range_report;  // --range-report (range_report_options.h)
};

int run_generate_clip(const ClipCommon& common, const ClipArgs& a);

}  // namespace avdit::app
