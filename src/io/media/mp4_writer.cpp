// MP4 output (see mp4_writer.h): libx264 and FFmpeg's native AAC encoder, muxed by libavformat
// through an OutputFile. Packets are produced in presentation order of the two streams so that
// the muxer's interleaving queue stays short.
#include "io/media/mp4_writer.h"

extern "C" {
#include <libavutil/channel_layout.h>
#include <libavutil/opt.h>
}

#include <algorithm>
#include <array>
#include <cstdlib>
#include <cstring>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "core/log.h"
#include "io/media/ffmpeg_util.h"
#include "io/media/output_file.h"
#include "io/media/rgb8.h"
#include "io/media/tensor_checks.h"

namespace avdit::media {

namespace {

constexpr std::array<std::string_view, 10> kPresets = {
    "ultrafast", "superfast", "veryfast", "faster",   "fast",
    "medium",    "slow",      "slower",   "veryslow", "placebo"};
constexpr int kMaxSide = 16384;  // H.264 level 6.2 allows 8192x4320; x264 refuses far larger

struct Encoder {
  ff::CodecPtr ctx;
  AVStream* stream = nullptr;
  ff::FramePtr frame;
};

// The one place that turns a libav failure into an exception: a failed write of the file (a full
// disk) is reported as such, whichever libav call noticed it.
[[noreturn]] void fail(const std::filesystem::path& path, const OutputFile& out,
                       std::string_view step, int code) {
  if (out.first_error())
    throw RuntimeFailure(fmt::format("{}: writing failed: {}; nothing was written", path.string(),
                                     std::strerror(out.first_error())));
  const std::string detail = ff::last_log_error();
  throw RuntimeFailure(fmt::format("{}: {} failed: {}{}; nothing was written", path.string(), step,
                                   ff::error_string(code),
                                   detail.empty() ? "" : " (" + detail + ")"));
}

const AVCodec* find_aac() {
  const AVCodec* codec = avcodec_find_encoder(AV_CODEC_ID_AAC);
  if (!codec) throw RuntimeFailure("this FFmpeg build has no AAC encoder");
  return codec;
}

void check_aac_rate(const AVCodec* codec, int sample_rate) {
  if (!codec->supported_samplerates) return;
  std::string rates;
  for (const int* r = codec->supported_samplerates; *r; ++r) {
    if (*r == sample_rate) return;
    rates += fmt::format("{}{}", rates.empty() ? "" : ", ", *r);
  }
  throw BadInput(
      fmt::format("sample rate {} Hz: AAC in mp4 takes only {} Hz; resample the audio "
                  "or write it as WAV",
                  sample_rate, rates));
}

void check_options(const Mp4Options& o) {
  AVDIT_REQUIRE(o.crf >= 0 && o.crf <= 51, "crf {} is out of range; expected 0 (lossless) to 51",
                o.crf);
  AVDIT_REQUIRE(
      std::find(kPresets.begin(), kPresets.end(), o.preset) != kPresets.end(),
      "preset '{}' is not an x264 preset; expected one of ultrafast, superfast, veryfast, "
      "faster, fast, medium, slow, slower, veryslow, placebo",
      o.preset);
  AVDIT_REQUIRE(o.audio_bitrate >= 32000 && o.audio_bitrate <= 512000,
                "audio bitrate {} is out of range; expected 32000 to 512000 bits per second",
                o.audio_bitrate);
}

class Mp4Muxer {
 public:
  Mp4Muxer(const std::filesystem::path& path, OutputFile& out) : path_(path), out_(out) {
    AVFormatContext* raw = nullptr;
    // The temporary's name as the URL: the muxer's faststart pass reopens it to move the index.
    const int r = avformat_alloc_output_context2(&raw, nullptr, "mp4", out.temp_path().c_str());
    if (r < 0 || !raw) fail(path_, out_, "libavformat: creating the mp4 muxer", r);
    fmt_.reset(raw);
    io_ = ff::open_io(out);
    fmt_->pb = io_.get();
    fmt_->flags |= AVFMT_FLAG_CUSTOM_IO;
    packet_.reset(av_packet_alloc());
    if (!packet_) throw RuntimeFailure("libavcodec: out of memory");
  }

  Encoder open_video(int width, int height, FrameRate fps, const Mp4Options& o) {
    const AVCodec* codec = avcodec_find_encoder_by_name("libx264");
    if (!codec)
      throw RuntimeFailure(
          "this FFmpeg build has no libx264 encoder (Debian's libavcodec has it); install one "
          "that does");
    Encoder e = new_encoder(codec);
    AVCodecContext* c = e.ctx.get();
    c->width = width;
    c->height = height;
    c->pix_fmt = AV_PIX_FMT_YUV420P;
    c->time_base = {fps.den, fps.num};
    c->framerate = {fps.num, fps.den};
    c->sample_aspect_ratio = {1, 1};
    // Tagged BT.709, limited range: what players assume for HD and what the RGB conversion uses.
    c->color_range = AVCOL_RANGE_MPEG;
    c->colorspace = AVCOL_SPC_BT709;
    c->color_primaries = AVCOL_PRI_BT709;
    c->color_trc = AVCOL_TRC_BT709;
    av_opt_set(c->priv_data, "preset", o.preset.c_str(), 0);
    av_opt_set(c->priv_data, "crf", std::to_string(o.crf).c_str(), 0);
    open_encoder(e, codec, "libx264: opening the H.264 encoder");
    e.stream->avg_frame_rate = c->framerate;
    e.frame->format = c->pix_fmt;
    e.frame->width = width;
    e.frame->height = height;
    alloc_frame(e);
    return e;
  }

  Encoder open_audio(int sample_rate, const Mp4Options& o) {
    const AVCodec* codec = find_aac();
    Encoder e = new_encoder(codec);
    AVCodecContext* c = e.ctx.get();
    c->sample_fmt = AV_SAMPLE_FMT_FLTP;  // the only format FFmpeg's AAC encoder takes
    c->sample_rate = sample_rate;
    av_channel_layout_default(&c->ch_layout, 2);
    c->bit_rate = o.audio_bitrate;
    c->time_base = {1, sample_rate};
    open_encoder(e, codec, "libavcodec: opening the AAC encoder");
    e.frame->format = c->sample_fmt;
    e.frame->sample_rate = sample_rate;
    e.frame->nb_samples = c->frame_size > 0 ? c->frame_size : 1024;
    av_channel_layout_copy(&e.frame->ch_layout, &c->ch_layout);
    alloc_frame(e);
    return e;
  }

  void write_header() {
    AVDictionary* opts = nullptr;
    av_dict_set(&opts, "movflags", "+faststart", 0);  // index first: plays while downloading
    const int r = avformat_write_header(fmt_.get(), &opts);
    av_dict_free(&opts);
    if (r < 0) fail(path_, out_, "libavformat: writing the mp4 header", r);
  }

  // Sends one frame (nullptr: the end of the stream) and muxes every packet that comes out.
  void encode(Encoder& e, const AVFrame* frame) {
    int r = avcodec_send_frame(e.ctx.get(), frame);
    if (r < 0) fail(path_, out_, "encoding", r);
    for (;;) {
      r = avcodec_receive_packet(e.ctx.get(), packet_.get());
      if (r == AVERROR(EAGAIN) || r == AVERROR_EOF) return;
      if (r < 0) fail(path_, out_, "encoding", r);
      // Every video frame lasts one tick of the 1 / fps time base; without it the last frame
      // would have no duration and the clip would be one frame short.
      if (e.ctx->codec_type == AVMEDIA_TYPE_VIDEO && packet_->duration == 0) packet_->duration = 1;
      av_packet_rescale_ts(packet_.get(), e.ctx->time_base, e.stream->time_base);
      packet_->stream_index = e.stream->index;
      r = av_interleaved_write_frame(fmt_.get(), packet_.get());
      if (r < 0) fail(path_, out_, "libavformat: writing a packet", r);
    }
  }

  void finish() {
    int r = av_write_trailer(fmt_.get());
    if (r < 0) fail(path_, out_, "libavformat: writing the mp4 index", r);
    avio_flush(io_.get());
    if (io_->error < 0) fail(path_, out_, "libavformat: writing", io_->error);
  }

  [[noreturn]] void failed(std::string_view step, int code) { fail(path_, out_, step, code); }

 private:
  Encoder new_encoder(const AVCodec* codec) {
    Encoder e;
    e.ctx.reset(avcodec_alloc_context3(codec));
    e.frame.reset(av_frame_alloc());
    if (!e.ctx || !e.frame) throw RuntimeFailure("libavcodec: out of memory");
    if (fmt_->oformat->flags & AVFMT_GLOBALHEADER) e.ctx->flags |= AV_CODEC_FLAG_GLOBAL_HEADER;
    return e;
  }

  void open_encoder(Encoder& e, const AVCodec* codec, std::string_view step) {
    int r = avcodec_open2(e.ctx.get(), codec, nullptr);
    if (r < 0) fail(path_, out_, step, r);
    e.stream = avformat_new_stream(fmt_.get(), nullptr);
    if (!e.stream) throw RuntimeFailure("libavformat: out of memory");
    e.stream->time_base = e.ctx->time_base;
    r = avcodec_parameters_from_context(e.stream->codecpar, e.ctx.get());
    if (r < 0) fail(path_, out_, step, r);
  }

  void alloc_frame(Encoder& e) {
    const int r = av_frame_get_buffer(e.frame.get(), 0);
    if (r < 0) fail(path_, out_, "allocating a frame", r);
  }

  const std::filesystem::path& path_;
  OutputFile& out_;
  ff::IoPtr io_;  // declared before fmt_: the muxer goes first, then the I/O it wrote through
  ff::FormatPtr fmt_;
  ff::PacketPtr packet_;
};

}  // namespace

void write_mp4(const std::filesystem::path& path, const Tensor& frames, FrameRate fps,
               const Tensor& audio, int sample_rate, const Mp4Options& options) {
  check_frames(frames, "frames");
  check_frame_rate(fps);
  check_options(options);
  const int64_t t_count = frames.size(0), h = frames.size(2), w = frames.size(3);
  AVDIT_REQUIRE(h <= kMaxSide && w <= kMaxSide,
                "tensor 'frames' is {}: frames of {}x{} are too large for H.264; at most {} a side",
                frames.shape_str(), w, h, kMaxSide);
  const bool has_audio = audio.defined();
  if (has_audio) {
    check_audio(audio, "audio", 2);
    check_sample_rate(sample_rate);
    check_aac_rate(find_aac(), sample_rate);
  }
  ff::route_log();
  ff::clear_log_error();

  OutputFile out(path);
  Mp4Muxer mux(path, out);
  // yuv420p halves the chroma in both directions, so the coded size must be even: odd frames get
  // their last column / row repeated rather than a black or cropped edge.
  const int width = static_cast<int>(w + (w & 1)), height = static_cast<int>(h + (h & 1));
  Encoder video = mux.open_video(width, height, fps, options);
  Encoder sound;
  if (has_audio) sound = mux.open_audio(sample_rate, options);
  mux.write_header();

  ff::SwsPtr sws(sws_getContext(width, height, AV_PIX_FMT_RGB24, width, height, AV_PIX_FMT_YUV420P,
                                SWS_BICUBIC | SWS_ACCURATE_RND | SWS_FULL_CHR_H_INP, nullptr,
                                nullptr, nullptr));
  if (!sws) throw RuntimeFailure("libswscale: cannot convert RGB to yuv420p");
  // RGB is full range; the coded video is BT.709 limited range, as tagged above.
  const int* bt709 = sws_getCoefficients(SWS_CS_ITU709);
  sws_setColorspaceDetails(sws.get(), bt709, 1, bt709, 0, 0, 1 << 16, 1 << 16);
  std::vector<uint8_t> rgb(static_cast<size_t>(width) * height * 3);

  // The audio lasts exactly as long as the video, to the nearest sample: a longer waveform is
  // cut at T / fps, a shorter one padded with silence.
  const int64_t audio_samples = has_audio ? samples_for_frames(t_count, fps, sample_rate) : 0;
  const int64_t in_samples = has_audio ? audio.size(1) : 0;
  const int64_t in_channels = has_audio ? audio.size(0) : 0;
  if (has_audio && std::abs(in_samples - audio_samples) > samples_for_frames(1, fps, sample_rate))
    log::warn("{}: the audio lasts {:.3f} s, the video {:.3f} s: the audio is {}", path.string(),
              static_cast<double>(in_samples) / sample_rate,
              static_cast<double>(audio_samples) / sample_rate,
              in_samples > audio_samples ? "cut" : "padded with silence");
  const bool small_last =
      has_audio && (sound.ctx->codec->capabilities &
                    (AV_CODEC_CAP_SMALL_LAST_FRAME | AV_CODEC_CAP_VARIABLE_FRAME_SIZE));

  int64_t next_frame = 0, next_sample = 0;
  while (next_frame < t_count || next_sample < audio_samples) {
    const bool video_next =
        next_sample >= audio_samples ||
        (next_frame < t_count &&
         av_compare_ts(next_frame, video.ctx->time_base, next_sample, sound.ctx->time_base) <= 0);
    if (video_next) {
      AVFrame* f = video.frame.get();
      int r = av_frame_make_writable(f);
      if (r < 0) mux.failed("allocating a frame", r);
      check_frame_values(frames, next_frame, "frames");
      frame_to_rgb8(frames.f32() + next_frame * 3 * h * w, h, w, height, width, rgb.data(),
                    width * 3);
      const uint8_t* src[1] = {rgb.data()};
      const int src_stride[1] = {width * 3};
      sws_scale(sws.get(), src, src_stride, 0, height, f->data, f->linesize);
      f->pts = next_frame++;
      mux.encode(video, f);
    } else {
      AVFrame* f = sound.frame.get();
      int r = av_frame_make_writable(f);
      if (r < 0) mux.failed("allocating a frame", r);
      const int64_t full = sound.ctx->frame_size > 0 ? sound.ctx->frame_size : 1024;
      const int64_t n = std::min(full, audio_samples - next_sample);
      f->nb_samples = static_cast<int>(small_last ? n : full);
      for (int c = 0; c < 2; ++c) {
        // Mono goes to both channels unchanged (no -3 dB pan law: the decoder's level is kept).
        const float* src = audio.f32() + std::min<int64_t>(c, in_channels - 1) * in_samples;
        auto* dst = reinterpret_cast<float*>(f->data[c]);
        for (int64_t i = 0; i < f->nb_samples; ++i) {
          const int64_t s = next_sample + i;
          dst[i] = i < n && s < in_samples ? src[s] : 0.0f;
        }
      }
      f->pts = next_sample;
      next_sample += n;
      mux.encode(sound, f);
    }
  }
  mux.encode(video, nullptr);
  if (has_audio) mux.encode(sound, nullptr);
  mux.finish();
  out.commit();
}

}  // namespace avdit::media
