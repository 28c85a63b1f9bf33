// H3 prompt layouts: labels, vision blocks and per-piece tokenization.
#include "models/text/prompt_h3.h"

#include <fmt/format.h>

#include "core/error.h"

namespace avdit::models::text::h3 {

std::vector<Piece> t2va_pieces(std::string_view prompt) {
  return {Piece{Piece::Kind::kText, std::string(prompt), "", 0}};
}

std::vector<Piece> fl2va_pieces(std::string_view prompt,
                                std::span<const int64_t> image_token_counts) {
  std::vector<Piece> out;
  for (size_t i = 0; i < image_token_counts.size(); ++i) {
    out.push_back({Piece::Kind::kText, fmt::format("<Picture {}>: ", i + 1), "", 0});
    out.push_back({Piece::Kind::kVision, "", "<|image_pad|>", image_token_counts[i]});
  }
  out.push_back({Piece::Kind::kText, std::string(prompt), "", 0});
  return out;
}

std::vector<Piece> ref2va_pieces(std::string_view prompt, std::span<const Reference> references) {
  std::vector<Piece> out;
  int pictures = 0, videos = 0, audios = 0;
  for (const Reference& r : references) {
    if (r.has_audio || r.kind == Reference::Kind::kAudio)
      out.push_back({Piece::Kind::kText, fmt::format("<Audio {}>: ", ++audios), "", 0});
    if (r.kind == Reference::Kind::kImage) {
      out.push_back({Piece::Kind::kText, fmt::format("<Picture {}>: ", ++pictures), "", 0});
      out.push_back({Piece::Kind::kVision, "", "<|image_pad|>", r.tokens});
    } else if (r.kind == Reference::Kind::kVideo) {
      out.push_back({Piece::Kind::kText, fmt::format("<Video {}>: ", ++videos), "", 0});
      for (double t : r.timestamps) {
        out.push_back({Piece::Kind::kText, seconds_label(t), "", 0});
        out.push_back({Piece::Kind::kVision, "", "<|video_pad|>", r.tokens});
      }
    }
  }
  out.push_back({Piece::Kind::kText, std::string(prompt), "", 0});
  return out;
}

std::vector<double> video_block_timestamps(int64_t frames_at_24fps) {
  std::vector<int64_t> frames;
  for (int64_t f = 0; f < frames_at_24fps; f += 12) frames.push_back(f);
  if (frames.size() % 2) frames.push_back(frames.back());
  std::vector<double> out;
  for (size_t i = 0; i + 1 < frames.size(); i += 2)
    out.push_back((static_cast<double>(frames[i]) + static_cast<double>(frames[i + 1])) / 2.0 /
                  24.0);
  return out;
}

std::string seconds_label(double t) { return fmt::format("<{:.1f} seconds>", t); }

TaggedIds assemble(const Tokenizer& tokenizer, std::span<const Piece> pieces) {
  TaggedIds out;
  const auto id_of = [&](std::string_view token) {
    const auto id = tokenizer.token_to_id(token);
    AVDIT_REQUIRE(id.has_value(), "the tokenizer has no token {} (not a Qwen-VL tokenizer?)",
                  token);
    return *id;
  };
  for (const Piece& p : pieces) {
    if (p.kind == Piece::Kind::kText) {
      for (int32_t id : tokenizer.encode_ids(p.text, "a prompt piece")) {
        out.ids.push_back(id);
        out.tags.push_back(1);
      }
      continue;
    }
    out.ids.push_back(id_of("<|vision_start|>"));
    for (int64_t i = 0; i < p.pads; ++i) out.ids.push_back(id_of(p.pad));
    out.ids.push_back(id_of("<|vision_end|>"));
    out.tags.resize(out.ids.size(), 0);
  }
  return out;
}

}  // namespace avdit::models::text::h3
