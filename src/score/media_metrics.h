// What a viewer sees, compared between a candidate's decoded clip and the reference's: frame PSNR,
// SSIM on luma (Wang et al. 2004: Gaussian window 11, sigma 1.5, K1 0.01, K2 0.03, valid
// positions), and the multi-scale log-mel L1 of the waveform with the loss settings of the
// Descript Audio Codec (conf/base.yml: MelSpectrogramLoss over windows 32..2048 with 5..320 mels,
// hop = window / 4, periodic Hann, centred reflect-padded STFT, Slaney mel filters from 0 Hz to
// Nyquist, log10 of the magnitude mel clamped at 1e-5, L1 mean per scale, summed over scales).
#pragma once

#include <array>
#include <vector>

#include "core/tensor.h"

namespace avdit::score {

// frames [T, 3, H, W] in [-1, 1] (the decoders' output), compared after mapping to [0, 1] and
// clamping, as the writers do. PSNR per frame (peak 1) averaged over the frames that differ;
// +infinity when every frame is identical. BadInput for different shapes.
double frame_psnr_db(const Tensor& frames, const Tensor& reference);
// Mean SSIM over frames of the BT.601 luma (0.299 R + 0.587 G + 0.114 B, dynamic range 1). Frames
// smaller than the window use the largest odd window that fits (same sigma).
double ssim_luma(const Tensor& frames, const Tensor& reference);

// The DAC MelSpectrogramLoss scales: window lengths and mel counts.
inline constexpr std::array<int, 7> kMelWindows = {32, 64, 128, 256, 512, 1024, 2048};
inline constexpr std::array<int, 7> kMelBands = {5, 10, 20, 40, 80, 160, 320};

// Slaney mel filter bank [n_mels, n_fft / 2 + 1] (librosa.filters.mel's default: Slaney scale and
// area normalisation), row-major.
std::vector<double> mel_filters(double sample_rate, int n_fft, int n_mels, double fmin,
                                double fmax);

// Log-mel spectrogram log10(max(mel, 1e-5)) of one channel: [n_mels, frames] row-major; frames =
// 1 + samples / hop. Needs samples > window / 2 (the reflect padding).
std::vector<double> log_mel(const float* x, int64_t samples, double sample_rate, int window,
                            int n_mels);

// Sum over the scales of mean |log_mel(a) - log_mel(b)|; waveforms [channels, samples] of one
// shape. Scales whose window does not fit the clip (window / 2 >= samples) are skipped;
// `scales_used` receives how many were summed.
double multiscale_log_mel_l1(const Tensor& waveform, const Tensor& reference, double sample_rate,
                             int* scales_used = nullptr);

}  // namespace avdit::score
