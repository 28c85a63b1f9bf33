// libFuzzer target: config.json parsing for both families (depth-limited JSON, family detection,
// the parsers' plausibility limits, and what `inspect` derives from a config: the tensor list and
// parameter counts). Any text is either described or refused with BadInput; never a crash, a raw
// library exception, an integer overflow (UBSan) or an allocation that exhausts memory.
#include <cstdint>
#include <string_view>

#include "core/error.h"
#include "core/json_limits.h"
#include "models/family.h"
#include "models/h3/config.h"
#include "models/magi2/config.h"
#include "pipeline/latent_shape.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  nlohmann::json config;
  try {
    config = avdit::parse_json(text, "fuzz-config.json");
  } catch (const avdit::BadInput&) {
    return 0;
  }
  if (!config.is_object()) return 0;  // the readers refuse non-objects before parsing
  for (const char* family : {"magi2-preview", "h3"}) {
    try {
      if (auto report = avdit::models::describe_family(family, config))
        (void)report->tensors.size();
      (void)avdit::pipeline::latent_shapes_from_string(family, config, "2,4,6,9");
    } catch (const avdit::BadInput&) {
    }
  }
  try {
    (void)avdit::models::detect_family(config);
  } catch (const avdit::BadInput&) {
  }
  return 0;
}
