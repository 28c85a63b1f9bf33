// The caption the MAGI-2 pipeline is given: the enhancer's JSON rendered as Markdown by the rules
// of the reference's pe_markdown.render_markdown, with the settings enhancer.py passes (empty
// values dropped, every leaf key kept, scalar fields before nested sections, " | " inline lists).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace avdit::pipeline::enhance {

// The Markdown text, ending in one newline ("" when nothing is left after dropping empties).
std::string render_caption_markdown(const nlohmann::ordered_json& caption);

// A double as Python's repr() writes it (shortest round trip; exponent below 1e-4 and from 1e16),
// which is how the reference prints the JSON numbers it parsed.
std::string python_float_repr(double v);

}  // namespace avdit::pipeline::enhance
