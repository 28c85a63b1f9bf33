// generate --random-weights: component seeds, cache identities, and the random decoder folders.
#include "pipeline/random_weights.h"

#include <fmt/format.h>
#include <unistd.h>

#include <atomic>
#include <chrono>

#include "core/error.h"
#include "core/log.h"
#include "core/rng.h"
#include "io/safetensors.h"
#include "models/vae/decoder_factory.h"
#include "models/vae/random_decoder.h"

namespace avdit::pipeline {

namespace fs = std::filesystem;
namespace vae = models::vae;

namespace {

// Part of a cached decoder folder's name: bump it when random_decoder.cpp's rules or values change.
constexpr int kDecoderVersion = 1;

uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

const char* short_name(vae::Family f) {
  switch (f) {
    case vae::Family::Wan22: return "wan22";
    case vae::Family::TurboVaed: return "turbo";
    case vae::Family::Oobleck: return "oobleck";
    case vae::Family::H3Video: return "h3video";
    case vae::Family::H3Audio: return "h3audio";
  }
  return "vae";
}

}  // namespace

uint64_t component_seed(const RandomWeights& r, std::string_view component) {
  return splitmix64(r.seed ^ stream_id(std::string(component).c_str()));
}

std::string random_identity(const fs::path& dir, uint64_t seed) {
  return fmt::format("random:{}\n{}", seed, read_json(dir / "config.json").dump());
}

RandomDecoderFolder::RandomDecoderFolder(const fs::path& dir, const RandomWeights& random,
                                         std::string_view component,
                                         const std::optional<fs::path>& cache_dir) {
  const vae::Family family = vae::detect_family(dir);
  const vae::DecoderSize size = vae::random_decoder_size(family, dir, random.shared);
  const uint64_t seed = component_seed(random, component);
  const std::string name = fmt::format("{}-{}-{:016x}-v{}", short_name(family),
                                       vae::decoder_size_name(size), seed, kDecoderVersion);
  describe_ = fmt::format("random {}-size {} weights", vae::decoder_size_name(size),
                          vae::family_name(family));
  const auto t0 = std::chrono::steady_clock::now();
  auto written = [&] {
    describe_ +=
        fmt::format(" (written in {:.1f} s)",
                    std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  };
  static std::atomic<int> counter{0};
  const std::string unique = fmt::format("{}-{}", ::getpid(), counter++);
  std::error_code ec;
  if (!cache_dir) {
    path_ = fs::temp_directory_path() / fmt::format("avdit-random-{}-{}", name, unique);
    temporary_ = true;
    try {
      vae::write_random_decoder(family, size, random.shared, path_, seed);
    } catch (...) {
      fs::remove_all(path_, ec);
      throw;
    }
    written();
    log::info("{}: {} to {}", dir.string(), describe_, path_.string());
    return;
  }
  const fs::path base = *cache_dir / "random-decoders";
  path_ = base / name;
  if (vae::random_decoder_complete(path_)) {
    describe_ += " (cached)";
    log::info("{}: {} in {}", dir.string(), describe_, path_.string());
    return;
  }
  // Written under a temporary name and renamed, so that two runs never read a half folder.
  const fs::path tmp = base / fmt::format(".{}.tmp-{}", name, unique);
  try {
    fs::create_directories(base);
    vae::write_random_decoder(family, size, random.shared, tmp, seed);
    fs::rename(tmp, path_, ec);
    if (ec && !vae::random_decoder_complete(path_)) {
      fs::remove_all(path_, ec);  // an incomplete folder of ours: replaced
      fs::rename(tmp, path_, ec);
      AVDIT_CHECK(!ec, "{}: cannot rename {} into place: {}", path_.string(), tmp.string(),
                  ec.message());
    }
  } catch (...) {
    fs::remove_all(tmp, ec);
    throw;
  }
  fs::remove_all(tmp, ec);  // another run's folder won the rename
  written();
  log::info("{}: {} to {}", dir.string(), describe_, path_.string());
}

RandomDecoderFolder::~RandomDecoderFolder() {
  if (!temporary_) return;
  std::error_code ec;
  fs::remove_all(path_, ec);
}

}  // namespace avdit::pipeline
