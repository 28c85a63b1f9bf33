// The MiniMax-H3 release's supported canvases (its six aspect ratios at a 768 short edge through
// the reference's canvas rule) and `avdit generate`'s warning for a legal canvas it does not name.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <string>
#include <tuple>
#include <vector>

#include "pipeline/h3_canvas.h"

namespace avdit::pipeline {
namespace {

TEST(H3Canvas, TheReleasesCanvases) {
  std::vector<std::tuple<std::string, int64_t, int64_t>> got;
  for (const H3Canvas& c : h3_supported_canvases()) got.emplace_back(c.aspect, c.height, c.width);
  // 21:9 is over the 768 x 1344 area cap: scaled to 665 x 1552, rounded to 672 x 1536.
  const std::vector<std::tuple<std::string, int64_t, int64_t>> expected = {
      {"21:9", 672, 1536}, {"16:9", 768, 1344}, {"4:3", 768, 1024},
      {"1:1", 768, 768},   {"3:4", 1024, 768},  {"9:16", 1344, 768}};
  EXPECT_EQ(got, expected);
  for (const H3Canvas& c : h3_supported_canvases())
    EXPECT_EQ(h3_canvas_warning(124, c.height, c.width), std::nullopt) << c.aspect;
}

TEST(H3Canvas, ALegalUnlistedCanvasNamesTheNearest) {
  // generate's default length (5 s: 124 frames) at a canvas of multiples of 32 that the release
  // does not name: the nearest by aspect ratio, then area.
  const auto w = h3_canvas_warning(124, 480, 832);
  ASSERT_TRUE(w.has_value());
  EXPECT_NE(w->find("480x832 (height x width) is not a canvas the MiniMax-H3 release supports"),
            std::string::npos)
      << *w;
  EXPECT_NE(w->find("the nearest is 768x1344 (16:9)"), std::string::npos) << *w;
  EXPECT_EQ(w->find('\n'), std::string::npos) << *w;
  EXPECT_EQ(w->find("frames"), std::string::npos) << *w;
  // The seed's small canvas, 60 tokens per latent frame (6 x 10 tokens of 32 pixels).
  EXPECT_NE(h3_canvas_warning(124, 192, 320)->find("nearest is 768x1344 (16:9)"),
            std::string::npos);
  EXPECT_NE(h3_canvas_warning(124, 1024, 1024)->find("nearest is 768x768 (1:1)"),
            std::string::npos);
  EXPECT_NE(h3_canvas_warning(124, 1536, 672)->find("nearest is 1344x768 (9:16)"),
            std::string::npos);
  EXPECT_NE(h3_canvas_warning(124, 640, 1536)->find("nearest is 672x1536 (21:9)"),
            std::string::npos);
}

TEST(H3Canvas, LengthOutsideFourToFifteenSeconds) {
  EXPECT_EQ(h3_canvas_warning(kH3MinFrames, 768, 1344), std::nullopt);
  EXPECT_EQ(h3_canvas_warning(kH3MaxFrames, 768, 1344), std::nullopt);
  for (const int64_t frames : {22, 90, 123, 379}) {
    const auto w = h3_canvas_warning(frames, 768, 1344);
    ASSERT_TRUE(w.has_value()) << frames;
    EXPECT_NE(w->find(fmt::format("{} frames", frames)), std::string::npos) << *w;
    EXPECT_NE(w->find("107 to 362 frames on the 17n + 5 grid"), std::string::npos) << *w;
    EXPECT_EQ(w->find("canvas"), std::string::npos) << *w;
  }
  // Both at once: one line.
  const auto w = h3_canvas_warning(22, 64, 96);
  ASSERT_TRUE(w.has_value());
  EXPECT_NE(w->find("64x96"), std::string::npos);
  EXPECT_NE(w->find("22 frames (0.92 s at 24 fps)"), std::string::npos) << *w;
  EXPECT_EQ(w->find('\n'), std::string::npos);
}

}  // namespace
}  // namespace avdit::pipeline
