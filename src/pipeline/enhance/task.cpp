// The MAGI-2 prompt-enhancement tasks, built from the verbatim texts of templates.h.
#include "pipeline/enhance/task.h"

#include "core/sha256.h"
#include "pipeline/enhance/templates.h"

namespace avdit::pipeline::enhance {

namespace {

void replace_all(std::string& s, std::string_view from, std::string_view to) {
  for (size_t pos = s.find(from); pos != std::string::npos; pos = s.find(from, pos + to.size()))
    s.replace(pos, from.size(), to);
}

Task make_task(TaskKind kind, std::string name, std::string_view text, std::string_view schema,
               std::string schema_name, std::vector<std::string> required_keys) {
  Task t{kind,
         std::move(name),
         text,
         std::move(schema_name),
         nlohmann::ordered_json::parse(schema),
         std::move(required_keys),
         ""};
  t.template_id = template_id(t.name, t.text, t.schema);
  return t;
}

}  // namespace

const Task& task(TaskKind kind) {
  // The reference's TaskSpec values (enhancer.py: T2V_TASK, I2V_TASK).
  static const Task kT2v = make_task(TaskKind::kT2v, "t2v", kT2vTemplate, kT2vSchema,
                                     "T2VEnhanceResult", {"global_layer", "dynamic_layer"});
  static const Task kI2v =
      make_task(TaskKind::kI2v, "i2v", kI2vTemplate, kI2vSchema, "I2VEnhanceResult",
                {"global_caption", "reference_bank", "shot_timeline", "audio_event_timeline",
                 "visible_text", "generation_requirements"});
  return kind == TaskKind::kT2v ? kT2v : kI2v;
}

std::string template_id(std::string_view name, std::string_view text,
                        const nlohmann::ordered_json& schema) {
  Sha256 h;
  h.update(text);
  h.update(std::string_view("\0", 1));
  h.update(schema.dump());
  return "magi2-" + std::string(name) + "-" + h.hex_digest().substr(0, 16);
}

std::string fill_template(std::string_view text, std::string_view prompt) {
  std::string s(text);
  replace_all(s, "{user_input_text}", prompt);
  replace_all(s, "{variation_seed}", "");
  return s;
}

}  // namespace avdit::pipeline::enhance
