"""Reads the media writers' files back with independent implementations and compares them with
the tensors media_tool saved (--dump): ffprobe / ffmpeg for mp4 and PNG, a RIFF parser and
Python's wave module for WAV. Used by tests/cli/media_cli.sh; each check prints its figures and
exits 1 with a message on a mismatch. The expected pixels are computed here in numpy float32,
as diffusers' postprocess does: round(clip(x / 2 + 0.5, 0, 1) * 255), round half to even."""
import argparse
import json
import os
import struct
import subprocess
import sys
import wave
from fractions import Fraction

import numpy as np
from safetensors.numpy import load_file


def fail(msg):
    print(f"FAIL: {msg}")
    sys.exit(1)


def to_u8(x):  # [..., 3, H, W] float32 -> [..., H, W, 3] uint8
    x = np.asarray(x, dtype=np.float32)
    v = np.clip(x / np.float32(2) + np.float32(0.5), 0, 1) * np.float32(255)
    return np.moveaxis(np.rint(v).astype(np.uint8), -3, -1)


def run(cmd):
    r = subprocess.run(cmd, capture_output=True)
    if r.returncode != 0:
        fail(f"{' '.join(cmd)}: exit {r.returncode}: {r.stderr.decode()[-2000:]}")
    return r.stdout


def decode_rgb(path, width, height, extra=()):
    raw = run(["ffmpeg", "-v", "error", "-i", path, *extra, "-f", "rawvideo", "-pix_fmt", "rgb24", "-"])
    frame = width * height * 3
    if len(raw) % frame:
        fail(f"{path}: {len(raw)} bytes of RGB is not a whole number of {width}x{height} frames")
    return np.frombuffer(raw, np.uint8).reshape(-1, height, width, 3)


def probe(path):
    return json.loads(run(["ffprobe", "-v", "error", "-count_frames", "-show_streams", "-show_format",
                           "-of", "json", path]))


def cmd_mp4(a):
    j = probe(a.clip)
    streams = {s["codec_type"]: s for s in j["streams"]}
    v = streams.get("video")
    if v is None:
        fail("no video stream")
    fps = Fraction(a.fps)
    want_w, want_h = a.width + a.width % 2, a.height + a.height % 2
    got = (v["codec_name"], v["pix_fmt"], v["width"], v["height"], Fraction(v["r_frame_rate"]),
           Fraction(v["avg_frame_rate"]), int(v["nb_read_frames"]), int(v["nb_frames"]),
           v.get("color_space"))
    want = ("h264", "yuv420p", want_w, want_h, fps, fps, a.frames, a.frames, "bt709")
    if got != want:
        fail(f"video stream (codec, pix_fmt, width, height, r_frame_rate, avg_frame_rate, "
             f"frames read, nb_frames, color_space) is {got}, expected {want}")
    v_dur = float(v["duration"])
    want_dur = a.frames / fps
    if abs(v_dur - float(want_dur)) > 1e-3:
        fail(f"video duration {v_dur} s, expected {float(want_dur)} s")
    msg = (f"video h264 yuv420p {want_w}x{want_h} {v['r_frame_rate']} fps, {a.frames} frames, "
           f"{v_dur:.4f} s (profile {v.get('profile')})")
    au = streams.get("audio")
    if a.rate == 0:
        if au is not None:
            fail("an audio stream in a clip written without audio")
        print("     " + msg + ", no audio")
        return
    if au is None:
        fail("no audio stream")
    got = (au["codec_name"], int(au["channels"]), int(au["sample_rate"]), au.get("channel_layout"))
    want = ("aac", 2, a.rate, "stereo")
    if got != want:
        fail(f"audio stream (codec, channels, sample_rate, layout) is {got}, expected {want}")
    a_dur = float(au["duration"])
    if abs(a_dur - v_dur) >= 1 / float(fps):
        fail(f"audio lasts {a_dur} s, video {v_dur} s: more than one frame ({1 / float(fps):.4f} s) apart")
    fmt_dur = float(j["format"]["duration"])
    print(f"     {msg}; audio aac stereo {a.rate} Hz {a_dur:.4f} s (|a - v| = "
          f"{abs(a_dur - v_dur) * 1000:.2f} ms, one frame = {1000 / float(fps):.2f} ms); file {fmt_dur:.4f} s")


def cmd_pixels(a):
    frames = load_file(a.dump)["frames"]  # [T, 3, H, W]
    t, _, h, w = frames.shape
    ew, eh = w + w % 2, h + h % 2
    # The clip is tagged BT.709 limited range; say so to the scaler rather than trust its defaults.
    got = decode_rgb(a.clip, ew, eh, ["-vf", "scale=in_color_matrix=bt709:in_range=tv:"
                                      "flags=bicubic+accurate_rnd+full_chroma_int,format=rgb24"])
    if got.shape[0] != t:
        fail(f"decoded {got.shape[0]} frames, expected {t}")
    want = to_u8(frames)
    # Odd sizes: the padding repeats the last column / row of the frame.
    want = np.pad(want, ((0, 0), (0, eh - h), (0, ew - w), (0, 0)), mode="edge")
    err = np.abs(got.astype(np.int16) - want.astype(np.int16))
    mean, mx = float(err.mean()), int(err.max())
    first_mean, first_max = float(err[0].mean()), int(err[0].max())
    psnr = 10 * np.log10(255.0 ** 2 / float((err.astype(np.float64) ** 2).mean()))
    print(f"     decoded pixels vs input (crf {a.crf}): first frame mean |err| {first_mean:.3f}, max "
          f"{first_max}; all {t} frames mean {mean:.3f}, max {mx}, PSNR {psnr:.1f} dB "
          f"(tolerance mean <= {a.tol_mean}, max <= {a.tol_max})")
    if first_mean > a.tol_mean or first_max > a.tol_max or mean > a.tol_mean or mx > a.tol_max:
        fail("decoded pixels differ from the input beyond the tolerance")
    # Frame order: each decoded frame is closest to its own input frame.
    for i in range(t):
        d = [np.abs(got[i].astype(np.int16) - want[k].astype(np.int16)).mean() for k in range(t)]
        if int(np.argmin(d)) != i:
            fail(f"decoded frame {i} is closest to input frame {int(np.argmin(d))}")


def cmd_audio(a):
    src = load_file(a.dump)["audio"]  # [channels, samples]
    j = probe(a.clip)
    au = [s for s in j["streams"] if s["codec_type"] == "audio"][0]
    rate = int(au["sample_rate"])
    raw = run(["ffmpeg", "-v", "error", "-i", a.clip, "-map", "0:a", "-f", "f32le", "-"])
    got = np.frombuffer(raw, np.float32).reshape(-1, 2).T  # [2, samples]
    n = a.samples
    if abs(got.shape[1] - n) > rate / float(Fraction(a.fps)):
        fail(f"decoded {got.shape[1]} samples, expected {n} (one frame of audio apart at most)")
    # The expected signal: mono on both channels, cut or padded with silence to n samples.
    want = np.zeros((2, n), np.float32)
    for c in range(2):
        ch = src[min(c, src.shape[0] - 1)][:n]
        want[c, :len(ch)] = ch
    m = min(n, got.shape[1])
    for c in range(2):
        noise = float(((got[c, :m] - want[c, :m]) ** 2).sum())
        snr = 10 * np.log10(float((want[c, :m] ** 2).sum()) / max(noise, 1e-30))
        # Alignment: the decoded tone best matches the input at lag 0 (the encoder's priming
        # samples are skipped, nothing is shifted). Compared past the encoder's first frames.
        lo, hi = 2048, min(m, n) - 64
        lags = range(-64, 65)
        errs = [float(((got[c, lo + k:hi + k] - want[c, lo:hi]) ** 2).sum()) for k in lags]
        lag = list(lags)[int(np.argmin(errs))]
        spec = np.abs(np.fft.rfft(got[c, :m]))
        peak = np.argmax(spec) * rate / m
        want_peak = np.argmax(np.abs(np.fft.rfft(want[c, :m]))) * rate / m
        print(f"     audio channel {c}: {got.shape[1]} samples decoded ({n} expected), SNR vs input "
              f"{snr:.1f} dB, best alignment at lag {lag}, peak {peak:.1f} Hz (input "
              f"{want_peak:.1f} Hz)")
        if lag != 0:
            fail(f"channel {c}: the decoded audio is shifted by {lag} samples")
        if snr < a.min_snr:
            fail(f"channel {c}: SNR {snr:.1f} dB below {a.min_snr} dB")
        if abs(peak - want_peak) > 2 * rate / m:
            fail(f"channel {c}: tone at {peak:.1f} Hz, expected {want_peak:.1f} Hz")
    if a.silent_tail and float(np.abs(got[:, a.silent_tail:m]).max()) > 1e-3:
        fail(f"audio after sample {a.silent_tail} is not silent (padding expected)")


def riff_chunks(data):
    if data[:4] != b"RIFF" or data[8:12] != b"WAVE":
        fail("not a RIFF/WAVE file")
    if struct.unpack("<I", data[4:8])[0] != len(data) - 8:
        fail("RIFF size does not match the file size")
    chunks, pos = {}, 12
    while pos + 8 <= len(data):
        cid, size = data[pos:pos + 4], struct.unpack("<I", data[pos + 4:pos + 8])[0]
        chunks[cid] = data[pos + 8:pos + 8 + size]
        pos += 8 + size + (size & 1)
    return chunks


def cmd_wav(a):
    src = load_file(a.dump)["audio"]  # [channels, samples]
    channels, samples = src.shape
    chunks = riff_chunks(open(a.wav, "rb").read())
    tag, ch, rate, _, _, bits = struct.unpack("<HHIIHH", chunks[b"fmt "][:16])
    if tag == 0xFFFE:  # WAVE_FORMAT_EXTENSIBLE: the sub-format's first two bytes are the tag
        tag = struct.unpack("<H", chunks[b"fmt "][24:26])[0]
    want_tag, want_bits = (3, 32) if a.format == "float32" else (1, 16)
    if (tag, ch, rate, bits) != (want_tag, channels, a.rate, want_bits):
        fail(f"fmt (tag, channels, rate, bits) is {(tag, ch, rate, bits)}, expected "
             f"{(want_tag, channels, a.rate, want_bits)}")
    if a.format == "float32":
        got = np.frombuffer(chunks[b"data"], "<f4").reshape(-1, channels).T
        if got.shape != src.shape or not np.array_equal(got.view(np.uint32), src.view(np.uint32)):
            fail("float32 samples are not bit-exact")
        print(f"     wav float32: {channels} ch x {samples} samples at {rate} Hz, bit-exact")
        return
    with wave.open(a.wav, "rb") as w:  # Python's own reader for PCM
        if (w.getnchannels(), w.getframerate(), w.getsampwidth(), w.getnframes()) != (channels, a.rate, 2, samples):
            fail(f"wave module reads {w.getparams()}")
        got = np.frombuffer(w.readframes(samples), "<i2").reshape(-1, channels).T
    want = np.clip(src.astype(np.float64), -1, 1) * 32767
    err = np.abs(got - want).max()
    print(f"     wav pcm16: {channels} ch x {samples} samples at {rate} Hz, max |read - x * 32767| = "
          f"{err:.3f} LSB (tolerance 1)")
    if err > 1:
        fail("pcm16 samples more than 1 LSB off")


def png_text(path):
    data, text, pos = open(path, "rb").read(), {}, 8
    while pos < len(data):
        size, cid = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + size]
        if cid == b"iTXt":
            key, rest = body.split(b"\0", 1)
            # compression flag, method, language\0, translated keyword\0, text
            lang_and_rest = rest[2:].split(b"\0", 2)
            text[key.decode("latin-1")] = lang_and_rest[2].decode("utf-8")
        elif cid == b"tEXt":
            key, val = body.split(b"\0", 1)
            text[key.decode("latin-1")] = val.decode("latin-1")
        pos += 12 + size
    return text


def check_png(path, want):
    h, w = want.shape[:2]
    got = decode_rgb(path, w, h)
    if got.shape[0] != 1 or not np.array_equal(got[0], want):
        diff = int(np.abs(got[0].astype(int) - want.astype(int)).max()) if got.shape[0] == 1 else -1
        fail(f"{path}: pixels differ from the input (max |diff| {diff})")


def cmd_frames(a):
    frames = load_file(a.dump)["frames"]
    names = sorted(os.listdir(a.dir))
    want_names = [f"frame_{i:05d}.png" for i in range(frames.shape[0])]
    if names != want_names:
        fail(f"{a.dir} holds {names[:3]}... ({len(names)} files), expected {want_names[:3]}... "
             f"({len(want_names)})")
    for i, name in enumerate(names):
        check_png(os.path.join(a.dir, name), to_u8(frames[i]))
    print(f"     {len(names)} PNG frames {frames.shape[3]}x{frames.shape[2]}, every pixel exact")


def cmd_png(a):
    frame = load_file(a.dump)["frame"]
    check_png(a.png, to_u8(frame))
    print(f"     PNG {frame.shape[2]}x{frame.shape[1]}, every pixel exact")


def cmd_sheet(a):
    t = load_file(a.dump)
    runs = [t[f"run{r}"] for r in range(len(t))]
    gap, gap_value, percents = 2, 200, (10, 50, 90)
    ch = max(r.shape[2] for r in runs)
    cw = max(r.shape[3] for r in runs)
    width, height = 3 * cw + 2 * gap, len(runs) * ch + (len(runs) - 1) * gap
    want = np.full((height, width, 3), gap_value, np.uint8)
    labels = a.labels.split(",") if a.labels else []
    want_text = {"Columns": "frames at 10%, 50% and 90% of each run (rows are runs)"}
    for r, run_ in enumerate(runs):
        count, _, h, w = run_.shape
        idx = [min(count - 1, count * p // 100) for p in percents]
        for c, i in enumerate(idx):
            y0, x0 = r * (ch + gap), c * (cw + gap)
            want[y0:y0 + ch, x0:x0 + cw] = 0
            want[y0:y0 + h, x0:x0 + w] = to_u8(run_[i])
        label = labels[r] + " " if labels else ""
        want_text[f"Row {r + 1}"] = f"{label}(frames {', '.join(map(str, idx))} of {count}, {w}x{h})"
    check_png(a.png, want)
    text = png_text(a.png)
    if text != want_text:
        fail(f"text chunks {text}, expected {want_text}")
    print(f"     contact sheet {width}x{height}: {len(runs)} rows x 3 columns, every pixel exact; "
          f"text {text}")


def main():
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("mp4")
    m.add_argument("clip")
    for k in ("frames", "width", "height", "rate"):
        m.add_argument("--" + k, type=int, required=True)
    m.add_argument("--fps", required=True)
    x = sub.add_parser("pixels")
    x.add_argument("clip")
    x.add_argument("dump")
    x.add_argument("--crf", type=int, required=True)
    x.add_argument("--tol-mean", type=float, required=True)
    x.add_argument("--tol-max", type=int, required=True)
    s = sub.add_parser("audio")
    s.add_argument("clip")
    s.add_argument("dump")
    s.add_argument("--fps", required=True)
    s.add_argument("--samples", type=int, required=True)
    s.add_argument("--min-snr", type=float, required=True)
    s.add_argument("--silent-tail", type=int, default=0)
    w = sub.add_parser("wav")
    w.add_argument("wav")
    w.add_argument("dump")
    w.add_argument("--format", choices=("float32", "pcm16"), required=True)
    w.add_argument("--rate", type=int, required=True)
    g = sub.add_parser("png")
    g.add_argument("png")
    g.add_argument("dump")
    f = sub.add_parser("frames")
    f.add_argument("dir")
    f.add_argument("dump")
    c = sub.add_parser("sheet")
    c.add_argument("png")
    c.add_argument("dump")
    c.add_argument("--labels", default="")
    a = p.parse_args()
    {"mp4": cmd_mp4, "pixels": cmd_pixels, "audio": cmd_audio, "wav": cmd_wav, "png": cmd_png,
     "frames": cmd_frames, "sheet": cmd_sheet}[a.cmd](a)


if __name__ == "__main__":
    main()
