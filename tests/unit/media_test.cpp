// The media writers' building blocks against float64 references (the pixel mapping, frame rates,
// audio lengths, contact-sheet positions), the temporary-then-rename outputs, and PNG / WAV read
// back in process with libpng and libsndfile. tests/cli/media_cli.sh checks the files with
// ffprobe, ffmpeg and Python.
#include <gtest/gtest.h>
#include <png.h>
#include <sndfile.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>

#include "core/error.h"
#include "io/media/contact_sheet.h"
#include "io/media/frame_rate.h"
#include "io/media/mp4_writer.h"
#include "io/media/output_file.h"
#include "io/media/png_writer.h"
#include "io/media/rgb8.h"
#include "io/media/wav_writer.h"

namespace avdit::media {
namespace {

namespace fs = std::filesystem;

class MediaTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           fmt::format("avdit_media_{}_{}", ::getpid(),
                       ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::vector<std::string> listing(const fs::path& d) const {
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(d)) names.push_back(e.path().filename().string());
    std::sort(names.begin(), names.end());
    return names;
  }
  fs::path dir_;
};

Tensor random_frames(int64_t t, int64_t h, int64_t w, uint32_t seed) {
  Tensor f = Tensor::empty({t, 3, h, w}, DType::F32);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.2f, 1.2f);  // some values beyond [-1, 1]
  for (int64_t i = 0; i < f.numel(); ++i) f.f32()[i] = u(rng);
  return f;
}

// The float64 form of the mapping: round(clamp((x + 1) / 2, 0, 1) * 255).
double u8_reference(double x) { return std::clamp((x + 1) / 2, 0.0, 1.0) * 255; }

TEST(MediaRgb8, MatchesTheFloat64MappingAndTheFixedPoints) {
  EXPECT_EQ(to_u8(-1.0f), 0);
  EXPECT_EQ(to_u8(1.0f), 255);
  EXPECT_EQ(to_u8(0.0f), 128);  // 127.5 rounds half to even, as numpy's rint does
  EXPECT_EQ(to_u8(-7.0f), 0);
  EXPECT_EQ(to_u8(3.5f), 255);
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-1.1f, 1.1f);
  int ties = 0;
  for (int i = 0; i < 200000; ++i) {
    const float x = u(rng);
    const double ref = u8_reference(x);
    const double frac = ref - std::floor(ref);
    if (std::abs(frac - 0.5) < 1e-4) {  // float32 rounding may fall either side of a tie
      EXPECT_NEAR(to_u8(x), ref, 0.5 + 1e-4) << x;
      ++ties;
      continue;
    }
    EXPECT_EQ(to_u8(x), std::lround(ref)) << x;
  }
  EXPECT_LT(ties, 200);
}

TEST(MediaRgb8, PadsByRepeatingTheLastColumnAndRow) {
  const Tensor f = random_frames(1, 3, 5, 11);  // [1, 3, 3, 5] -> 6 x 4
  std::vector<uint8_t> rgb(6 * 4 * 3);
  frame_to_rgb8(f.f32(), 3, 5, 4, 6, rgb.data(), 6 * 3);
  for (int y = 0; y < 4; ++y)
    for (int x = 0; x < 6; ++x)
      for (int c = 0; c < 3; ++c) {
        const int sy = std::min(y, 2), sx = std::min(x, 4);
        EXPECT_EQ(rgb[(y * 6 + x) * 3 + c], to_u8(f.f32()[(c * 3 + sy) * 5 + sx]))
            << y << "," << x << "," << c;
      }
}

TEST(MediaFrameRate, ParsesIntegersFractionsAndNtscDecimals) {
  auto eq = [](std::string_view s, int num, int den) {
    const FrameRate r = parse_frame_rate(s);
    EXPECT_EQ(r.num, num) << s;
    EXPECT_EQ(r.den, den) << s;
  };
  eq("24", 24, 1);
  eq("25", 25, 1);
  eq("30000/1001", 30000, 1001);
  eq("60/2", 30, 1);
  eq("29.97", 30000, 1001);
  eq("23.976", 24000, 1001);
  eq("59.94", 60000, 1001);
  eq("12.5", 25, 2);
  eq("25.0", 25, 1);
  EXPECT_EQ(parse_frame_rate("30000/1001").str(), "30000/1001");
  EXPECT_EQ(parse_frame_rate("24").str(), "24");
  for (const char* bad : {"0", "-24", "abc", "24fps", "1/0", "2000", "24/", "/2", "1.2345", ""})
    EXPECT_THROW(parse_frame_rate(bad), BadInput) << bad;
}

TEST(MediaFrameRate, AudioLengthIsTheVideoDurationToTheNearestSample) {
  const FrameRate ntsc{30000, 1001}, film{24, 1};
  for (int64_t frames : {1, 24, 30, 121, 241, 1000003})
    for (int rate : {8000, 16000, 32000, 44100, 48000, 96000})
      for (const FrameRate fps : {ntsc, film}) {
        const double exact = static_cast<double>(frames) * fps.den / fps.num * rate;
        EXPECT_EQ(samples_for_frames(frames, fps, rate), std::llround(exact))
            << frames << " frames at " << fps.str() << ", " << rate << " Hz";
      }
  EXPECT_EQ(samples_for_frames(30, ntsc, 44100), 44144);  // 44144.1
}

TEST(MediaContactSheet, PicksTheFramesAtTenFiftyAndNinetyPercent) {
  EXPECT_EQ(frame_at_percent(1, 10), 0);
  EXPECT_EQ(frame_at_percent(1, 90), 0);
  EXPECT_EQ(frame_at_percent(10, 10), 1);
  EXPECT_EQ(frame_at_percent(10, 50), 5);
  EXPECT_EQ(frame_at_percent(10, 90), 9);
  EXPECT_EQ(frame_at_percent(121, 90), 108);
  for (int64_t n = 1; n < 300; ++n)
    for (int p : kSheetPercents) {
      const int64_t i = frame_at_percent(n, p);
      EXPECT_GE(i, 0);
      EXPECT_LT(i, n);
      EXPECT_LE(std::abs(static_cast<double>(i) - n * p / 100.0), 1.0);
    }
}

TEST_F(MediaTest, OutputFileAppearsOnlyOnCommit) {
  const fs::path path = dir_ / "a.bin";
  {
    OutputFile out(path);
    out.write("hello", 5);
    EXPECT_FALSE(fs::exists(path));
    EXPECT_EQ(listing(dir_).size(), 1u);  // the temporary, beside the destination
    out.commit();
  }
  std::ifstream in(path);
  std::string text;
  in >> text;
  EXPECT_EQ(text, "hello");
  EXPECT_EQ(listing(dir_), std::vector<std::string>{"a.bin"});
  {
    OutputFile abandoned(dir_ / "b.bin");
    abandoned.write("x", 1);
  }  // no commit: as after an exception
  EXPECT_EQ(listing(dir_), std::vector<std::string>{"a.bin"});
  EXPECT_THROW(OutputFile(dir_ / "missing" / "c.bin"), BadInput);
  EXPECT_THROW(OutputFile{dir_}, BadInput);
  EXPECT_THROW(OutputFile(dir_ / "a.bin" / "d.bin"), BadInput);
}

TEST_F(MediaTest, OutputDirRefusesANonEmptyFolderAndReplacesAnEmptyOne) {
  fs::create_directories(dir_ / "full");
  std::ofstream(dir_ / "full" / "old.png") << "x";
  EXPECT_THROW(OutputDir(dir_ / "full"), BadInput);
  fs::create_directories(dir_ / "empty");
  const Tensor f = random_frames(3, 4, 6, 3);
  write_png_frames(dir_ / "empty/", f);
  EXPECT_EQ(listing(dir_ / "empty"),
            (std::vector<std::string>{"frame_00000.png", "frame_00001.png", "frame_00002.png"}));
  { OutputDir abandoned(dir_ / "new"); }
  EXPECT_EQ(listing(dir_), (std::vector<std::string>{"empty", "full"}));
}

// libpng's simplified reader: the file's pixels as RGB8.
std::vector<uint8_t> read_png(const fs::path& path, int64_t& w, int64_t& h) {
  png_image image{};
  image.version = PNG_IMAGE_VERSION;
  EXPECT_TRUE(png_image_begin_read_from_file(&image, path.c_str())) << image.message;
  image.format = PNG_FORMAT_RGB;
  std::vector<uint8_t> px(PNG_IMAGE_SIZE(image));
  EXPECT_TRUE(png_image_finish_read(&image, nullptr, px.data(), 0, nullptr)) << image.message;
  w = image.width;
  h = image.height;
  return px;
}

TEST_F(MediaTest, PngReadsBackExactlyWithLibpng) {
  const Tensor f = random_frames(1, 7, 9, 5).select(0);
  write_png(dir_ / "f.png", f);
  int64_t w = 0, h = 0;
  const auto px = read_png(dir_ / "f.png", w, h);
  ASSERT_EQ(w, 9);
  ASSERT_EQ(h, 7);
  for (int64_t y = 0; y < h; ++y)
    for (int64_t x = 0; x < w; ++x)
      for (int c = 0; c < 3; ++c)
        ASSERT_EQ(px[(y * w + x) * 3 + c], to_u8(f.f32()[(c * h + y) * w + x]));
}

TEST_F(MediaTest, ContactSheetHasOneRowPerRunAndGreySeparators) {
  const Tensor a = random_frames(10, 6, 8, 1), b = random_frames(4, 5, 7, 2);
  write_contact_sheet(dir_ / "s.png", {a, b}, {"a", "b"});
  int64_t w = 0, h = 0;
  const auto px = read_png(dir_ / "s.png", w, h);
  ASSERT_EQ(w, 3 * 8 + 2 * kSheetGap);
  ASSERT_EQ(h, 2 * 6 + kSheetGap);
  auto at = [&](int64_t y, int64_t x, int c) { return px[(y * w + x) * 3 + c]; };
  // Row 1, column 3: run b's frame 3 (90 % of 4), at the cell's top left; black beyond it.
  const int64_t y0 = 6 + kSheetGap, x0 = 2 * (8 + kSheetGap);
  for (int c = 0; c < 3; ++c) {
    EXPECT_EQ(at(y0 + 4, x0 + 6, c), to_u8(b.f32()[((3 * 3 + c) * 5 + 4) * 7 + 6]));
    EXPECT_EQ(at(y0 + 5, x0, c), 0);
    EXPECT_EQ(at(y0, x0 + 7, c), 0);
    EXPECT_EQ(at(6, 3, c), kSheetGapValue);                       // the horizontal separator
    EXPECT_EQ(at(2, 8, c), kSheetGapValue);                       // a vertical one
    EXPECT_EQ(at(0, 0, c), to_u8(a.f32()[(1 * 3 + c) * 6 * 8]));  // run a's frame 1 (10 % of 10)
  }
}

TEST_F(MediaTest, WavReadsBackWithLibsndfile) {
  Tensor audio = Tensor::empty({2, 1000}, DType::F32);
  std::mt19937 rng(9);
  std::uniform_real_distribution<float> u(-1.5f, 1.5f);
  for (int64_t i = 0; i < audio.numel(); ++i) audio.f32()[i] = u(rng);
  write_wav(dir_ / "f.wav", audio, 44100, WavFormat::Float32);
  write_wav(dir_ / "s.wav", audio, 44100, WavFormat::Pcm16);
  for (const char* name : {"f.wav", "s.wav"}) {
    SF_INFO info{};
    SNDFILE* sf = sf_open((dir_ / name).c_str(), SFM_READ, &info);
    ASSERT_NE(sf, nullptr) << sf_strerror(nullptr);
    EXPECT_EQ(info.channels, 2);
    EXPECT_EQ(info.samplerate, 44100);
    ASSERT_EQ(info.frames, 1000);
    std::vector<float> got(2000);
    sf_command(sf, SFC_SET_NORM_FLOAT, nullptr, SF_FALSE);  // PCM as raw integers
    ASSERT_EQ(sf_readf_float(sf, got.data(), 1000), 1000);
    sf_close(sf);
    for (int64_t i = 0; i < 1000; ++i)
      for (int c = 0; c < 2; ++c) {
        const float x = audio.f32()[c * 1000 + i];
        if (std::strcmp(name, "f.wav") == 0)
          ASSERT_EQ(std::memcmp(&got[i * 2 + c], &x, 4), 0) << i;  // bit-exact, beyond ±1 too
        else
          // Rounded to the nearest step: 0.5 LSB, plus float32's error in x * 32767.
          ASSERT_LE(std::abs(got[i * 2 + c] - std::clamp<double>(x, -1, 1) * 32767), 0.51) << i;
      }
  }
}

TEST_F(MediaTest, BadTensorsAreRefusedBeforeAnyFileExists) {
  Tensor frames = random_frames(3, 4, 4, 4);
  frames.f32()[1 * 48 + 2 * 16 + 5] = std::numeric_limits<float>::infinity();
  try {
    write_mp4(dir_ / "x.mp4", frames, FrameRate{24, 1});
    FAIL() << "no exception";
  } catch (const BadInput& e) {
    EXPECT_NE(std::string(e.what()).find("tensor 'frames' [3, 3, 4, 4] holds a non-finite value "
                                         "(inf) at frame 1, channel 2, y 1, x 1"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(write_mp4(dir_ / "x.mp4", random_frames(2, 4, 4, 1).to(DType::BF16), {24, 1}),
               BadInput);
  EXPECT_THROW(write_mp4(dir_ / "x.mp4", random_frames(2, 4, 4, 1), {0, 1}), BadInput);
  EXPECT_THROW(write_mp4(dir_ / "x.mp4", random_frames(2, 4, 4, 1), {24, 1},
                         Tensor::zeros({1, 2, 100}, DType::F32), 48000),
               BadInput);
  EXPECT_THROW(write_wav(dir_ / "x.wav", Tensor::zeros({2, 10}, DType::F32), 0), BadInput);
  EXPECT_THROW(write_contact_sheet(dir_ / "x.png", {}), BadInput);
  EXPECT_TRUE(listing(dir_).empty());
}

}  // namespace
}  // namespace avdit::media
