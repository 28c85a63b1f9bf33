// avdit score's parts on the CPU: candidate option sets, the error and SNR formulas, the exactness
// the issue asks for (the teacher as its own candidate: 0 error and infinite SNR at every step,
// both families; a planted velocity perturbation of relative size eps scores eps within 1%), the
// teacher file's refusals, and the decoded-clip metrics against direct (slow, independent)
// computations.
#include <gtest/gtest.h>

#include <cmath>
#include <complex>
#include <filesystem>
#include <random>

#include "core/error.h"
#include "io/safetensors.h"
#include "ops/context.h"
#include "score/candidate.h"
#include "score/media_metrics.h"
#include "score/metrics.h"
#include "score/run.h"
#include "score/teacher_cache.h"

namespace avdit::score {
namespace {

namespace fs = std::filesystem;
const fs::path kGolden = fs::path(AVDIT_SHARED_DIR) / "golden";

Tensor randn(Shape shape, uint32_t seed, float std = 1.f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.f, std);
  Tensor t = Tensor::empty(std::move(shape), DType::F32);
  for (int64_t i = 0; i < t.numel(); ++i) t.f32()[i] = d(rng);
  return t;
}

TEST(ScoreCandidate, ParsesOptionsAndRefusesUnknownOnes) {
  const Candidate c =
      parse_candidate("both=--nvfp4-experts  --moe-combine bf16 --perturb-velocity=0.25");
  EXPECT_EQ(c.name, "both");
  EXPECT_TRUE(c.knobs.nvfp4_experts);
  EXPECT_EQ(c.knobs.moe_combine, ops::CombineSum::Bf16);
  EXPECT_DOUBLE_EQ(c.knobs.perturb_velocity, 0.25);
  EXPECT_EQ(c.tokens.size(), 3u);
  EXPECT_TRUE(parse_candidate("self=").tokens.empty());
  EXPECT_THROW(parse_candidate("x=--bogus"), BadInput);
  EXPECT_THROW(parse_candidate("x=--moe-combine fp16"), BadInput);
  EXPECT_THROW(parse_candidate("x=--moe-combine"), BadInput);
  EXPECT_THROW(parse_candidate("x=--nvfp4-experts --nvfp4-experts"), BadInput);
  EXPECT_THROW(parse_candidate("x=--perturb-velocity nan"), BadInput);
  EXPECT_THROW(parse_candidate("no-equals"), BadInput);
  EXPECT_THROW(parse_candidate("a/b=--nvfp4-experts"), BadInput);
  try {
    parse_candidate("fp4=--nvfp4-expert");
    FAIL();
  } catch (const BadInput& e) {
    EXPECT_NE(std::string(e.what()).find("--candidate fp4: unknown option '--nvfp4-expert'"),
              std::string::npos)
        << e.what();
  }
}

TEST(ScoreCandidate, FindsCombinationsForTheQuadratureCheck) {
  const std::vector<Candidate> cs = {
      parse_candidate("floor=--moe-combine bf16"), parse_candidate("fp4=--nvfp4-experts"),
      parse_candidate("pert=--perturb-velocity 0.1"),
      parse_candidate("both=--perturb-velocity 0.1 --nvfp4-experts")};
  const auto combos = find_combinations(cs);
  ASSERT_EQ(combos.size(), 1u);
  EXPECT_EQ(combos[0].combined, 3u);
  EXPECT_EQ(combos[0].a, 1u);
  EXPECT_EQ(combos[0].b, 2u);
  EXPECT_EQ(floor_candidate(true, "fp32").knobs.moe_combine, ops::CombineSum::Bf16);
  EXPECT_EQ(floor_candidate(true, "bf16").knobs.moe_combine, ops::CombineSum::F32);
  EXPECT_TRUE(floor_candidate(false, "fp32").knobs.velocity_bf16);
}

TEST(ScoreMetrics, ErrorAndSnrFormulas) {
  const Tensor before = Tensor::from_floats({0, 0, 0, 0}, {4});
  const Tensor t = Tensor::from_floats({3, 0, 4, 0}, {4});  // update of norm 5
  const Tensor c = Tensor::from_floats({3, 1, 4, 0}, {4});  // 1 away
  EXPECT_DOUBLE_EQ(step_error(c, t, before), 0.2);
  EXPECT_DOUBLE_EQ(snr_db(c, t), 20.0 * std::log10(5.0));
  EXPECT_EQ(step_error(t, t, before), 0.0);
  EXPECT_TRUE(std::isinf(snr_db(t, t)));
  EXPECT_TRUE(std::isnan(step_error(c, t, t)));  // no update to measure against
  EXPECT_TRUE(std::isinf(mean_finite_or_inf({INFINITY, INFINITY})));
  EXPECT_DOUBLE_EQ(mean_finite_or_inf({1, NAN, 3}), 2.0);
}

// The fixture text states of each tiny model as a Prompt.
Prompt fixture_prompt(bool magi2) {
  const fs::path file =
      magi2 ? kGolden / "magi2-tiny/sampler.safetensors" : kGolden / "h3-tiny/inputs.safetensors";
  const TensorMap t = read_all(file);
  Prompt p;
  p.id = "p1";
  p.text = {t.at(magi2 ? "txt_feat" : "text_embeds"), file.string()};
  if (magi2) p.negative = {t.at("null_txt_feat"), file.string()};
  p.digest = states_digest({{"text", p.text.tensor}, {"negative", p.negative.tensor}});
  return p;
}

Sampling tiny_sampling(bool magi2, int steps) {
  Sampling s;
  s.steps = steps;
  s.seed = 3;
  s.video_shape = magi2 ? Shape{1, 48, 2, 4, 6} : Shape{1, 24, 2, 4, 6};
  s.audio_shape = magi2 ? Shape{1, 10, 64} : Shape{2, 32, 9};
  return s;
}

class ScoreExactness : public ::testing::TestWithParam<bool> {};

TEST_P(ScoreExactness, TeacherAsItsOwnCandidateIsExact) {
  const bool magi2 = GetParam();
  ops::CpuContext ctx;
  const Checkpoint ckpt = Checkpoint::open(kGolden / (magi2 ? "magi2-tiny" : "h3-tiny"));
  const Prompt p = fixture_prompt(magi2);
  const Sampling s = tiny_sampling(magi2, 4);
  const CandidateRunner runner(ctx, ckpt, magi2, Knobs{}, "fp32");
  const sample::Trajectory teacher = runner.run(p, s, nullptr).trajectory;
  const CandidateRunner again(ctx, ckpt, magi2, Knobs{}, "fp32");
  const StepSeries series = step_series(again.run(p, s, &teacher).trajectory, teacher);
  for (size_t m = 0; m < 2; ++m) {
    ASSERT_EQ(series.error[m].size(), 4u);
    for (size_t k = 0; k < 4; ++k) {
      EXPECT_EQ(series.error[m][k], 0.0) << m << " " << k;
      EXPECT_TRUE(std::isinf(series.snr[m][k]) && series.snr[m][k] > 0) << m << " " << k;
    }
  }
}

// H3's Euler update is (1 - r)(1 - t) v: a velocity off by eps |v| moves the latent by eps times
// the teacher's update at every step. MAGI-2's UniPC mixes steps (its corrector), except on a
// one-step run, whose only update is the last one: -sigma v.
TEST_P(ScoreExactness, PlantedPerturbationScoresItsSize) {
  const bool magi2 = GetParam();
  ops::CpuContext ctx;
  const Checkpoint ckpt = Checkpoint::open(kGolden / (magi2 ? "magi2-tiny" : "h3-tiny"));
  const Prompt p = fixture_prompt(magi2);
  const Sampling s = tiny_sampling(magi2, magi2 ? 1 : 6);
  const sample::Trajectory teacher =
      CandidateRunner(ctx, ckpt, magi2, Knobs{}, "fp32").run(p, s, nullptr).trajectory;
  for (const double eps : {0.01, 0.1, 0.5}) {
    Knobs k;
    k.perturb_velocity = eps;
    const StepSeries series = step_series(
        CandidateRunner(ctx, ckpt, magi2, k, "fp32").run(p, s, &teacher).trajectory, teacher);
    for (size_t m = 0; m < 2; ++m)
      for (const double e : series.error[m])
        EXPECT_NEAR(e, eps, 0.01 * eps) << "eps " << eps << " modality " << m;
  }
}

INSTANTIATE_TEST_SUITE_P(Families, ScoreExactness, ::testing::Values(false, true),
                         [](const auto& info) { return info.param ? "magi2" : "h3"; });

TEST(ScoreTeacherFile, RefusesAnotherRunByName) {
  const fs::path dir = fs::temp_directory_path() / fmt::format("avdit-score-test-{}", ::getpid());
  fs::create_directories(dir);
  Prompt p;
  p.digest = "abc";
  Sampling s = tiny_sampling(false, 2);
  const nlohmann::json key = teacher_key("model-a", "h3", p, s);
  sample::Trajectory t;
  t.modalities = {"video", "audio"};
  for (int k = 0; k <= 2; ++k)
    t.latents.push_back({randn(s.video_shape, k), randn(s.audio_shape, 10 + k)});
  const fs::path file = teacher_path(dir, key);
  write_teacher(file, key, t);
  EXPECT_EQ(read_teacher(file, key).steps(), 2);
  auto message = [&](const nlohmann::json& k) {
    try {
      read_teacher(file, k);
    } catch (const BadInput& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_NE(message(teacher_key("model-b", "h3", p, s)).find("model"), std::string::npos);
  Sampling s3 = s;
  s3.steps = 3;
  const std::string m3 = message(teacher_key("model-a", "h3", p, s3));
  EXPECT_NE(m3.find("steps 2 (this run: 3)"), std::string::npos) << m3;
  fs::remove_all(dir);
}

TEST(ScoreMediaMetrics, PsnrAndSsim) {
  const Tensor a = randn({3, 3, 20, 24}, 1, 0.3f);
  Tensor b = a.clone();
  EXPECT_TRUE(std::isinf(frame_psnr_db(a, b)));
  EXPECT_NEAR(ssim_luma(a, b), 1.0, 1e-12);
  // A uniform shift of 0.02 in [-1, 1] is 0.01 in [0, 1]: PSNR 40 dB where nothing clamps.
  const Tensor flat = Tensor::zeros({2, 3, 16, 16}, DType::F32);
  Tensor shifted = flat.clone();
  for (int64_t i = 0; i < shifted.numel(); ++i) shifted.f32()[i] = 0.02f;
  EXPECT_NEAR(frame_psnr_db(shifted, flat), 40.0, 1e-4);
  // SSIM against a direct 2-D Gaussian window sum at every valid position.
  for (int64_t i = 0; i < b.numel(); ++i) b.f32()[i] += 0.2f * std::sin(0.37f * i);
  const int64_t T = 3, H = 20, W = 24, n = 11;
  auto Y = [&](const Tensor& f, int64_t t, int64_t y, int64_t x) {
    auto u = [](float v) { return std::clamp((double(v) + 1) / 2, 0.0, 1.0); };
    const float* p = f.f32() + t * 3 * H * W + y * W + x;
    return 0.299 * u(p[0]) + 0.587 * u(p[H * W]) + 0.114 * u(p[2 * H * W]);
  };
  double want = 0;
  for (int64_t t = 0; t < T; ++t) {
    double sum = 0;
    for (int64_t y0 = 0; y0 + n <= H; ++y0)
      for (int64_t x0 = 0; x0 + n <= W; ++x0) {
        double wsum = 0, ma = 0, mb = 0, aa = 0, bb = 0, ab = 0;
        for (int64_t dy = 0; dy < n; ++dy)
          for (int64_t dx = 0; dx < n; ++dx) {
            const double w =
                std::exp(-((dy - 5) * (dy - 5) + (dx - 5) * (dx - 5)) / (2 * 1.5 * 1.5));
            const double va = Y(a, t, y0 + dy, x0 + dx), vb = Y(b, t, y0 + dy, x0 + dx);
            wsum += w, ma += w * va, mb += w * vb, aa += w * va * va, bb += w * vb * vb,
                ab += w * va * vb;
          }
        ma /= wsum, mb /= wsum, aa /= wsum, bb /= wsum, ab /= wsum;
        const double c1 = 1e-4, c2 = 9e-4;
        sum += (2 * ma * mb + c1) * (2 * (ab - ma * mb) + c2) /
               ((ma * ma + mb * mb + c1) * (aa - ma * ma + bb - mb * mb + c2));
      }
    want += sum / double((H - n + 1) * (W - n + 1));
  }
  EXPECT_NEAR(ssim_luma(b, a), want / T, 1e-9);
  EXPECT_LT(ssim_luma(b, a), 0.999);
}

TEST(ScoreMediaMetrics, LogMelAgainstADirectDft) {
  const double sr = 8000;
  const int64_t S = 700;
  std::vector<float> x(S);
  for (int64_t i = 0; i < S; ++i)
    x[i] =
        static_cast<float>(0.5 * std::sin(2 * M_PI * 440 * i / sr) + 0.01 * std::cos(0.3 * i * i));
  const int window = 64, mels = 10, hop = 16, bins = 33;
  const auto got = log_mel(x.data(), S, sr, window, mels);
  const auto fb = mel_filters(sr, window, mels, 0, sr / 2);
  const int64_t frames = 1 + S / hop;
  ASSERT_EQ(static_cast<int64_t>(got.size()), mels * frames);
  for (int64_t f = 0; f < frames; f += 7)
    for (int m = 0; m < mels; ++m) {
      double mel = 0;
      for (int k = 0; k < bins; ++k) {
        std::complex<double> X = 0;
        for (int i = 0; i < window; ++i) {
          int64_t j = f * hop - window / 2 + i;
          if (j < 0) j = -j;
          if (j >= S) j = 2 * (S - 1) - j;
          X += double(x[j]) * (0.5 - 0.5 * std::cos(2 * M_PI * i / window)) *
               std::polar(1.0, -2 * M_PI * k * i / window);
        }
        mel += fb[m * bins + k] * std::abs(X);
      }
      EXPECT_NEAR(got[m * frames + f], std::log10(std::max(mel, 1e-5)), 1e-9) << f << " " << m;
    }
  // Slaney filters: triangles of unit area in Hz (2 / width at the peak), non-negative.
  for (const double v : fb) EXPECT_GE(v, 0.0);
  const Tensor w = Tensor::from_data({1, S}, DType::F32, x.data());
  int used = 0;
  EXPECT_EQ(multiscale_log_mel_l1(w, w, sr, &used), 0.0);
  EXPECT_EQ(used, 6);  // the 2048 window does not fit 700 samples
}

}  // namespace
}  // namespace avdit::score
