// `avdit encode`: a text encoder folder (by its config.json's model_type) turned into the text
// states the DiT reads. Prompt mode tokenizes as the pipeline does and writes exactly what
// `avdit generate --text` reads; fixture mode runs the cases of a golden's inputs.safetensors.
#include <fmt/format.h>

#include <chrono>
#include <filesystem>
#include <iostream>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "commands.h"
#include "context.h"
#include "core/error.h"
#include "core/log.h"
#include "core/sha256.h"
#include "io/output_file.h"
#include "io/safetensors.h"
#include "models/text/text_encoder.h"
#include "pipeline/prompt_cache.h"
#include "pipeline/prompt_states.h"

namespace avdit::app {

namespace fs = std::filesystem;
namespace text = models::text;

namespace {

struct EncodeArgs {
  std::string model, inputs, prompt, negative, tokenizer, out, device = "cpu", precision = "fp32",
                                                               dtype = "bf16";
  int layers = 0;
  std::string cache_dir;
  bool no_cache = false;
};

void require_file(const std::string& path, const char* option) {
  std::error_code ec;
  AVDIT_REQUIRE(fs::is_regular_file(path, ec), "{} {}: no such file", option, path);
}

// The files of the --model folder, which no output may replace (the checkpoint is opened later, by
// the encoder, with only the shards its layers need).
std::vector<fs::path> folder_files(const std::string& dir) {
  std::error_code ec;
  AVDIT_REQUIRE(fs::is_directory(dir, ec),
                "--model {}: no such folder (a text encoder folder: config.json + safetensors)",
                dir);
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (e.is_regular_file(ec)) files.push_back(e.path());
  AVDIT_REQUIRE(!ec, "--model {}: cannot list the folder: {}", dir, ec.message());
  return files;
}

// The rows of one fixture case: T ids, with the mask and positions (when given) checked to be the
// text-only layout the encoder computes (mask of ones, positions 0..T-1 in every M-RoPE row).
std::vector<int32_t> case_ids(const TensorMap& in, const std::string& file, const std::string& c) {
  const Tensor& raw = in.at(c + ".input_ids");
  AVDIT_REQUIRE(!dtype_is_float(raw.dtype()) && raw.numel() >= 1 &&
                    (raw.ndim() == 1 || (raw.ndim() == 2 && raw.size(0) == 1)),
                "{}: {}.input_ids is {} {}, expected integer ids [1, T] or [T] with T >= 1", file,
                c, dtype_name(raw.dtype()), raw.shape_str());
  const Tensor ids = raw.to(DType::I64);
  const int64_t T = ids.numel();
  std::vector<int32_t> out(static_cast<size_t>(T));
  for (int64_t i = 0; i < T; ++i) {
    const int64_t id = ids.data<int64_t>()[i];
    AVDIT_REQUIRE(id >= 0 && id < (int64_t{1} << 31), "{}: {}.input_ids[{}] = {} is not a token id",
                  file, c, i, id);
    out[i] = static_cast<int32_t>(id);
  }
  if (auto it = in.find(c + ".attention_mask"); it != in.end()) {
    const Tensor m = it->second.to(DType::F64);
    bool ones = m.numel() == T;
    for (int64_t i = 0; ones && i < T; ++i) ones = m.data<double>()[i] == 1.0;
    AVDIT_REQUIRE(ones, "{}: {}.attention_mask must be {} ones (padding is not supported)", file, c,
                  T);
  }
  if (auto it = in.find(c + ".position_ids"); it != in.end()) {
    const Tensor p = it->second.to(DType::F64);
    bool text = p.numel() % T == 0;
    for (int64_t i = 0; text && i < p.numel(); ++i) text = p.data<double>()[i] == double(i % T);
    AVDIT_REQUIRE(text,
                  "{}: {}.position_ids must be 0..{} in every row (text-only prompts; vision "
                  "positions are not supported)",
                  file, c, T - 1);
  }
  return out;
}

// case{i} for i = 0, 1, ... while case{i}.input_ids exists.
std::vector<std::string> fixture_cases(const TensorMap& in, const std::string& file) {
  std::vector<std::string> cases;
  while (in.count(fmt::format("case{}.input_ids", cases.size())))
    cases.push_back(fmt::format("case{}", cases.size()));
  AVDIT_REQUIRE(!cases.empty(),
                "{}: no case0.input_ids (expected the inputs.safetensors of a text encoder golden)",
                file);
  return cases;
}

int run_encode(const EncodeArgs& a) {
  AVDIT_REQUIRE(!a.inputs.empty() || !a.prompt.empty(),
                "encode: --prompt is empty: give the text to encode");
  AVDIT_REQUIRE(a.layers >= 0, "--layers {}: expected a positive layer count", a.layers);
  const std::string tokenizer_dir = a.tokenizer.empty() ? a.model : a.tokenizer;
  // Every input is read and every check made before any output exists.
  std::vector<fs::path> inputs = folder_files(a.model);
  std::optional<TensorMap> fixture;
  std::optional<pipeline::PromptIds> ids;
  if (!a.inputs.empty()) {
    AVDIT_REQUIRE(a.negative.empty(),
                  "encode: --negative applies in prompt mode (--prompt), not with --inputs");
    require_file(a.inputs, "--inputs");
    inputs.push_back(a.inputs);
    fixture = read_all(a.inputs);
  } else {
    ids = pipeline::tokenize_prompts(tokenizer_dir, text::text_encoder_family(a.model), a.prompt,
                                     a.negative);
  }
  check_output_path(a.out, "--out", inputs);

  const std::unique_ptr<ops::Context> ctx = make_context(a.device);
  // Prompt mode reads and fills the prompt-state cache that `generate --prompt` uses.
  const std::optional<fs::path> cache =
      ids ? pipeline::cache_root(a.cache_dir, a.no_cache) : std::nullopt;
  std::string key;
  std::optional<pipeline::NamedTensors> cached;
  if (cache) {
    key = pipeline::prompt_state_key(
        pipeline::folder_identity(a.model), *ids,
        pipeline::prompt_state_settings(activation_dtype(a.precision), ctx->is_cuda(), a.layers,
                                        a.dtype == "bf16"));
    cached = pipeline::load_prompt_states(*cache, key);
  }
  std::unique_ptr<text::TextEncoder> encoder;  // not even opened on a cache hit
  std::vector<std::pair<std::string, Tensor>> tensors;
  int64_t tokens = 0;
  const auto t0 = std::chrono::steady_clock::now();
  if (cached) {
    tensors = std::move(*cached);
  } else {
    text::TextEncoderOptions options;
    options.selected_layers = a.layers;
    options.act = activation_dtype(a.precision);
    encoder = text::open_text_encoder(*ctx, a.model, options);
    log::debug("encode: {}", encoder->describe());
  }
  if (fixture) {
    for (const std::string& c : fixture_cases(*fixture, a.inputs)) {
      const std::vector<int32_t> case_tokens = case_ids(*fixture, a.inputs, c);
      const Tensor states = encoder->encode(case_tokens);
      tokens += static_cast<int64_t>(case_tokens.size());
      tensors.emplace_back(c + ".text_states", states.reshape({1, states.size(0), states.size(1)}));
    }
  } else if (!cached) {
    tensors = pipeline::encode_prompt_states(*encoder, *ids, a.dtype == "bf16", &tokens);
    if (cache) pipeline::store_prompt_states(*cache, key, tensors);
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const std::string source = encoder ? encoder->describe() : "prompt-state cache";
  OutputFile out(a.out);
  write_safetensors(out, tensors, {{"encoder", source}});
  publish_together({&out});
  if (encoder)
    std::cout << fmt::format("{}: {} tokens in {:.3f} s ({:.1f} tokens/s)\n", source, tokens,
                             seconds, seconds > 0 ? tokens / seconds : 0.0);
  else
    std::cout << "prompt-state cache hit: "
              << (*cache / "prompts" / (key + ".safetensors")).string() << "\n";
  for (const auto& [name, t] : tensors)
    std::cout << fmt::format("{} {} {}  sha256 {}\n", name, t.shape_str(), dtype_name(t.dtype()),
                             sha256_hex(t));
  std::cout << "wrote " << a.out << "\n";
  return 0;
}

}  // namespace

Run add_encode(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "encode",
      "Encode a prompt with a text encoder folder (config.json model_type: qwen3_vl for "
      "MiniMax-H3,\n"
      "qwen3_5 for MAGI-2) into the text states `avdit generate --text/--negative` reads (H3:\n"
      "text_embeds, text_token_tags; MAGI-2: txt_feat, null_txt_feat and their lengths), and "
      "print\n"
      "their SHA-256. Fixture mode (--inputs) writes case{i}.text_states (float32) for every case\n"
      "of a text encoder golden's inputs.safetensors.\n"
      "Example: avdit encode --model ../shared/golden/te-h3-qwen3vl-tiny --layers 4 \\\n"
      "           --inputs ../shared/golden/te-h3-qwen3vl-tiny/inputs.safetensors --out "
      "s.safetensors");
  auto a = std::make_shared<EncodeArgs>();
  cmd->add_option("--model", a->model, "Text encoder folder (config.json + safetensors)")
      ->required();
  auto* inputs = cmd->add_option("--inputs", a->inputs,
                                 "Fixture mode: a golden's inputs.safetensors (case{i}.input_ids)");
  auto* prompt = cmd->add_option("--prompt", a->prompt,
                                 "The prompt (H3 T2VA: verbatim; MAGI-2: the reference's prompt "
                                 "handling)");
  cmd->add_option("--negative", a->negative,
                  "MAGI-2: the negative prompt, encoded into null_txt_feat beside txt_feat "
                  "(padded to one length)")
      ->excludes(inputs);
  inputs->excludes(prompt);
  cmd->add_option("--tokenizer", a->tokenizer,
                  "Tokenizer folder for --prompt (default: the --model folder)")
      ->excludes(inputs);
  cmd->add_option("--out", a->out, "Output .safetensors (written atomically)")->required();
  cmd->add_option("--layers", a->layers,
                  "Decoder layers to run (default: the pipeline's, 50 for MiniMax-H3; tiny "
                  "fixtures state theirs)");
  cmd->add_option("--cache-dir", a->cache_dir,
                  "Prompt mode: the prompt-state cache that generate --prompt shares (default "
                  "$XDG_CACHE_HOME/avdit or ~/.cache/avdit)")
      ->excludes(inputs);
  cmd->add_flag("--no-cache", a->no_cache, "Prompt mode: encode even when the states are cached")
      ->excludes(inputs);
  cmd->add_option("--device", a->device, "cpu or cuda")->capture_default_str();
  cmd->add_option("--precision", a->precision, "Activations: fp32 (parity) or bf16")
      ->check(CLI::IsMember({"fp32", "bf16"}))
      ->capture_default_str();
  cmd->add_option(
         "--dtype", a->dtype,
         "Prompt mode: dtype of text_embeds, bf16 (what the pipelines hand the DiT) or f32")
      ->check(CLI::IsMember({"bf16", "f32"}))
      ->capture_default_str();
  return [a, inputs, prompt] {
    AVDIT_REQUIRE(inputs->count() + prompt->count() == 1,
                  "encode: give --prompt TEXT or --inputs FIXTURE_inputs.safetensors");
    return run_encode(*a);
  };
}

}  // namespace avdit::app
