// The tables of `avdit score`: per candidate, the teacher-forced error per update and the post-step
// latent SNR by modality (averaged over steps, then prompts; the spread of the per-prompt means;
// the ratio to the floor candidate), the quadrature check of combined candidates, and the
// end-to-end figures; as markdown, CSV and JSON.
#pragma once

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <vector>

#include "score/candidate.h"
#include "score/metrics.h"

namespace avdit::score {

inline constexpr const char* kModalities[2] = {"video", "audio"};

// "1.23e-02"-style numbers with 3 significant digits; "inf", "-inf", and "-" for NaN.
std::string num(double v);
// JSON numbers, with the strings "inf" / "-inf" where JSON has none and null for NaN.
nlohmann::json json_num(double v);

// ---- teacher-forced
// ------------------------------------------------------------------------------

struct TeacherScores {
  Candidate candidate;
  std::vector<StepSeries> prompts;  // one per prompt, in the prompts' order
};

struct ModalityRow {
  double error = 0;                     // mean over steps, then over prompts
  double error_min = 0, error_max = 0;  // the per-prompt means' range (the spread over prompts)
  double snr_db = 0;               // mean over steps and prompts of the finite values; +inf if none
  int exact_steps = 0, steps = 0;  // steps whose latents equal the teacher's bit for bit
  double ratio_to_floor = 0;       // error / the floor's error (NaN without a floor)
};

struct TeacherRow {
  std::string name, options;
  ModalityRow m[2];
};

// The error by step averaged over prompts, per modality (the plot's series).
std::array<std::vector<double>, 2> mean_error_by_step(const TeacherScores& s);

std::vector<TeacherRow> summarize(const std::vector<TeacherScores>& scores,
                                  std::optional<size_t> floor);

// Quadrature lines: per combination, measured vs sqrt(a^2 + b^2) per modality.
struct Quadrature {
  std::string combined, a, b;
  double measured[2], predicted[2];
};
std::vector<Quadrature> quadrature(const std::vector<TeacherRow>& rows,
                                   const std::vector<Combination>& combos);

std::string teacher_markdown(const std::vector<TeacherRow>& rows, const std::vector<Quadrature>& q);
std::string teacher_csv(const std::vector<TeacherRow>& rows);
nlohmann::json teacher_json(const std::vector<TeacherRow>& rows,
                            const std::vector<TeacherScores>& scores,
                            const std::vector<Quadrature>& q);

// ---- end to end
// ----------------------------------------------------------------------------------

struct E2ePrompt {
  std::array<std::vector<double>, 2> snr_by_step;  // latent SNR after each step vs the reference
  double final_snr[2] = {0, 0};                    // of the final latents
  // Decoded (pipeline folders): frame PSNR and SSIM (luma) averaged over frames, multi-scale
  // log-mel L1 of the waveform; NaN when not decoded.
  double psnr = 0, ssim = 0, mel_l1 = 0;
};

struct E2eScores {
  Candidate candidate;
  std::vector<E2ePrompt> prompts;
};

struct E2eRow {
  std::string name, options;
  double final_snr[2] = {0, 0};
  double psnr = 0, ssim = 0, mel_l1 = 0;
  double mel_ratio_to_floor = 0, latent_ratio_to_floor[2] = {0, 0};  // NaN without a floor
};

std::vector<E2eRow> summarize(const std::vector<E2eScores>& scores, std::optional<size_t> floor);
std::string e2e_markdown(const std::vector<E2eRow>& rows, bool decoded);
std::string e2e_csv(const std::vector<E2eRow>& rows);
nlohmann::json e2e_json(const std::vector<E2eRow>& rows, const std::vector<E2eScores>& scores);

}  // namespace avdit::score
