// The MAGI-2 reference's prompt-enhancement texts (magi2_t2v_template.cpp, magi2_i2v_template.cpp):
// the instruction template of each task and its output JSON schema, kept verbatim.
#pragma once

#include <string_view>

namespace avdit::pipeline::enhance {

extern const std::string_view kT2vTemplate;
extern const std::string_view kT2vSchema;  // JSON
extern const std::string_view kI2vTemplate;
extern const std::string_view kI2vSchema;  // JSON

}  // namespace avdit::pipeline::enhance
