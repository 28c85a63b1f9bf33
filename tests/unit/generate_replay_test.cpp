// generate_magi2 / generate_h3 on tiny random-weight models (each family's init_checkpoint with the
// golden tiny config, written to a temp dir): reruns with one seed give the same SHA-256, another
// seed differs, a teacher-forced run against the run's own trajectory (also through the file form)
// reproduces it bit for bit, and bad text or noise is refused naming the tensor.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <functional>

#include <unistd.h>

#include "core/error.h"
#include "core/rng.h"
#include "core/sha256.h"
#include "io/safetensors.h"
#include "models/h3/api.h"
#include "models/magi2/api.h"
#include "models/h3/model.h"
#include "models/magi2/model.h"
#include "ops/context.h"
#include "pipeline/generate_h3.h"
#include "pipeline/generate_magi2.h"
#include "pipeline/latent_shape.h"
#include "sample/noise.h"

namespace avdit::pipeline {
namespace {

namespace fs = std::filesystem;

bool bit_equal(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && std::memcmp(a.raw(), b.raw(), static_cast<size_t>(a.nbytes())) == 0;
}

// One tiny random model per family, written once per test binary and removed at exit.
struct TinyModels {
  fs::path root;
  TinyModels() {
    root = fs::temp_directory_path() / ("avdit_generate_test_" + std::to_string(::getpid()));
    fs::create_directories(root);
    const std::string golden = std::string(AVDIT_SHARED_DIR) + "/golden/";
    models::magi2::init_checkpoint(read_json(golden + "magi2-tiny/config.json"), root / "magi2", 11);
    models::h3::init_checkpoint(read_json(golden + "h3-tiny/config.json"), root / "h3", 12);
  }
  ~TinyModels() {
    std::error_code ec;
    fs::remove_all(root, ec);
  }
};

fs::path model_dir(const std::string& family) {
  static const TinyModels models;
  return models.root / (family == "h3" ? "h3" : "magi2");
}

Tensor text(int64_t rows, int64_t width, uint64_t seed) {
  Tensor t = Tensor::empty({rows, width}, DType::F32);
  fill_normal(t, seed, 99);
  return t;
}

// A family-neutral run: (seed, teacher, record) -> result.
using Runner = std::function<GenerateResult(uint64_t seed, const sample::Trajectory* teacher)>;

Runner magi2_runner() {
  return [](uint64_t seed, const sample::Trajectory* teacher) {
    const Checkpoint ckpt = Checkpoint::open(model_dir("magi2"));
    Magi2GenerateOptions o;
    o.text = {text(6, 64, 1), "test:text"};
    o.negative = {text(3, 64, 2), "test:negative"};
    o.run.steps = 3;
    o.run.seed = seed;
    const LatentShapes s = latent_shapes_from_string("magi2-preview", *ckpt.config(), "2,2,3,5");
    o.run.video_shape = s.video;
    o.run.audio_shape = s.audio;
    o.run.record_trajectory = true;
    o.run.record_model_out = true;
    o.run.teacher = teacher;
    ops::CpuContext ctx;
    const models::magi2::Magi2Model model(ctx, ckpt);
    return generate_magi2(model, o);
  };
}

Runner h3_runner(float guidance) {
  return [guidance](uint64_t seed, const sample::Trajectory* teacher) {
    const Checkpoint ckpt = Checkpoint::open(model_dir("h3"));
    H3GenerateOptions o;
    o.text = {text(5, 64, 1), "test:text_embeds"};
    if (guidance != 1.0f) {
      o.negative = {text(4, 64, 2), "test:negative"};
      o.video_guidance = guidance;
      o.audio_guidance = guidance;
    }
    o.run.steps = 3;
    o.run.seed = seed;
    const LatentShapes s = latent_shapes_from_string("h3", *ckpt.config(), "2,2,4,6");
    o.run.video_shape = s.video;
    o.run.audio_shape = s.audio;
    o.run.record_trajectory = true;
    o.run.teacher = teacher;
    ops::CpuContext ctx;
    const models::h3::H3Model model(ctx, ckpt);
    return generate_h3(model, o);
  };
}

void check_reruns_and_teacher(const Runner& run) {
  const GenerateResult a = run(5, nullptr);
  const GenerateResult b = run(5, nullptr);
  const GenerateResult c = run(6, nullptr);
  EXPECT_EQ(sha256_hex(a.video), sha256_hex(b.video));
  EXPECT_EQ(sha256_hex(a.audio), sha256_hex(b.audio));
  EXPECT_NE(sha256_hex(a.video), sha256_hex(c.video));
  EXPECT_NE(sha256_hex(a.audio), sha256_hex(c.audio));

  // Teacher-forced against its own trajectory: every latent identical, in memory and via the file form.
  const fs::path file = model_dir("magi2").parent_path() / "trajectory.safetensors";
  write_safetensors(file, sample::trajectory_to_tensors(a.trajectory));
  const sample::Trajectory from_file = sample::trajectory_from_tensors(read_all(file), {"video", "audio"});
  for (const sample::Trajectory* teacher : {&a.trajectory, &from_file}) {
    const GenerateResult t = run(5, teacher);
    ASSERT_EQ(t.trajectory.steps(), a.trajectory.steps());
    for (int k = 0; k <= a.trajectory.steps(); ++k)
      for (int m = 0; m < 2; ++m)
        EXPECT_TRUE(bit_equal(t.trajectory.latents[k][m], a.trajectory.latents[k][m])) << "step " << k << " m " << m;
    EXPECT_TRUE(bit_equal(t.video, a.video));
    EXPECT_TRUE(bit_equal(t.audio, a.audio));
  }
  // A teacher from another seed replaces the latents: seeded with 5, the run follows seed 6's
  // trajectory (latents[0] records the run's own start; every step after it is the teacher's).
  const GenerateResult forced = run(5, &c.trajectory);
  EXPECT_TRUE(bit_equal(forced.trajectory.latents[0][0], a.trajectory.latents[0][0]));
  for (int k = 1; k <= c.trajectory.steps(); ++k)
    for (int m = 0; m < 2; ++m)
      EXPECT_TRUE(bit_equal(forced.trajectory.latents[k][m], c.trajectory.latents[k][m])) << "step " << k;
  EXPECT_TRUE(bit_equal(forced.video, c.video));
}

TEST(GenerateReplay, Magi2SeedsAndTeacherForcing) { check_reruns_and_teacher(magi2_runner()); }
TEST(GenerateReplay, H3SeedsAndTeacherForcing) { check_reruns_and_teacher(h3_runner(1.0f)); }
TEST(GenerateReplay, H3WithCfgSeedsAndTeacherForcing) { check_reruns_and_teacher(h3_runner(3.0f)); }

TEST(GenerateReplay, SeededNoiseIsMakeNoise) {
  const Checkpoint ckpt = Checkpoint::open(model_dir("h3"));
  H3GenerateOptions o;
  o.text = {text(5, 64, 1), "test:text_embeds"};
  o.run.steps = 1;
  o.run.seed = 42;
  o.run.video_shape = {1, 24, 2, 4, 6};
  o.run.audio_shape = {2, 32, 7};
  o.run.record_trajectory = true;
  ops::CpuContext ctx;
  const models::h3::H3Model model(ctx, ckpt);
  const GenerateResult r = generate_h3(model, o);
  EXPECT_TRUE(bit_equal(r.trajectory.latents[0][0], sample::make_noise({1, 24, 2, 4, 6}, 42, sample::kVideoNoiseStream)));
  EXPECT_TRUE(bit_equal(r.trajectory.latents[0][1], sample::make_noise({2, 32, 7}, 42, sample::kAudioNoiseStream)));
}

TEST(GenerateReplay, BadInputsNameTheTensor) {
  const Checkpoint magi2 = Checkpoint::open(model_dir("magi2"));
  const Checkpoint h3 = Checkpoint::open(model_dir("h3"));
  auto message = [](const std::function<void()>& f) -> std::string {
    try {
      f();
    } catch (const BadInput& e) {
      return e.what();
    }
    return "(no BadInput)";
  };
  auto has = [&](const std::function<void()>& f, const std::string& part) {
    const std::string m = message(f);
    EXPECT_NE(m.find(part), std::string::npos) << "message: " << m << "\nexpected to contain: " << part;
  };
  Magi2GenerateOptions m;
  m.text = {text(4, 32, 1), "p.safetensors:text_embeds"};  // the model wants 64 channels
  m.run.video_shape = {1, 48, 1, 2, 2};
  m.run.audio_shape = {1, 3, 64};
  m.run.steps = 1;
  ops::CpuContext ctx;
  const models::magi2::Magi2Model magi2_model(ctx, magi2);
  has([&] { generate_magi2(magi2_model, m); }, "p.safetensors:text_embeds (text features) has width 32, this model expects 64");
  m.text = {text(4, 64, 1), "p.safetensors:text_embeds"};
  m.run.noise_video = {Tensor::zeros({1, 24, 1, 2, 2}, DType::F32), "n.safetensors:noise_video"};
  m.run.noise_audio = {Tensor::zeros({1, 3, 64}, DType::F32), "n.safetensors:noise_audio"};
  has([&] { generate_magi2(magi2_model, m); }, "n.safetensors:noise_video");

  const models::h3::H3Model h3_model(ctx, h3);
  H3GenerateOptions h;
  h.text = {text(4, 64, 1), "p.safetensors:text_embeds"};
  h.run.steps = 1;
  h.run.noise_video = {Tensor::zeros({1, 24, 1, 2, 2}, DType::F32), "n:noise_video"};
  h.run.noise_audio = {Tensor::zeros({1, 32, 5}, DType::F32), "n:noise_audio"};  // stereo: 2 rows expected
  has([&] { generate_h3(h3_model, h); }, "n:noise_audio (audio noise) has shape [1, 32, 5], expected [2, 32, d2]");
  h.run.noise_audio = {Tensor::zeros({2, 32, 5}, DType::F32), "n:noise_audio"};
  h.video_guidance = 4.0f;  // CFG without a negative prompt
  has([&] { generate_h3(h3_model, h); }, "--negative");
  has([&] { latent_shapes_from_string("h3", *h3.config(), "2,x,3,4"); }, "'x' is not an integer");
}

TEST(GenerateReplay, LatentShapesFromPixels) {
  const Checkpoint magi2 = Checkpoint::open(model_dir("magi2"));
  const Checkpoint h3 = Checkpoint::open(model_dir("h3"));
  // MAGI-2 preview default 5 s at 448x256: 125 frames -> T = 16, 16x28, 125 audio latents.
  const LatentShapes m = magi2_latent_shapes(*magi2.config(), 125, 256, 448);
  EXPECT_EQ(m.video, (Shape{1, 48, 16, 16, 28}));
  EXPECT_EQ(m.audio, (Shape{1, 125, 64}));
  // H3: 124 frames (17n + 5 grid: n = 7) at 768x1344 -> T = 37, 48x84, round(124 * 40 / 24) = 207.
  const LatentShapes h = h3_latent_shapes(*h3.config(), 124, 768, 1344);
  EXPECT_EQ(h.video, (Shape{1, 24, 37, 48, 84}));
  EXPECT_EQ(h.audio, (Shape{2, 32, 207}));
  EXPECT_THROW(h3_latent_shapes(*h3.config(), 124, 770, 1344), BadInput);
}

}  // namespace
}  // namespace avdit::pipeline
