// Helpers around the FFmpeg libraries (see ffmpeg_util.h).
#include "io/media/ffmpeg_util.h"

#include <cstdarg>
#include <mutex>

#include "core/error.h"
#include "core/log.h"

namespace avdit::media::ff {

namespace {

constexpr int kIoBuffer = 1 << 16;

thread_local std::string t_last_error;

void log_callback(void* avcl, int level, const char* format, va_list args) {
  if (level > AV_LOG_INFO) return;  // verbose and debug chatter
  char line[1024];
  int print_prefix = 1;
  va_list copy;
  va_copy(copy, args);
  av_log_format_line2(avcl, level, format, copy, line, sizeof line, &print_prefix);
  va_end(copy);
  std::string text(line);
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
  if (text.empty()) return;
  if (level <= AV_LOG_ERROR) t_last_error = text;
  log::debug("libav: {}", text);
}

OutputFile& file_of(void* opaque) { return *static_cast<OutputFile*>(opaque); }

// FFmpeg 7 made the buffer of write_packet const.
#if LIBAVFORMAT_VERSION_MAJOR >= 61
using WriteBuffer = const uint8_t*;
#else
using WriteBuffer = uint8_t*;
#endif

int io_write(void* opaque, WriteBuffer buf, int n) {
  const int64_t w = file_of(opaque).write_some(buf, static_cast<size_t>(n));
  return w < 0 ? AVERROR(static_cast<int>(-w)) : static_cast<int>(w);
}

int io_read(void* opaque, uint8_t* buf, int n) {
  const int64_t r = file_of(opaque).read_some(buf, static_cast<size_t>(n));
  if (r < 0) return AVERROR(static_cast<int>(-r));
  return r == 0 ? AVERROR_EOF : static_cast<int>(r);
}

int64_t io_seek(void* opaque, int64_t offset, int whence) {
  OutputFile& f = file_of(opaque);
  whence &= ~AVSEEK_FORCE;
  const int64_t r = whence == AVSEEK_SIZE ? f.size() : f.seek(offset, whence);
  return r < 0 ? AVERROR(static_cast<int>(-r)) : r;
}

}  // namespace

void IoDeleter::operator()(AVIOContext* io) const {
  av_freep(&io->buffer);
  avio_context_free(&io);
}

std::string error_string(int code) {
  char buf[AV_ERROR_MAX_STRING_SIZE] = {};
  av_strerror(code, buf, sizeof buf);
  return buf;
}

void route_log() {
  static std::once_flag once;
  std::call_once(once, [] { av_log_set_callback(log_callback); });
}

std::string last_log_error() { return t_last_error; }
void clear_log_error() { t_last_error.clear(); }

IoPtr open_io(OutputFile& out) {
  auto* buffer = static_cast<unsigned char*>(av_malloc(kIoBuffer));
  if (!buffer) throw RuntimeFailure("libavformat: out of memory");
  AVIOContext* io = avio_alloc_context(buffer, kIoBuffer, 1, &out, io_read, io_write, io_seek);
  if (!io) {
    av_free(buffer);
    throw RuntimeFailure("libavformat: out of memory");
  }
  return IoPtr(io);
}

}  // namespace avdit::media::ff
