// MiniMax-H3's prompt layouts around the tokenizer (cross-checked in the golden against the
// ComfyUI port's presentation.py): the prompt and, per conditioning image / video / audio, a text
// label and a vision block. Every text piece is tokenized on its own (no merges across pieces);
// each row is tagged 1 (text) or 0 (vision block: start, pads, end).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "models/text/tokenizer.h"

namespace avdit::models::text::h3 {

struct Piece {
  enum class Kind { kText, kVision };
  Kind kind = Kind::kText;
  std::string text;  // kText: the text
  std::string pad;   // kVision: "<|image_pad|>" or "<|video_pad|>"
  int64_t pads = 0;  // kVision: pad tokens between <|vision_start|> and <|vision_end|>
};

struct TaggedIds {
  std::vector<int32_t> ids;
  std::vector<uint8_t> tags;  // 1 text row, 0 vision row
};

// t2va: the prompt verbatim.
std::vector<Piece> t2va_pieces(std::string_view prompt);
// fl2va: per keyframe i (from 1) "<Picture i>: " and an image block of image_token_counts[i-1]
// pads, then the prompt.
std::vector<Piece> fl2va_pieces(std::string_view prompt,
                                std::span<const int64_t> image_token_counts);

struct Reference {
  enum class Kind { kImage, kVideo, kAudio };
  Kind kind = Kind::kImage;
  bool has_audio = false;          // a reference carrying sound is announced as "<Audio j>: " first
  int64_t tokens = 0;              // pads per image block / per video frame-pair block
  std::vector<double> timestamps;  // video: the time of each block (video_block_timestamps)
};
// ref2va: references in request order, numbered per modality; then the prompt. An image gives
// "<Picture i>: " + image block; a video "<Video k>: " then per block "<t.t seconds>" + a
// <|video_pad|> block; sound only its "<Audio j>: " label.
std::vector<Piece> ref2va_pieces(std::string_view prompt, std::span<const Reference> references);

// Video frames at 24 fps are sampled every 12th (2 fps), padded to an even count by repeating the
// last, and merged in pairs; a block's time is the mean of its pair, in seconds.
std::vector<double> video_block_timestamps(int64_t frames_at_24fps);
// "<0.2 seconds>": Python's f"{t:.1f}", which rounds the exact binary value half to even.
std::string seconds_label(double t);

// Tokens and tags of the pieces.
TaggedIds assemble(const Tokenizer& tokenizer, std::span<const Piece> pieces);

}  // namespace avdit::models::text::h3
