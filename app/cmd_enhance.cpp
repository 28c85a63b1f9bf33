// `avdit enhance`: MAGI-2's prompt enhancement on its own, against any OpenAI-compatible server,
// to see (and cache) the caption a pipeline run with --enhance would use.
#include <fmt/format.h>

#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "commands.h"
#include "core/error.h"
#include "enhance_options.h"
#include "models/text/prompt_magi2.h"
#include "models/text/unicode.h"
#include "pipeline/enhance/enhancer.h"

namespace avdit::app {

namespace enh = pipeline::enhance;
namespace text = models::text;
using nlohmann::ordered_json;

namespace {

struct Opts {
  std::string url, model, prompt, prompt_file, image;
  uint64_t seed = 0;
  bool json = false;
  EnhanceCli enhance;
};

ordered_json to_json(const enh::EnhanceResult& r, const Opts& o, const enh::EnhanceOptions& e) {
  ordered_json j;
  j["caption"] = r.caption;
  j["enhanced"] = r.enhanced;
  j["from_cache"] = r.from_cache;
  j["attempts"] = r.attempts.size();
  ordered_json log = ordered_json::array();
  for (const auto& a : r.attempts)
    log.push_back({{"seed", a.seed}, {"outcome", a.outcome}, {"seconds", a.seconds}});
  j["attempt_log"] = log;
  j["task"] = r.task;
  j["template"] = r.template_id;
  j["model"] = o.model;
  j["endpoint"] = r.endpoint;
  j["seed"] = o.seed;
  j["thinking"] = e.sampling.thinking;
  j["cache_file"] = r.cache_file.empty() ? ordered_json() : ordered_json(r.cache_file);
  j["failure"] = r.failure.empty() ? ordered_json() : ordered_json(r.failure);
  j["fields"] = r.fields;
  return j;
}

}  // namespace

Run add_enhance(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "enhance",
      "Rewrite a prompt into MAGI-2's structured caption with an LLM behind an OpenAI-compatible\n"
      "chat-completions endpoint (vLLM, SGLang, llama.cpp, OpenAI, Gemini...), using the MAGI-2\n"
      "reference's template and JSON schema (text-to-video, or image-to-video with --image).\n"
      "Prints the caption (Markdown, as the pipeline gets it); --json adds the parsed fields,\n"
      "whether it came from the cache and the attempts. Thinking is off unless\n"
      "--enhance-thinking; captions are cached per prompt, model, template, seed and sampling.\n"
      "The API key, when the server needs one, comes from AVDIT_ENHANCE_API_KEY or\n"
      "OPENAI_API_KEY. Exit codes: 2 for bad options, an unreachable server or a refused\n"
      "request; 1 when every attempt failed.\n"
      "Example: avdit enhance --url http://127.0.0.1:8000/v1 --model Qwen/Qwen3-32B --prompt \"a "
      "red fox in snow\"");
  auto o = std::make_shared<Opts>();
  cmd->add_option("--url", o->url,
                  "The server's OpenAI-compatible base URL (http://host:port/v1) or its "
                  ".../chat/completions URL")
      ->required();
  cmd->add_option("--model", o->model, "The model name the server serves")->required();
  auto* prompt = cmd->add_option("--prompt", o->prompt, "The prompt");
  auto* prompt_file = cmd->add_option("--prompt-file", o->prompt_file,
                                      "Read the prompt from a UTF-8 file (stripped, as MAGI-2 "
                                      "reads prompt files)");
  cmd->add_option("--seed", o->seed,
                  "Seed sent to the server and part of the cache key (default 0)");
  cmd->add_option("--image", o->image,
                  "The first frame (PNG, JPEG or WebP): the image-to-video template, the image "
                  "sent with it");
  cmd->add_flag("--json", o->json,
                "Print a JSON object (caption, fields, from_cache, attempts...)");
  add_enhance_options(cmd, o->enhance);
  return [o, prompt, prompt_file]() {
    AVDIT_REQUIRE(prompt->count() + prompt_file->count() == 1,
                  "enhance: give one of --prompt or --prompt-file");
    std::string p;
    if (prompt_file->count()) {
      p = text::u32_to_utf8(text::magi2::read_prompt_file(o->prompt_file));
      AVDIT_REQUIRE(!p.empty(), "{} is empty (or only whitespace): write the prompt into it",
                    o->prompt_file);
    } else {
      AVDIT_REQUIRE(!o->prompt.empty(), "--prompt is empty: give the prompt to enhance");
      text::utf8_to_u32(o->prompt, "--prompt");  // names the first bad byte
      p = o->prompt;
    }
    enh::EnhanceOptions e = enhance_options(o->enhance);
    e.url = o->url;
    e.url_option = "--url";
    e.model = o->model;
    enh::EnhanceRequest rq;
    rq.prompt = p;
    rq.seed = o->seed;
    if (!o->image.empty()) rq.image = o->image;
    const enh::EnhanceResult r = enh::enhance(rq, e);
    if (o->json) {
      std::cout << to_json(r, *o, e).dump() << "\n" << std::flush;
    } else {
      std::cout << r.caption;
      if (r.caption.empty() || r.caption.back() != '\n') std::cout << "\n";
      std::cout << std::flush;
    }
    return 0;
  };
}

}  // namespace avdit::app
