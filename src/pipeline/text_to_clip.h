// From a prompt to a clip: the stages of either release in order, each component loaded when its
// stage starts and freed when it ends (so the pipeline fits one GPU): tokenize -> encode (or the
// prompt-state cache) -> DiT sampling -> (MAGI-2 with a refiner: refine) -> video decode -> audio
// decode. The caller writes the mp4.
// Each stage reports its wall time and the peak host and device memory it reached.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "pipeline/latent_shape.h"
#include "pipeline/pipeline_dir.h"
#include "pipeline/prompt_states.h"
#include "pipeline/random_weights.h"

namespace avdit::ops {
class Context;
}
namespace avdit::analysis::routes {
class RouteRecorder;
}

namespace avdit::pipeline {

// MAGI-2's second stage: the refiner on the preview's final latent (Magi2InferenceEngine's
// evaluate_magi2_refiner_with_latent). Unset options take the refiner config's evaluation_config.
struct RefineRequest {
  bool enabled = false;           // runs only when the pipeline folder has a refiner as well
  int64_t height = 0, width = 0;  // refiner pixels, multiples of magi2_refiner_vae_stride
  std::optional<int> steps;
  std::optional<double> shift;
  std::optional<float> video_guidance, audio_guidance;
};

struct ClipRequest {
  std::string prompt;
  std::string negative;           // MAGI-2: the unconditional prompt (default: the reference's)
  bool no_negative = false;       // MAGI-2: an empty unconditional text instead
  uint64_t seed = 0;
  std::optional<int> steps;
  LatentShapes shapes;            // video / audio latent shapes of the run
  std::optional<float> video_guidance, audio_guidance;
  DType act = DType::F32;         // activations of the DiT and the text encoder; BF16 also
                                  // decodes the video in bf16 (the references' bf16 runs)
  bool nvfp4_experts = false;     // MAGI-2: routed experts packed to NVFP4 at load time
  // H3: the modulation as a table of the run's timesteps (H3TableOptions), cached beside the
  // prompt states: the adaLN projections never reach the device.
  bool adaln_table = true;
  // MAGI-2: router statistics of the sampling (attached for it; the caller finishes them) and an
  // expert mask's router bias (models/magi2/weights.h LoadOptions::router_bias_add).
  analysis::routes::RouteRecorder* route_recorder = nullptr;
  std::map<int64_t, Tensor> router_bias_add;
  std::optional<std::filesystem::path> cache_dir;  // prompt-state cache; nullopt: none
  // Random weights instead of the folder's weight files (random_weights.h): only the configs and
  // the tokenizer are read.
  std::optional<RandomWeights> random;
  // Called once per sampling step (done, total, seconds of the step).
  std::function<void(int, int, double)> step_progress;
  RefineRequest refine;
  std::function<void(int, int, double)> refine_progress;  // per refiner step, as step_progress
};

// The contexts each stage runs on (they may be one object).
struct StageContexts {
  ops::Context* text = nullptr;
  ops::Context* dit = nullptr;
  ops::Context* vae = nullptr;
};

struct StageRecord {
  std::string name;
  double seconds = 0;
  int64_t host_peak = 0;    // peak resident set during the stage (bytes)
  int64_t device_peak = 0;  // peak bytes of the stage's context pool (0 on the CPU)
  std::string detail;       // "cache hit", "12 tokens", "4 steps" ...
};

struct Clip {
  NamedTensors text_states;
  Tensor video_latent, audio_latent;  // the final latents (host, unpacked layouts): the refined
                                      // video when refined; the audio is always the preview's
  Tensor preview_latent;              // MAGI-2 refined: the preview's final video latent
  bool refined = false;
  int refine_steps = 0;
  Tensor frames;                      // [T, 3, H, W] float32 in [-1, 1]
  double fps = 0;                     // the release's output frame rate
  Tensor audio;                       // [channels, samples] float32
  int sample_rate = 0;
  int steps = 0;
  std::vector<StageRecord> stages;
};

// The release's output frame rate: H3 24; MAGI-2 evaluation_config.fps (12.5 for the preview).
double output_fps(PipelineFamily family, const nlohmann::json& dit_config);

// Runs every stage. BadInput for a bad prompt or component (named); RuntimeFailure if a stage fails.
Clip text_to_clip(const PipelineComponents& components, const ClipRequest& request,
                  const StageContexts& contexts);

// The stages around the DiT, for callers that sample on their own (avdit score): tokenize and
// encode request.prompt (or read the prompt-state cache) into clip.text_states; decode
// clip.video_latent and clip.audio_latent into clip.frames / fps and clip.audio / sample_rate
// (video_act: the video decoder's precision, F32 or BF16; the audio decoders run in F32).
// Each appends its stage records to clip.stages.
void encode_prompt(const PipelineComponents& components, const ClipRequest& request, ops::Context& text,
                   Clip& clip);
void decode_latents(const PipelineComponents& components, ops::Context& vae, Clip& clip,
                    DType video_act = DType::F32);

// The refiner's settings as a run will use them, checked before any model loads against the
// preview's latent shapes and text width (BadInput, exit 2, naming the refiner's config.json and
// the field): channels, a window the op takes, the refiner size on its vae_stride grid.
struct RefinePlan {
  int64_t latent_height = 0, latent_width = 0;  // the refiner's latent grid
  int steps = 0;
};
RefinePlan check_refine_request(const PipelineComponents& components,
                                const nlohmann::json& dit_config, const LatentShapes& preview,
                                const RefineRequest& request);

// MAGI-2's default negative prompt (the reference's DEFAULT_NEGATIVE_PROMPT, used when its
// evaluation_config.use_negative_prompt is true, as in the released preview config).
extern const char* const kMagi2DefaultNegativePrompt;

}  // namespace avdit::pipeline
