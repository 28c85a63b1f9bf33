// The two prompt-enhancement tasks of MAGI-2 (text-to-video, and image-to-video when a first frame
// is given): the template, the output schema, the keys a caption must have, and the template id
// that names this text in the caption cache.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace avdit::pipeline::enhance {

enum class TaskKind { kT2v, kI2v };

struct Task {
  TaskKind kind;
  std::string name;         // "t2v" | "i2v"
  std::string_view text;    // the template, with {user_input_text} and {variation_seed}
  std::string schema_name;  // response_format.json_schema.name, as the reference names it
  nlohmann::ordered_json schema;
  std::vector<std::string> required_keys;  // top-level keys a caption must have
  std::string template_id;  // "magi2-t2v-<16 hex>": changes whenever the text or schema does
};

// The task's constants, built once.
const Task& task(TaskKind kind);

// "magi2-<name>-" and the first 16 hex digits of SHA-256(text, NUL, compact schema JSON).
std::string template_id(std::string_view name, std::string_view text,
                        const nlohmann::ordered_json& schema);

// The user message: the prompt in place of {user_input_text}, then every {variation_seed}
// emptied, in the reference's order (so a prompt holding "{variation_seed}" loses it there too).
std::string fill_template(std::string_view text, std::string_view prompt);

}  // namespace avdit::pipeline::enhance
