// libFuzzer target: the input-file readers of `generate` and `forward` (text states, noise,
// teacher trajectories) on arbitrary file contents: read_one_of with its NaN/Inf check, the
// trajectory reader, and the initial-latent shape checks. Anything is either accepted as finite,
// well-formed tensors or refused with BadInput.
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "core/error.h"
#include "io/finite.h"
#include "io/safetensors.h"
#include "pipeline/generate_common.h"
#include "pipeline/inputs.h"
#include "sample/sampler_loop.h"

namespace fs = std::filesystem;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  struct TempFile {
    fs::path path = fs::temp_directory_path() / ("avdit-inputs-fuzz-" + std::to_string(::getpid()));
    ~TempFile() { fs::remove(path); }
  };
  static const TempFile temp;
  const fs::path& file = temp.path;
  {
    std::ofstream f(file, std::ios::binary | std::ios::trunc);
    f.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  }
  using avdit::pipeline::LabeledTensor;
  try {
    const LabeledTensor text =
        avdit::pipeline::read_one_of(file, {"text_embeds", "txt_feat"}, "text states");
    if (avdit::first_non_finite(text.tensor)) std::abort();  // read_one_of must have refused it
  } catch (const avdit::BadInput&) {
  }
  try {
    const LabeledTensor noise = avdit::pipeline::read_one_of(file, {"noise_video"}, "noise");
    (void)avdit::pipeline::initial_latent(noise, {}, {1, -1, -1, -1, -1}, 0, 0, "video");
  } catch (const avdit::BadInput&) {
  }
  try {
    const avdit::TensorMap all = avdit::read_all(file);
    avdit::require_finite(all, file);
    const auto t = avdit::sample::trajectory_from_tensors(all, {"video", "audio"});
    (void)t.steps();
  } catch (const avdit::BadInput&) {
  }
  return 0;
}
