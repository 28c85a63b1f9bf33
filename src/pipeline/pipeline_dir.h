// The components of a pipeline folder in each release's layout, each overridable:
//   MiniMax-H3 (diffusers): model_index.json, transformer/, text_encoder/, tokenizer/ (else the
//     text encoder's folder), video_vae/, audio_vae/;
//   MAGI-2 (the checkpoint root its configs name as ${MAGI2_CKPT_ROOT}): preview/ (the DiT, with
//     its config.json), text_encoder/ (with its tokenizer), turbo_vae/ (the default video decoder,
//     as use_turbo_vae) or vae/, stable-audio-open-1.0/, and refiner/ (the 1080p refiner, optional:
//     with one the run has a second stage; its config.json is configs/magi2_refiner.json, whose
//     "extends" names a file beside it).
#pragma once

#include <filesystem>
#include <optional>
#include <string>

namespace avdit::pipeline {

enum class PipelineFamily { H3, Magi2 };
const char* pipeline_family_name(PipelineFamily f);  // "h3", "magi2"

struct PipelineComponents {
  PipelineFamily family = PipelineFamily::H3;
  std::filesystem::path root, dit, text_encoder, tokenizer, video_vae, audio_vae;
  std::filesystem::path refiner;  // MAGI-2: empty when the folder has none
};

// Folders given on the command line instead of the layout's (empty: the layout's).
struct ComponentOverrides {
  std::filesystem::path dit, text_encoder, tokenizer, video_vae, audio_vae;
  std::filesystem::path refiner;  // MAGI-2 (--refiner)
};

// H3 when `dir` holds model_index.json, MAGI-2 when it holds preview/config.json; nullopt else.
std::optional<PipelineFamily> pipeline_family(const std::filesystem::path& dir);

// The components of `dir` with the overrides applied. BadInput names the missing folder or file,
// the layout expected and the option that overrides it.
PipelineComponents find_components(const std::filesystem::path& dir,
                                   const ComponentOverrides& overrides = {});

}  // namespace avdit::pipeline
