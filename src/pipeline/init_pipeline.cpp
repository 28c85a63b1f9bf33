#include "pipeline/init_pipeline.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <unistd.h>

#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/log.h"
#include "io/safetensors.h"
#include "models/h3/api.h"
#include "models/magi2/api.h"
#include "models/magi2/refiner/config.h"
#include "models/magi2/refiner/init.h"
#include "models/vae/random_decoder.h"

namespace avdit::pipeline {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

void copy_into(const fs::path& from, const fs::path& to) {
  std::error_code ec;
  AVDIT_REQUIRE(fs::is_regular_file(from, ec), "{}: missing (avdit init --pipeline reads the tiny "
                "models of the golden fixtures; pass --shared DIR to point at them)", from.string());
  fs::create_directories(to.parent_path());
  fs::copy_file(from, to, fs::copy_options::overwrite_existing, ec);
  AVDIT_REQUIRE(!ec, "{}: cannot copy to {}: {}", from.string(), to.string(), ec.message());
}

// A golden tiny model as a component folder: its config.json and model.safetensors.
void copy_component(const fs::path& golden, const fs::path& dir) {
  copy_into(golden / "config.json", dir / "config.json");
  copy_into(golden / "model.safetensors", dir / "model.safetensors");
}

void write_text(const fs::path& file, const std::string& text) {
  std::ofstream f(file, std::ios::binary);
  f << text;
  f.close();
  AVDIT_CHECK(f.good(), "{}: write failed", file.string());
}

int64_t text_vocab_size(const fs::path& encoder_dir) {
  const json c = read_json(encoder_dir / "config.json");
  const json& t = c.contains("text_config") ? c["text_config"] : c;
  return t.at("vocab_size").get<int64_t>();
}

// The release's refiner config (reference-configs/magi2/magi2_refiner.json) at the golden tiny
// refiner's width, merged over the tiny preview's config as the reference's load_config merges
// it over magi2_preview.json: the shipping window, sampler and data-proxy settings on a tiny net.
void write_tiny_refiner(const InitPipelineOptions& o, const fs::path& tmp) {
  const fs::path release = o.shared / "reference-configs/magi2/magi2_refiner.json";
  const fs::path tiny = o.shared / "golden/magi2-refiner-tiny/config.json";
  for (const fs::path& f : {release, tiny})
    AVDIT_REQUIRE(fs::is_regular_file(f),
                  "{}: missing (avdit init --pipeline magi2 reads it; pass "
                  "--shared DIR to point at the shared folder)",
                  f.string());
  json config = read_json(release);
  config["magi2_refiner_arch_config"] = read_json(tiny).at("magi2_refiner_arch_config");
  config["extends"] = "../preview/config.json";  // written just before, in tmp
  fs::create_directories(tmp / "refiner");       // the relative path resolves through it
  const json merged = models::magi2::refiner::resolve_extends(config, tmp / "refiner");
  models::magi2::refiner::init_refiner_checkpoint(merged, tmp / "refiner", o.seed);
}

void write_json(const fs::path& file, const json& j) {
  fs::create_directories(file.parent_path());
  write_text(file, j.dump(2) + "\n");
}

// Removes every weight file under `dir` (safetensors, their indexes): a configs-only folder.
void remove_weights(const fs::path& dir) {
  std::vector<fs::path> weights;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    const std::string n = e.path().filename().string();
    if (e.is_regular_file() &&
        (n.ends_with(".safetensors") || n.ends_with(".safetensors.index.json")))
      weights.push_back(e.path());
  }
  for (const fs::path& f : weights) fs::remove(f);
}

// Writes `tmp` through `write`, then renames it onto `out` (see init_tiny_pipeline).
void write_folder(const InitPipelineOptions& o, const std::function<void(const fs::path&)>& write) {
  std::error_code ec;
  AVDIT_REQUIRE(!fs::exists(o.out, ec) || (fs::is_directory(o.out, ec) && fs::is_empty(o.out, ec)),
                "--out {}: exists and is not an empty folder; choose a new one", o.out.string());
  const fs::path parent = o.out.has_parent_path() ? o.out.parent_path() : fs::path(".");
  fs::create_directories(parent);
  const fs::path tmp = parent / fmt::format(".{}.tmp-{}", o.out.filename().string(), ::getpid());
  fs::remove_all(tmp, ec);
  try {
    write(tmp);
    if (o.configs_only) remove_weights(tmp);
    if (fs::exists(o.out, ec)) fs::remove(o.out, ec);  // the empty folder, replaced atomically
    fs::rename(tmp, o.out);
  } catch (...) {
    fs::remove_all(tmp, ec);
    throw;
  }
}

}  // namespace

void write_truncated_tokenizer(const fs::path& src, const fs::path& dst, int64_t vocab_size) {
  const json vocab = read_json(src / "vocab.json");
  json config = read_json(src / "tokenizer_config.json");
  const json added = config.value("added_tokens_decoder", json::object());
  const int64_t base = vocab_size - static_cast<int64_t>(added.size());
  AVDIT_REQUIRE(base >= 256, "a {}-token vocabulary cannot hold the 256 byte tokens and {} added ones",
                vocab_size, added.size());
  json cut = json::object();
  std::set<std::string> kept;
  for (const auto& [token, id] : vocab.items())
    if (id.get<int64_t>() < base) {
      cut[token] = id;
      kept.insert(token);
    }
  std::ifstream in(src / "merges.txt");
  AVDIT_REQUIRE(in.good(), "{}: missing", (src / "merges.txt").string());
  std::ostringstream merges;
  std::string line;
  while (std::getline(in, line)) {
    if (line.starts_with("#version")) {
      merges << line << "\n";
      continue;
    }
    const size_t sp = line.find(' ');
    if (sp == std::string::npos) continue;
    const std::string a = line.substr(0, sp), b = line.substr(sp + 1);
    if (kept.count(a) && kept.count(b) && kept.count(a + b)) merges << line << "\n";
  }
  // The added tokens keep their order, renumbered right after the cut vocabulary.
  std::map<int64_t, json> by_id;
  for (const auto& [id, v] : added.items()) by_id[std::stoll(id)] = v;
  json renumbered = json::object();
  int64_t next = base;
  for (const auto& [id, v] : by_id) renumbered[std::to_string(next++)] = v;
  config["added_tokens_decoder"] = renumbered;
  fs::create_directories(dst);
  write_text(dst / "vocab.json", cut.dump());
  write_text(dst / "merges.txt", merges.str());
  write_text(dst / "tokenizer_config.json", config.dump(2));
}

void init_tiny_pipeline(const InitPipelineOptions& o) {
  const fs::path g = o.shared / "golden";
  const fs::path tok = g / "tokenizer-qwen";
  write_folder(o, [&](const fs::path& tmp) {
    if (o.family == PipelineFamily::H3) {
      copy_into(o.shared / "reference-configs/h3/FL2VA/model_index.json", tmp / "model_index.json");
      models::h3::init_checkpoint(read_json(g / "h3-tiny/config.json"), tmp / "transformer", o.seed);
      copy_component(g / "te-h3-qwen3vl-tiny", tmp / "text_encoder");
      write_truncated_tokenizer(tok, tmp / "tokenizer", text_vocab_size(tmp / "text_encoder"));
      copy_component(g / "vae-h3video-tiny", tmp / "video_vae");
      copy_component(g / "vae-h3audio-tiny", tmp / "audio_vae");
    } else {
      models::magi2::init_checkpoint(read_json(g / "magi2-tiny/config.json"), tmp / "preview", o.seed);
      copy_component(g / "te-magi2-qwen35-tiny", tmp / "text_encoder");
      write_truncated_tokenizer(tok, tmp / "text_encoder", text_vocab_size(tmp / "text_encoder"));
      copy_component(g / "vae-turbo-tiny", tmp / "turbo_vae");
      copy_component(g / "vae-wan22-tiny", tmp / "vae");
      copy_component(g / "vae-sa-audio-tiny", tmp / "stable-audio-open-1.0");
      write_tiny_refiner(o, tmp);
    }
  });
}

void init_full_pipeline_configs(const InitPipelineOptions& options, const fs::path& source_dir) {
  InitPipelineOptions o = options;
  o.configs_only = true;
  const fs::path ref = o.shared / "reference-configs";
  const fs::path tok = o.shared / "golden/tokenizer-qwen";
  auto tokenizer = [&](const fs::path& dir) {
    for (const char* f : {"vocab.json", "merges.txt", "tokenizer_config.json"})
      copy_into(tok / f, dir / f);
  };
  write_folder(o, [&](const fs::path& tmp) {
    if (o.family == PipelineFamily::H3) {
      const fs::path r = ref / "h3/FL2VA";
      for (const char* f :
           {"model_index.json", "transformer/config.json", "text_encoder/config.json",
            "video_vae/config.json", "audio_vae/config.json"})
        copy_into(r / f, tmp / f);
      tokenizer(tmp / "tokenizer");
    } else {
      copy_into(ref / "magi2/magi2_preview.json", tmp / "preview/config.json");
      copy_into(source_dir / "bench/configs/qwen35_27b_text_config.json",
                tmp / "text_encoder/config.json");
      tokenizer(tmp / "text_encoder");
      namespace vae = models::vae;
      write_json(
          tmp / "turbo_vae/config.json",
          vae::random_decoder_config(vae::Family::TurboVaed, vae::DecoderSize::Release, o.shared));
      write_json(
          tmp / "stable-audio-open-1.0/config.json",
          vae::random_decoder_config(vae::Family::Oobleck, vae::DecoderSize::Release, o.shared));
      // The refiner's config merged over the preview's, as the tiny pipeline's.
      json config = read_json(ref / "magi2/magi2_refiner.json");
      config["extends"] = "../preview/config.json";  // copied just before, in tmp
      fs::create_directories(tmp / "refiner");       // the relative path resolves through it
      write_json(tmp / "refiner/config.json",
                 models::magi2::refiner::resolve_extends(config, tmp / "refiner"));
    }
  });
}

}  // namespace avdit::pipeline
