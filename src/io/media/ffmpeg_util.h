// What the mp4 writer needs around the FFmpeg libraries: owning handles, error text, libav's log
// routed into avdit's, and an AVIOContext that writes through an OutputFile (so every byte the
// muxer writes is checked and the file appears whole or not at all).
#pragma once

extern "C" {
#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
#include <libswscale/swscale.h>
}

#include <memory>
#include <string>

#include "io/media/output_file.h"

namespace avdit::media::ff {

struct FormatDeleter {
  void operator()(AVFormatContext* c) const { avformat_free_context(c); }
};
struct CodecDeleter {
  void operator()(AVCodecContext* c) const { avcodec_free_context(&c); }
};
struct FrameDeleter {
  void operator()(AVFrame* f) const { av_frame_free(&f); }
};
struct PacketDeleter {
  void operator()(AVPacket* p) const { av_packet_free(&p); }
};
struct SwsDeleter {
  void operator()(SwsContext* c) const { sws_freeContext(c); }
};
struct IoDeleter {
  void operator()(AVIOContext* io) const;
};
using FormatPtr = std::unique_ptr<AVFormatContext, FormatDeleter>;
using CodecPtr = std::unique_ptr<AVCodecContext, CodecDeleter>;
using FramePtr = std::unique_ptr<AVFrame, FrameDeleter>;
using PacketPtr = std::unique_ptr<AVPacket, PacketDeleter>;
using SwsPtr = std::unique_ptr<SwsContext, SwsDeleter>;
using IoPtr = std::unique_ptr<AVIOContext, IoDeleter>;

// av_strerror's text for an AVERROR code.
std::string error_string(int code);

// Sends libav's log to avdit::log::debug (visible with -v) instead of stderr, once per process:
// libav's log callback is process-wide by its design. The last error-level line of the calling
// thread is kept for the messages of the writer's exceptions.
void route_log();
std::string last_log_error();  // "" when none since the last clear
void clear_log_error();

// An AVIOContext (seekable: the mp4 muxer rewrites sizes and moves the index to the front) whose
// writes, reads and seeks go to `out`.
IoPtr open_io(OutputFile& out);

}  // namespace avdit::media::ff
