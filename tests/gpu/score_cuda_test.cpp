// avdit score on the GPU (label gpu): the same exactness as on the CPU - the teacher as its own
// candidate scores 0 error at every step (H3 and MAGI-2, fp32 and bf16: the CUDA runs are
// deterministic), a planted velocity perturbation of relative size eps scores eps within 1% (H3's
// Euler; MAGI-2 on one step) - and the knobs that run on the GPU (the floor's forced combine sums,
// NVFP4 experts) score a finite, ordered error: 0 < floor < NVFP4.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "backend/cuda/context.h"
#include "io/safetensors.h"
#include "score/metrics.h"
#include "score/run.h"

namespace avdit::score {
namespace {

namespace fs = std::filesystem;
const fs::path kGolden = fs::path(AVDIT_SHARED_DIR) / "golden";

ops::CudaContext& gpu() {
  static ops::CudaContext c;
  return c;
}

Prompt fixture_prompt(bool magi2) {
  const fs::path file =
      magi2 ? kGolden / "magi2-tiny/sampler.safetensors" : kGolden / "h3-tiny/inputs.safetensors";
  const TensorMap t = read_all(file);
  Prompt p;
  p.id = "p1";
  p.text = {t.at(magi2 ? "txt_feat" : "text_embeds"), file.string()};
  if (magi2) p.negative = {t.at("null_txt_feat"), file.string()};
  return p;
}

Sampling tiny_sampling(bool magi2, int steps, const std::string& precision) {
  Sampling s;
  s.steps = steps;
  s.seed = 3;
  s.video_shape = magi2 ? Shape{1, 48, 2, 4, 6} : Shape{1, 24, 2, 4, 6};
  s.audio_shape = magi2 ? Shape{1, 10, 64} : Shape{2, 32, 9};
  s.device = "cuda";
  s.precision = precision;
  return s;
}

StepSeries forced(bool magi2, const Knobs& k, const Sampling& s,
                  const sample::Trajectory& teacher) {
  const Checkpoint ckpt = Checkpoint::open(kGolden / (magi2 ? "magi2-tiny" : "h3-tiny"));
  const CandidateRunner r(gpu(), ckpt, magi2, k, s.precision);
  return step_series(r.run(fixture_prompt(magi2), s, &teacher).trajectory, teacher);
}

sample::Trajectory teacher_of(bool magi2, const Sampling& s) {
  const Checkpoint ckpt = Checkpoint::open(kGolden / (magi2 ? "magi2-tiny" : "h3-tiny"));
  return CandidateRunner(gpu(), ckpt, magi2, Knobs{}, s.precision)
      .run(fixture_prompt(magi2), s, nullptr)
      .trajectory;
}

TEST(ScoreCuda, TeacherExactFloorBelowNvfp4) {
  for (const bool magi2 : {false, true})
    for (const char* precision : {"fp32", "bf16"}) {
      const Sampling s = tiny_sampling(magi2, 4, precision);
      const sample::Trajectory teacher = teacher_of(magi2, s);
      const StepSeries self = forced(magi2, Knobs{}, s, teacher);
      for (size_t m = 0; m < 2; ++m)
        for (size_t k = 0; k < 4; ++k) {
          EXPECT_EQ(self.error[m][k], 0.0) << magi2 << " " << precision << " " << m << " " << k;
          EXPECT_TRUE(std::isinf(self.snr[m][k]));
        }
      Knobs floor;
      if (magi2)
        floor.moe_combine =
            std::string(precision) == "bf16" ? ops::CombineSum::F32 : ops::CombineSum::Bf16;
      else
        floor.velocity_bf16 = true;
      const StepSeries f = forced(magi2, floor, s, teacher);
      const double fe = mean_finite_or_inf(f.error[0]);
      std::printf("  %s %s floor: video %.3e audio %.3e\n", magi2 ? "magi2" : "h3", precision, fe,
                  mean_finite_or_inf(f.error[1]));
      EXPECT_GT(fe, 0.0);
      if (magi2) {
        Knobs fp4;
        fp4.nvfp4_experts = true;
        const double ne = mean_finite_or_inf(forced(magi2, fp4, s, teacher).error[0]);
        std::printf("  magi2 %s nvfp4: video %.3e\n", precision, ne);
        EXPECT_LT(fe, ne);
      }
    }
}

TEST(ScoreCuda, PlantedPerturbationScoresItsSize) {
  for (const bool magi2 : {false, true}) {
    const Sampling s = tiny_sampling(magi2, magi2 ? 1 : 5, "fp32");
    const sample::Trajectory teacher = teacher_of(magi2, s);
    Knobs k;
    k.perturb_velocity = 0.1;
    const StepSeries p = forced(magi2, k, s, teacher);
    for (size_t m = 0; m < 2; ++m)
      for (const double e : p.error[m]) EXPECT_NEAR(e, 0.1, 0.001) << magi2 << " " << m;
  }
}

}  // namespace
}  // namespace avdit::score
