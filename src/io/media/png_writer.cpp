// PNG output through libpng (see png_writer.h). libpng reports errors by longjmp, so the encoder
// keeps every libpng call inside one function whose frame holds no C++ object with a destructor.
#include "io/media/png_writer.h"

#include <png.h>

#include <csetjmp>
#include <cstring>

#include "core/error.h"
#include "io/media/output_file.h"
#include "io/media/rgb8.h"
#include "io/media/tensor_checks.h"

namespace avdit::media {

namespace {

constexpr int64_t kMaxSide = 1 << 20;  // far beyond any clip; keeps row sizes inside png_uint_32

struct PngSink {
  std::vector<uint8_t>* out;
  bool out_of_memory;
  char error[256];
};

void on_png_error(png_structp png, png_const_charp message) {
  auto* sink = static_cast<PngSink*>(png_get_error_ptr(png));
  std::snprintf(sink->error, sizeof sink->error, "%s", message);
  png_longjmp(png, 1);
}

void on_png_warning(png_structp, png_const_charp) {}  // warnings are not errors for a writer

void on_png_write(png_structp png, png_bytep data, size_t n) {
  auto* sink = static_cast<PngSink*>(png_get_io_ptr(png));
  try {
    sink->out->insert(sink->out->end(), data, data + n);
  } catch (...) {
    sink->out_of_memory = true;
  }
  if (sink->out_of_memory) png_error(png, "out of memory");  // outside the catch: it longjmps
}

void on_png_flush(png_structp) {}

// Returns false with sink->error set when libpng failed.
bool encode_png_raw(png_structp png, png_infop info, const uint8_t* rgb, png_uint_32 width,
                    png_uint_32 height, png_textp text, int text_count, PngSink* sink) {
  if (setjmp(png_jmpbuf(png))) return false;
  png_set_write_fn(png, sink, on_png_write, on_png_flush);
  png_set_IHDR(png, info, width, height, 8, PNG_COLOR_TYPE_RGB, PNG_INTERLACE_NONE,
               PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
  // Level 3 is within a few % of the default size at a fraction of its time on video frames.
  png_set_compression_level(png, 3);
  if (text_count > 0) png_set_text(png, info, text, text_count);
  png_write_info(png, info);
  for (png_uint_32 y = 0; y < height; ++y)
    png_write_row(png, const_cast<png_bytep>(rgb + static_cast<size_t>(y) * width * 3));
  png_write_end(png, info);
  return true;
}

void write_bytes(OutputFile& out, const std::vector<uint8_t>& bytes) {
  out.write(bytes.data(), bytes.size());
  out.commit();
}

}  // namespace

std::vector<uint8_t> encode_png(const uint8_t* rgb, int64_t width, int64_t height,
                                const PngText& text) {
  AVDIT_REQUIRE(width > 0 && height > 0 && width <= kMaxSide && height <= kMaxSide,
                "PNG size {}x{} is out of range; expected 1 to {} pixels a side", width, height,
                kMaxSide);
  std::vector<uint8_t> out;
  out.reserve(static_cast<size_t>(width * height * 3 / 2 + 1024));
  PngSink sink{&out, false, {}};
  png_structp png =
      png_create_write_struct(PNG_LIBPNG_VER_STRING, &sink, on_png_error, on_png_warning);
  if (!png) throw RuntimeFailure("libpng: cannot create a PNG writer (out of memory)");
  png_infop info = png_create_info_struct(png);
  if (!info) {
    png_destroy_write_struct(&png, nullptr);
    throw RuntimeFailure("libpng: cannot create a PNG writer (out of memory)");
  }
  std::vector<png_text> chunks(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    std::memset(&chunks[i], 0, sizeof chunks[i]);
    chunks[i].compression = PNG_ITXT_COMPRESSION_NONE;
    chunks[i].key = const_cast<char*>(text[i].first.c_str());
    chunks[i].text = const_cast<char*>(text[i].second.c_str());
    chunks[i].itxt_length = text[i].second.size();
  }
  const bool ok = encode_png_raw(png, info, rgb, static_cast<png_uint_32>(width),
                                 static_cast<png_uint_32>(height), chunks.data(),
                                 static_cast<int>(chunks.size()), &sink);
  png_destroy_write_struct(&png, &info);
  if (!ok) throw RuntimeFailure(fmt::format("libpng: encoding failed: {}", sink.error));
  return out;
}

void write_png(const std::filesystem::path& path, const Tensor& frame) {
  check_frame(frame, "frame");
  const int64_t h = frame.size(1), w = frame.size(2);
  OutputFile out(path);  // before encoding: an unwritable path fails at once
  write_bytes(out, encode_png(frame_to_rgb8(frame.f32(), h, w).data(), w, h));
}

void write_png_frames(const std::filesystem::path& dir, const Tensor& frames) {
  check_frames(frames, "frames");
  const int64_t t_count = frames.size(0), h = frames.size(2), w = frames.size(3);
  OutputDir out(dir);
  for (int64_t t = 0; t < t_count; ++t) {
    check_frame_values(frames, t, "frames");
    const auto rgb = frame_to_rgb8(frames.f32() + t * 3 * h * w, h, w);
    const auto file = out.open(fmt::format("frame_{:05d}.png", t));
    write_bytes(*file, encode_png(rgb.data(), w, h));
  }
  out.commit();
}

}  // namespace avdit::media
