// Teacher trajectory files of `avdit score` (see teacher_cache.h).
#include "score/teacher_cache.h"

#include <algorithm>
#include <fstream>
#include <vector>

#include "core/error.h"
#include "core/sha256.h"

namespace avdit::score {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr const char* kMetaKey = "avdit.score.teacher";

void hash_file_sample(Sha256& h, const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  AVDIT_REQUIRE(f, "{}: cannot be read", p.string());
  const auto size = static_cast<uint64_t>(fs::file_size(p));
  h.update(fmt::format("{}|{}|", p.filename().string(), size));
  constexpr uint64_t kHead = 1 << 20, kSpan = 64 << 10, kSpans = 16;
  std::vector<char> buf(kHead);
  auto span = [&](uint64_t at, uint64_t n) {
    f.seekg(static_cast<std::streamoff>(at));
    f.read(buf.data(), static_cast<std::streamsize>(n));
    AVDIT_REQUIRE(static_cast<uint64_t>(f.gcount()) == n, "{}: short read at byte {}", p.string(),
                  at);
    h.update(std::string_view(buf.data(), n));
  };
  span(0, std::min(size, kHead));
  if (size > kHead)
    for (uint64_t i = 0; i < kSpans; ++i) {
      const uint64_t at = kHead + (size - kHead) / kSpans * i;
      span(at, std::min(kSpan, size - at));
    }
}

}  // namespace

std::string model_fingerprint(const Checkpoint& ckpt) {
  Sha256 h;
  if (ckpt.config()) h.update(ckpt.config()->dump());
  std::vector<fs::path> files;
  for (const auto& f : ckpt.files()) files.push_back(f->path());
  std::sort(files.begin(), files.end());
  for (const fs::path& f : files) hash_file_sample(h, f);
  return h.hex_digest();
}

json teacher_key(const std::string& fingerprint, const std::string& family, const Prompt& prompt,
                 const Sampling& s) {
  auto opt = [](const auto& v) { return v ? json(*v) : json(nullptr); };
  return json{{"version", 1},
              {"model", fingerprint},
              {"family", family},
              {"prompt", prompt.digest},
              {"steps", s.steps},
              {"seed", s.seed},
              {"video_shape", s.video_shape},
              {"audio_shape", s.audio_shape},
              {"video_guidance", opt(s.video_guidance)},
              {"audio_guidance", opt(s.audio_guidance)},
              {"shift", opt(s.shift)},
              {"device", s.device},
              {"precision", s.precision}};
}

fs::path teacher_path(const fs::path& dir, const json& key) {
  return dir / fmt::format("teacher-{}.safetensors", sha256_hex(key.dump()).substr(0, 24));
}

sample::Trajectory read_teacher(const fs::path& file, const json& key) {
  AVDIT_REQUIRE(fs::is_regular_file(file), "{}: no such file (a teacher trajectory of avdit score)",
                file.string());
  const auto st = SafetensorsFile::open(file);
  const auto it = st->metadata().find(kMetaKey);
  AVDIT_REQUIRE(it != st->metadata().end(),
                "{}: not a teacher trajectory of avdit score (no {} metadata): its model and "
                "settings cannot be "
                "checked",
                file.string(), kMetaKey);
  json have;
  try {
    have = json::parse(it->second);
  } catch (const json::exception&) {
    throw BadInput(fmt::format("{}: its {} metadata is not JSON", file.string(), kMetaKey));
  }
  AVDIT_REQUIRE(have.is_object(), "{}: its {} metadata is not a JSON object", file.string(),
                kMetaKey);
  std::string diff;
  for (const auto& item : key.items()) {
    // Named copies, not structured bindings: clang 14 refuses to capture those in the lambda.
    const std::string field = item.key();
    const json& want = item.value();
    const json got = have.contains(field) ? have[field] : json(nullptr);
    if (got == want) continue;
    auto shown = [&](const json& v) {
      const std::string s = v.dump();
      return field == "model" || field == "prompt" ? s.substr(0, 14) + "..\"" : s;
    };
    diff += fmt::format("{}{} {} (this run: {})", diff.empty() ? "" : ", ", field, shown(got),
                        shown(want));
  }
  AVDIT_REQUIRE(diff.empty(), "{}: the teacher of another run: {}", file.string(), diff);
  TensorMap tensors;
  for (const TensorInfo& t : st->tensors()) tensors.emplace(t.name, st->get(t.name));
  sample::Trajectory t = sample::trajectory_from_tensors(tensors, {"video", "audio"});
  AVDIT_REQUIRE(t.steps() == key["steps"].get<int>(),
                "{}: {} steps of latents, its metadata says {}", file.string(), t.steps(),
                key["steps"].get<int>());
  for (size_t m = 0; m < 2; ++m) {
    const json want = m == 0 ? key["video_shape"] : key["audio_shape"];
    AVDIT_REQUIRE(json(t.latents[0][m].shape()) == want, "{}: {} latents of shape {}, expected {}",
                  file.string(), m == 0 ? "video" : "audio", t.latents[0][m].shape_str(),
                  want.dump());
  }
  for (const auto& row : t.latents)
    for (const Tensor& x : row) {
      const Tensor f = x.to_f32();
      for (int64_t i = 0; i < f.numel(); ++i)
        AVDIT_REQUIRE(std::isfinite(f.f32()[i]), "{}: a non-finite latent value", file.string());
    }
  return t;
}

void write_teacher(const fs::path& file, const json& key, const sample::Trajectory& t) {
  const TensorMap tensors = sample::trajectory_to_tensors(t);
  write_safetensors(file, tensors, {{kMetaKey, key.dump()}});
}

}  // namespace avdit::score
