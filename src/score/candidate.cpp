// Candidate option sets of `avdit score` (see candidate.h).
#include "score/candidate.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <set>

#include "core/error.h"
#include "sample/step_cache.h"

namespace avdit::score {

namespace {

// Name, whether it takes a value, and what it does (for the option list).
struct OptionSpec {
  const char* name;
  bool value;
  const char* help;
};
constexpr OptionSpec kOptions[] = {
    {"--nvfp4-experts", false, "MAGI-2: routed experts packed to NVFP4 (as generate)"},
    {"--moe-combine", true, "MAGI-2: bf16|fp32, the MoE combine's summation (as generate)"},
    {"--nvfp4-expert-inputs", false,
     "MAGI-2: fake NVFP4 activations into the two expert GEMMs (as generate)"},
    {"--expert-mask", true, "MAGI-2: FILE, a router mask (as generate)"},
    {"--precision", true, "fp32|bf16 activations (as generate; default the run's)"},
    {"--step-cache", true, "POLICY, step caching (as generate)"},
    {"--fp8-gemm", true, "H3: tensor|row, the block GEMMs in FP8 e4m3 (as generate; CPU)"},
    {"--fp8-attention", false, "H3: the attention cores in FP8 e4m3 (as generate)"},
    {"--velocity-bf16", false, "score only: each model output rounded once to bf16"},
    {"--perturb-velocity", true,
     "score only: EPS, a planted perturbation of norm EPS |v| per step"},
};

const OptionSpec* find_option(const std::string& name) {
  for (const OptionSpec& o : kOptions)
    if (name == o.name) return &o;
  return nullptr;
}

std::vector<std::string> split_words(const std::string& s) {
  std::vector<std::string> out;
  std::string cur;
  for (const char c : s) {
    if (std::isspace(static_cast<unsigned char>(c))) {
      if (!cur.empty()) out.push_back(std::move(cur));
      cur.clear();
    } else {
      cur += c;
    }
  }
  if (!cur.empty()) out.push_back(std::move(cur));
  return out;
}

}  // namespace

std::string candidate_option_list() {
  std::string s;
  for (const OptionSpec& o : kOptions) s += fmt::format("{}{}", s.empty() ? "" : ", ", o.name);
  return s;
}

Candidate parse_candidate(const std::string& spec) {
  const size_t eq = spec.find('=');
  AVDIT_REQUIRE(
      eq != std::string::npos && eq > 0,
      "--candidate '{}': expected NAME=OPTIONS (e.g. fp4=--nvfp4-experts; OPTIONS may be empty)",
      spec);
  Candidate c;
  c.name = spec.substr(0, eq);
  c.options = spec.substr(eq + 1);
  for (const char ch : c.name)
    AVDIT_REQUIRE(
        std::isalnum(static_cast<unsigned char>(ch)) || ch == '-' || ch == '_' || ch == '.' ||
            ch == '+',
        "--candidate '{}': the name may hold letters, digits and - _ . + only (it names files and "
        "table rows)",
        spec);
  AVDIT_REQUIRE(c.name.size() <= 64, "--candidate '{}': a name of at most 64 characters", spec);
  const std::vector<std::string> words = split_words(c.options);
  std::set<std::string> seen;
  for (size_t i = 0; i < words.size(); ++i) {
    std::string name = words[i], value;
    const size_t inner = name.find('=');
    const bool inline_value = inner != std::string::npos;
    if (inline_value) {
      value = name.substr(inner + 1);
      name = name.substr(0, inner);
    }
    const OptionSpec* o = find_option(name);
    AVDIT_REQUIRE(o, "--candidate {}: unknown option '{}' (a candidate takes {})", c.name, name,
                  candidate_option_list());
    AVDIT_REQUIRE(seen.insert(name).second, "--candidate {}: {} given twice", c.name, name);
    if (o->value && !inline_value) {
      AVDIT_REQUIRE(i + 1 < words.size(), "--candidate {}: {} needs a value", c.name, name);
      value = words[++i];
    }
    AVDIT_REQUIRE(o->value || !inline_value, "--candidate {}: {} takes no value", c.name, name);
    Knobs& k = c.knobs;
    if (name == "--nvfp4-experts") {
      k.nvfp4_experts = true;
    } else if (name == "--moe-combine") {
      AVDIT_REQUIRE(value == "bf16" || value == "fp32",
                    "--candidate {}: --moe-combine {}: expected bf16 or fp32", c.name, value);
      k.moe_combine = value == "bf16" ? ops::CombineSum::Bf16 : ops::CombineSum::F32;
    } else if (name == "--nvfp4-expert-inputs") {
      k.nvfp4_expert_inputs = true;
    } else if (name == "--expert-mask") {
      k.expert_mask = value;
    } else if (name == "--precision") {
      AVDIT_REQUIRE(value == "fp32" || value == "bf16",
                    "--candidate {}: --precision {}: expected fp32 or bf16", c.name, value);
      k.precision = value;
    } else if (name == "--fp8-gemm") {
      AVDIT_REQUIRE(value == "tensor" || value == "row",
                    "--candidate {}: --fp8-gemm {}: expected tensor or row", c.name, value);
      k.fp8_gemm = value;
    } else if (name == "--fp8-attention") {
      k.fp8_attention = true;
    } else if (name == "--step-cache") {
      try {
        sample::parse_step_cache(value);
      } catch (const BadInput& e) {
        throw BadInput(fmt::format("--candidate {}: {}", c.name, e.what()));
      }
      k.step_cache = value;
    } else if (name == "--velocity-bf16") {
      k.velocity_bf16 = true;
    } else if (name == "--perturb-velocity") {
      char* end = nullptr;
      const double eps = std::strtod(value.c_str(), &end);
      AVDIT_REQUIRE(
          !value.empty() && end && *end == '\0' && std::isfinite(eps) && eps > 0 && eps <= 100,
          "--candidate {}: --perturb-velocity {}: expected a relative size above 0 and at most 100",
          c.name, value);
      k.perturb_velocity = eps;
    }
    c.tokens.push_back(o->value ? name + " " + value : name);
  }
  std::sort(c.tokens.begin(), c.tokens.end());
  return c;
}

Candidate floor_candidate(bool magi2, const std::string& precision) {
  if (!magi2) return parse_candidate("floor=--velocity-bf16");
  return parse_candidate(precision == "bf16" ? "floor=--moe-combine fp32"
                                             : "floor=--moe-combine bf16");
}

std::vector<Combination> find_combinations(const std::vector<Candidate>& cs) {
  std::vector<Combination> out;
  for (size_t c = 0; c < cs.size(); ++c)
    for (size_t a = 0; a < cs.size(); ++a)
      for (size_t b = a + 1; b < cs.size(); ++b) {
        if (a == c || b == c || cs[a].tokens.empty() || cs[b].tokens.empty()) continue;
        std::vector<std::string> u;
        std::set_union(cs[a].tokens.begin(), cs[a].tokens.end(), cs[b].tokens.begin(),
                       cs[b].tokens.end(), std::back_inserter(u));
        if (u.size() == cs[a].tokens.size() + cs[b].tokens.size() && u == cs[c].tokens)
          out.push_back({c, a, b});
      }
  return out;
}

}  // namespace avdit::score
