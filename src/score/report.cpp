// The tables of `avdit score` (see report.h).
#include "score/report.h"

#include <cmath>
#include <limits>

#include <fmt/format.h>

namespace avdit::score {

using nlohmann::json;

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

double mean(const std::vector<double>& v) {
  double s = 0;
  int n = 0;
  for (const double x : v)
    if (!std::isnan(x)) s += x, ++n;
  return n ? s / n : kNaN;
}

double ratio(double a, double b) { return b > 0 && std::isfinite(b) ? a / b : kNaN; }

// Latent relative error from an SNR in dB (0 for +inf).
double rel_from_snr(double db) {
  return std::isinf(db) && db > 0 ? 0.0 : std::pow(10.0, -db / 20.0);
}

std::string csv_field(const std::string& s) {
  std::string out = "\"";
  for (const char c : s) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

std::string md_cell(const std::string& s) {
  std::string out;
  for (const char c : s) out += c == '|' ? std::string("\\|") : std::string(1, c);
  return out.empty() ? "(teacher's)" : out;
}

}  // namespace

std::string num(double v) {
  if (std::isnan(v)) return "-";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  if (v == 0) return "0";
  const double a = std::fabs(v);
  return a >= 0.01 && a < 1000 ? fmt::format("{:.3g}", v) : fmt::format("{:.2e}", v);
}

json json_num(double v) {
  if (std::isnan(v)) return nullptr;
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  return v;
}

std::array<std::vector<double>, 2> mean_error_by_step(const TeacherScores& s) {
  std::array<std::vector<double>, 2> out;
  if (s.prompts.empty()) return out;
  for (size_t m = 0; m < 2; ++m)
    for (size_t k = 0; k < s.prompts[0].error[m].size(); ++k) {
      std::vector<double> v;
      for (const StepSeries& p : s.prompts) v.push_back(p.error[m][k]);
      out[m].push_back(mean(v));
    }
  return out;
}

std::vector<TeacherRow> summarize(const std::vector<TeacherScores>& scores,
                                  std::optional<size_t> floor) {
  std::vector<TeacherRow> rows;
  for (const TeacherScores& s : scores) {
    TeacherRow r{s.candidate.name, s.candidate.options, {}};
    for (size_t m = 0; m < 2; ++m) {
      ModalityRow& mr = r.m[m];
      std::vector<double> per_prompt, snr;
      for (const StepSeries& p : s.prompts) {
        per_prompt.push_back(mean(p.error[m]));
        for (const double x : p.snr[m]) {
          snr.push_back(x);
          ++mr.steps;
          mr.exact_steps += std::isinf(x) && x > 0;
        }
      }
      mr.error = mean(per_prompt);
      mr.error_min = per_prompt.empty() ? kNaN : per_prompt.front();
      mr.error_max = mr.error_min;
      for (const double x : per_prompt)
        mr.error_min = std::min(mr.error_min, x), mr.error_max = std::max(mr.error_max, x);
      mr.snr_db = mean_finite_or_inf(snr);
    }
    rows.push_back(r);
  }
  for (TeacherRow& r : rows)
    for (size_t m = 0; m < 2; ++m)
      r.m[m].ratio_to_floor = floor ? ratio(r.m[m].error, rows[*floor].m[m].error) : kNaN;
  return rows;
}

std::vector<Quadrature> quadrature(const std::vector<TeacherRow>& rows,
                                   const std::vector<Combination>& combos) {
  std::vector<Quadrature> out;
  for (const Combination& c : combos) {
    Quadrature q{rows[c.combined].name, rows[c.a].name, rows[c.b].name, {}, {}};
    for (size_t m = 0; m < 2; ++m) {
      q.measured[m] = rows[c.combined].m[m].error;
      q.predicted[m] = std::hypot(rows[c.a].m[m].error, rows[c.b].m[m].error);
    }
    out.push_back(q);
  }
  return out;
}

std::string teacher_markdown(const std::vector<TeacherRow>& rows,
                             const std::vector<Quadrature>& q) {
  std::string s =
      "| candidate | options | video error/update | audio error/update | video SNR dB | audio SNR "
      "dB | "
      "video spread (prompts) | audio spread (prompts) | video x floor | audio x floor |\n"
      "| --- | --- | ---: | ---: | ---: | ---: | --- | --- | ---: | ---: |\n";
  for (const TeacherRow& r : rows)
    s += fmt::format("| {} | {} | {} | {} | {} | {} | {} - {} | {} - {} | {} | {} |\n", r.name,
                     md_cell(r.options), num(r.m[0].error), num(r.m[1].error), num(r.m[0].snr_db),
                     num(r.m[1].snr_db), num(r.m[0].error_min), num(r.m[0].error_max),
                     num(r.m[1].error_min), num(r.m[1].error_max), num(r.m[0].ratio_to_floor),
                     num(r.m[1].ratio_to_floor));
  for (const Quadrature& x : q)
    s += fmt::format(
        "\nquadrature: {} = {} (video), {} (audio); sqrt({}^2 + {}^2) = {} (video), {} (audio)\n",
        x.combined, num(x.measured[0]), num(x.measured[1]), x.a, x.b, num(x.predicted[0]),
        num(x.predicted[1]));
  return s;
}

std::string teacher_csv(const std::vector<TeacherRow>& rows) {
  std::string s = "candidate,options";
  for (const char* m : kModalities)
    s += fmt::format(
        ",{0}_error,{0}_error_min,{0}_error_max,{0}_snr_db,{0}_exact_steps,{0}_steps,{0}_ratio_to_"
        "floor",
        m);
  s += "\n";
  for (const TeacherRow& r : rows) {
    s += csv_field(r.name) + "," + csv_field(r.options);
    for (const ModalityRow& m : r.m)
      s += fmt::format(",{},{},{},{},{},{},{}", num(m.error), num(m.error_min), num(m.error_max),
                       num(m.snr_db), m.exact_steps, m.steps, num(m.ratio_to_floor));
    s += "\n";
  }
  return s;
}

json teacher_json(const std::vector<TeacherRow>& rows, const std::vector<TeacherScores>& scores,
                  const std::vector<Quadrature>& q) {
  json cands = json::array();
  for (size_t i = 0; i < rows.size(); ++i) {
    const TeacherRow& r = rows[i];
    json c{{"name", r.name}, {"options", r.options}};
    for (size_t m = 0; m < 2; ++m) {
      const ModalityRow& x = r.m[m];
      json per_prompt = json::array();
      for (const StepSeries& p : scores[i].prompts) {
        json err = json::array(), snr = json::array();
        for (const double v : p.error[m]) err.push_back(json_num(v));
        for (const double v : p.snr[m]) snr.push_back(json_num(v));
        per_prompt.push_back({{"error_by_step", err}, {"snr_db_by_step", snr}});
      }
      c[kModalities[m]] = {{"error", json_num(x.error)},
                           {"error_min", json_num(x.error_min)},
                           {"error_max", json_num(x.error_max)},
                           {"snr_db", json_num(x.snr_db)},
                           {"exact_steps", x.exact_steps},
                           {"steps", x.steps},
                           {"ratio_to_floor", json_num(x.ratio_to_floor)},
                           {"prompts", per_prompt}};
    }
    cands.push_back(c);
  }
  json quad = json::array();
  for (const Quadrature& x : q)
    quad.push_back(
        {{"combined", x.combined},
         {"a", x.a},
         {"b", x.b},
         {"measured", {{"video", json_num(x.measured[0])}, {"audio", json_num(x.measured[1])}}},
         {"predicted",
          {{"video", json_num(x.predicted[0])}, {"audio", json_num(x.predicted[1])}}}});
  return json{{"metric",
               "error[k] = |c[k] - t[k]| / |t[k] - t[k-1]| (L2 over each modality's latent), c[k] "
               "the candidate's step from the teacher's t[k-1]; SNR = 10 log10(|t[k]|^2 / |c[k] - "
               "t[k]|^2)"},
              {"candidates", cands},
              {"quadrature", quad}};
}

std::vector<E2eRow> summarize(const std::vector<E2eScores>& scores, std::optional<size_t> floor) {
  std::vector<E2eRow> rows;
  for (const E2eScores& s : scores) {
    E2eRow r;
    r.name = s.candidate.name;
    r.options = s.candidate.options;
    std::vector<double> psnr, ssim, mel, snr[2];
    for (const E2ePrompt& p : s.prompts) {
      psnr.push_back(p.psnr);
      ssim.push_back(p.ssim);
      mel.push_back(p.mel_l1);
      for (size_t m = 0; m < 2; ++m) snr[m].push_back(p.final_snr[m]);
    }
    r.psnr = mean_finite_or_inf(psnr);
    r.ssim = mean(ssim);
    r.mel_l1 = mean(mel);
    for (size_t m = 0; m < 2; ++m) r.final_snr[m] = mean_finite_or_inf(snr[m]);
    rows.push_back(r);
  }
  for (E2eRow& r : rows) {
    r.mel_ratio_to_floor = floor ? ratio(r.mel_l1, rows[*floor].mel_l1) : kNaN;
    for (size_t m = 0; m < 2; ++m)
      r.latent_ratio_to_floor[m] =
          floor ? ratio(rel_from_snr(r.final_snr[m]), rel_from_snr(rows[*floor].final_snr[m]))
                : kNaN;
  }
  return rows;
}

std::string e2e_markdown(const std::vector<E2eRow>& rows, bool decoded) {
  std::string s =
      "| candidate | options | final video SNR dB | final audio SNR dB | video latent x floor | "
      "audio latent x floor |";
  std::string sep = "| --- | --- | ---: | ---: | ---: | ---: |";
  if (decoded) {
    s += " frame PSNR dB | SSIM (luma) | log-mel L1 | log-mel x floor |";
    sep += " ---: | ---: | ---: | ---: |";
  }
  s += "\n" + sep + "\n";
  for (const E2eRow& r : rows) {
    s += fmt::format("| {} | {} | {} | {} | {} | {} |", r.name, md_cell(r.options),
                     num(r.final_snr[0]), num(r.final_snr[1]), num(r.latent_ratio_to_floor[0]),
                     num(r.latent_ratio_to_floor[1]));
    if (decoded)
      s += fmt::format(" {} | {} | {} | {} |", num(r.psnr), fmt::format("{:.4f}", r.ssim),
                       num(r.mel_l1), num(r.mel_ratio_to_floor));
    s += "\n";
  }
  return s;
}

std::string e2e_csv(const std::vector<E2eRow>& rows) {
  std::string s =
      "candidate,options,final_video_snr_db,final_audio_snr_db,video_latent_ratio_to_floor,"
      "audio_latent_ratio_to_floor,frame_psnr_db,ssim_luma,log_mel_l1,log_mel_ratio_to_floor\n";
  for (const E2eRow& r : rows)
    s += fmt::format("{},{},{},{},{},{},{},{},{},{}\n", csv_field(r.name), csv_field(r.options),
                     num(r.final_snr[0]), num(r.final_snr[1]), num(r.latent_ratio_to_floor[0]),
                     num(r.latent_ratio_to_floor[1]), num(r.psnr),
                     std::isnan(r.ssim) ? std::string("-") : fmt::format("{:.6f}", r.ssim),
                     num(r.mel_l1), num(r.mel_ratio_to_floor));
  return s;
}

json e2e_json(const std::vector<E2eRow>& rows, const std::vector<E2eScores>& scores) {
  json cands = json::array();
  for (size_t i = 0; i < rows.size(); ++i) {
    const E2eRow& r = rows[i];
    json prompts = json::array();
    for (const E2ePrompt& p : scores[i].prompts) {
      json snr;
      for (size_t m = 0; m < 2; ++m) {
        json v = json::array();
        for (const double x : p.snr_by_step[m]) v.push_back(json_num(x));
        snr[kModalities[m]] = v;
      }
      prompts.push_back(
          {{"snr_db_by_step", snr},
           {"final_snr_db",
            {{"video", json_num(p.final_snr[0])}, {"audio", json_num(p.final_snr[1])}}},
           {"frame_psnr_db", json_num(p.psnr)},
           {"ssim_luma", json_num(p.ssim)},
           {"log_mel_l1", json_num(p.mel_l1)}});
    }
    cands.push_back({{"name", r.name},
                     {"options", r.options},
                     {"final_snr_db",
                      {{"video", json_num(r.final_snr[0])}, {"audio", json_num(r.final_snr[1])}}},
                     {"latent_ratio_to_floor",
                      {{"video", json_num(r.latent_ratio_to_floor[0])},
                       {"audio", json_num(r.latent_ratio_to_floor[1])}}},
                     {"frame_psnr_db", json_num(r.psnr)},
                     {"ssim_luma", json_num(r.ssim)},
                     {"log_mel_l1", json_num(r.mel_l1)},
                     {"log_mel_ratio_to_floor", json_num(r.mel_ratio_to_floor)},
                     {"prompts", prompts}});
  }
  return json{{"candidates", cands}};
}

}  // namespace avdit::score
