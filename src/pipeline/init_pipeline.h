// `avdit init --pipeline h3|magi2 --size tiny`: a whole pipeline folder in the release's layout
// (pipeline_dir.h), so that tests, the README's main job and benchmarks run prompt -> mp4 without
// downloads. The DiT gets seeded random weights from the family's initialiser; the text encoder and
// the decoders are the tiny random-weight models of the golden fixtures (each one checked against
// its reference there); the tokenizer is the official Qwen vocabulary cut to the tiny encoder's.
#pragma once

#include <cstdint>
#include <filesystem>

#include "pipeline/pipeline_dir.h"

namespace avdit::pipeline {

struct InitPipelineOptions {
  PipelineFamily family = PipelineFamily::H3;
  std::filesystem::path shared;  // the folder holding golden/ and reference-configs/
  std::filesystem::path out;     // created; must not exist or be empty
  uint64_t seed = 0;
  // The configs and tokenizer files alone, no weight files: a folder for `generate
  // --random-weights`.
  bool configs_only = false;
};

// Writes the folder under a temporary name beside `out` and renames it into place, so a failure
// leaves no half pipeline. BadInput names a missing source file or a non-empty `out`.
void init_tiny_pipeline(const InitPipelineOptions& options);

// The release-size pipeline's configs in the release's layout, without weights (configs_only is
// implied: the checkpoints are 66-230 GB), for `generate --random-weights`. H3: the release's
// configs (shared/reference-configs/h3/FL2VA) and the official Qwen tokenizer. MAGI-2: the
// release's preview and refiner configs (shared/reference-configs/magi2), Qwen3.5-27B's text config
// (bench/configs/qwen35_27b_text_config.json under source_dir) with the golden Qwen tokenizer
// (a stand-in for Qwen3.5's larger vocabulary: every id it gives is one the encoder has), and the
// decoders' configs at the release's widths (TurboVAED, Stable Audio's Oobleck;
// models/vae/random_decoder.h).
void init_full_pipeline_configs(const InitPipelineOptions& options,
                                const std::filesystem::path& source_dir = AVDIT_SOURCE_DIR);

// The Qwen byte-level BPE files of `src` (vocab.json, merges.txt, tokenizer_config.json) cut to a
// model with `vocab_size` ids: the first vocab_size - A vocabulary ids, the merges whose parts and
// result survive, and the A added tokens renumbered after them.
void write_truncated_tokenizer(const std::filesystem::path& src, const std::filesystem::path& dst,
                               int64_t vocab_size);

}  // namespace avdit::pipeline
