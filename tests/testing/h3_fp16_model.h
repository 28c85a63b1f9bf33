// A MiniMax-H3 model that breaks a naive fp16 cast, for the fp16 recipe's tests: the tiny golden
// checkpoint with every block's mlp.fc1 weight multiplied by kFc1Scale (written once per process
// into a temporary folder beside a copy of its config.json). The fc1 outputs stay in fp16's range
// while their SwiGLU product, the fc2 output and the residual stream pass 65,504. And two probes:
// the first non-finite point of a forward, and the largest finite |value| over matching points.
#pragma once

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <string>

#include "core/observer.h"
#include "io/safetensors.h"
#include "ops/context.h"

namespace avdit::test_util {

inline constexpr float kFc1Scale = 160.0f;

inline std::filesystem::path h3_tiny_golden() {
  return std::filesystem::path(AVDIT_SHARED_DIR) / "golden" / "h3-tiny";
}
inline std::filesystem::path h3_fp16_inputs() { return h3_tiny_golden() / "inputs.safetensors"; }

inline std::filesystem::path h3_fp16_breaking_model() {
  namespace fs = std::filesystem;
  static const fs::path dir = [] {
    const fs::path d = fs::temp_directory_path() / ("avdit-h3-fp16-" + std::to_string(::getpid()));
    fs::create_directories(d);
    TensorMap m = read_all(h3_tiny_golden() / "model.safetensors");
    for (auto& [name, t] : m)
      if (name.rfind("blocks.", 0) == 0 && name.find(".mlp.fc1.weight") != std::string::npos) {
        Tensor s = t.to_f32().clone();
        for (int64_t i = 0; i < s.numel(); ++i) s.f32()[i] *= kFc1Scale;
        t = s.to(t.dtype());
      }
    write_safetensors(d / "model.safetensors", m);
    fs::copy_file(h3_tiny_golden() / "config.json", d / "config.json",
                  fs::copy_options::overwrite_existing);
    return d;
  }();
  return dir;
}

// max |a - b| / max |b| over an H3 forward's two outputs (video_out, audio_out).
inline double h3_output_distance(const TensorMap& a, const TensorMap& b) {
  double diff = 0, ref = 0;
  for (const char* name : {"video_out", "audio_out"}) {
    const Tensor x = a.at(name).to_f32(), y = b.at(name).to_f32();
    for (int64_t i = 0; i < y.numel(); ++i) {
      diff = std::max(diff, static_cast<double>(std::fabs(x.f32()[i] - y.f32()[i])));
      ref = std::max(ref, static_cast<double>(std::fabs(y.f32()[i])));
    }
  }
  return diff / ref;
}

inline bool float_dtype(DType d) { return d == DType::F32 || d == DType::BF16 || d == DType::F16; }

// The first point (in forward order) holding a non-finite value, as "name row r".
class FirstNonFinite final : public Probe {
 public:
  std::string where;
  bool wants(const Point& p) const override {
    return where.empty() && std::strcmp(p.name, "stack.skip") != 0;
  }
  void on(ops::Context& ctx, const Point& p, Tensor& t) override {
    if (!where.empty() || !float_dtype(t.dtype())) return;
    const Tensor h = ctx.download(t).to_f32();
    const int64_t width = h.ndim() > 0 ? std::max<int64_t>(h.size(-1), 1) : 1;
    for (int64_t i = 0; i < h.numel(); ++i)
      if (!std::isfinite(h.f32()[i])) {
        where = p.str() + " row " + std::to_string(i / width);
        return;
      }
  }
};

// The largest finite |value| over the points whose name contains `part`.
class SiteMax final : public Probe {
 public:
  explicit SiteMax(std::string part) : part_(std::move(part)) {}
  double max = 0;
  bool wants(const Point& p) const override { return p.str().find(part_) != std::string::npos; }
  void on(ops::Context& ctx, const Point&, Tensor& t) override {
    if (!float_dtype(t.dtype())) return;
    const Tensor h = ctx.download(t).to_f32();
    for (int64_t i = 0; i < h.numel(); ++i)
      if (std::isfinite(h.f32()[i]))
        max = std::max(max, static_cast<double>(std::fabs(h.f32()[i])));
  }

 private:
  std::string part_;
};

}  // namespace avdit::test_util
