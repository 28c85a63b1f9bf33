// The contact sheet (see contact_sheet.h).
#include "io/media/contact_sheet.h"

#include <algorithm>

#include "core/error.h"
#include "io/media/output_file.h"
#include "io/media/png_writer.h"
#include "io/media/rgb8.h"
#include "io/media/tensor_checks.h"

namespace avdit::media {

void write_contact_sheet(const std::filesystem::path& path, const std::vector<Tensor>& runs,
                         const std::vector<std::string>& labels) {
  AVDIT_REQUIRE(!runs.empty(), "{}: a contact sheet needs at least one run", path.string());
  AVDIT_REQUIRE(labels.empty() || labels.size() == runs.size(),
                "{}: {} labels for {} runs; give one label per run or none", path.string(),
                labels.size(), runs.size());
  int64_t cell_h = 0, cell_w = 0;
  for (size_t r = 0; r < runs.size(); ++r) {
    check_frames(runs[r], fmt::format("runs[{}]", r));
    cell_h = std::max(cell_h, runs[r].size(2));
    cell_w = std::max(cell_w, runs[r].size(3));
  }
  constexpr int64_t kColumns = std::size(kSheetPercents);
  const auto rows = static_cast<int64_t>(runs.size());
  const int64_t width = kColumns * cell_w + (kColumns - 1) * kSheetGap;
  const int64_t height = rows * cell_h + (rows - 1) * kSheetGap;
  AVDIT_REQUIRE(width <= (1 << 20) && height <= (1 << 20),
                "{}: a contact sheet of {}x{} pixels is too large; give fewer or smaller runs",
                path.string(), width, height);
  OutputFile out(path);  // before the work: an unwritable path fails at once
  const auto stride = static_cast<ptrdiff_t>(width * 3);
  std::vector<uint8_t> sheet(static_cast<size_t>(height * stride), kSheetGapValue);

  PngText text;
  text.emplace_back("Columns", "frames at 10%, 50% and 90% of each run (rows are runs)");
  for (int64_t r = 0; r < rows; ++r) {
    const Tensor& run = runs[static_cast<size_t>(r)];
    const int64_t count = run.size(0), h = run.size(2), w = run.size(3);
    std::string indices;
    for (int64_t c = 0; c < kColumns; ++c) {
      const int64_t t = frame_at_percent(count, kSheetPercents[c]);
      check_frame_values(run, t, fmt::format("runs[{}]", r));
      indices += fmt::format("{}{}", c ? ", " : "", t);
      uint8_t* cell =
          sheet.data() + r * (cell_h + kSheetGap) * stride + c * (cell_w + kSheetGap) * 3;
      for (int64_t y = 0; y < cell_h; ++y) std::fill_n(cell + y * stride, cell_w * 3, uint8_t{0});
      frame_to_rgb8(run.f32() + t * 3 * h * w, h, w, h, w, cell, stride);
    }
    const std::string label = labels.empty() ? "" : labels[static_cast<size_t>(r)] + " ";
    text.emplace_back(fmt::format("Row {}", r + 1),
                      fmt::format("{}(frames {} of {}, {}x{})", label, indices, count, w, h));
  }
  const auto png = encode_png(sheet.data(), width, height, text);
  out.write(png.data(), png.size());
  out.commit();
}

}  // namespace avdit::media
