#!/usr/bin/env bash
# Installs everything avdit needs on a fresh Debian 12 machine. Safe to run again: it installs
# only what is missing, so a rerun takes seconds.
#
#   scripts/setup.sh          install only (this is what .ci/run calls)
#   scripts/setup.sh --run    install, then configure + build (CMake, Ninja) and run MAIN_JOB
#
# What it installs:
#   1. Debian packages (APT_PACKAGES below); apt-get is skipped when all are present.
#   2. A Python venv at .venv with the pinned PY_PACKAGES (interop checks, plots).
#   3. Header-only C++ packages for the CUDA build, unpacked from PyPI wheels into third_party/:
#        third_party/cudnn_frontend/include      (cudnn_frontend.h; PyPI nvidia-cudnn-frontend)
#        third_party/cutlass/include             (cutlass/, cute/; PyPI nvidia-cutlass)
#        third_party/cutlass/tools/util/include  (cutlass/util/...)
#      and third_party/paths.cmake naming those folders.
# The CUDA toolkit (nvcc, cuBLAS, cuDNN, NCCL) is expected preinstalled; it is only reported.
#
# Environment: BUILD_DIR (default build), JOBS (build jobs, default 2),
#              AVDIT_CUDA (ON, OFF or AUTO = on when nvcc is found; default AUTO),
#              PYTHON (interpreter for the venv; default /usr/bin/python3).
set -euo pipefail

BUILD_DIR=${BUILD_DIR:-build}
# The main job that --run ends with, run from the repo root: both tiny pipelines (`avdit init
# --pipeline`, from the tiny models of the golden fixtures beside the repo) from a prompt to an mp4
# with sound, printing each stage's time and memory and the SHA-256 of the latents, frames,
# waveform and mp4 (the same on every machine for the same seed).
MAIN_JOB="rm -rf out/tiny-h3 out/tiny-magi2 && mkdir -p out && \
  $BUILD_DIR/avdit -q init --pipeline h3 --size tiny --out out/tiny-h3 && \
  $BUILD_DIR/avdit -q init --pipeline magi2 --size tiny --out out/tiny-magi2 && \
  $BUILD_DIR/avdit generate --model out/tiny-h3 --prompt 'A red fox runs through fresh snow at dawn.' \
    --frames 39 --height 64 --width 96 --steps 8 --seed 46 --cache-dir out/cache --out out/h3-tiny.mp4 && \
  $BUILD_DIR/avdit generate --model out/tiny-magi2 --prompt 'A red fox runs through fresh snow at dawn.' \
    --seconds 2 --height 64 --width 96 --steps 8 --seed 46 --cache-dir out/cache --out out/magi2-tiny.mp4"

APT_PACKAGES=(
  g++ cmake ninja-build pkg-config python3-venv
  libopenblas-dev libcli11-dev nlohmann-json3-dev libfmt-dev
  libpng-dev libsndfile1-dev libavformat-dev libavcodec-dev libavutil-dev libswscale-dev
  libswresample-dev ffmpeg libcurl4-openssl-dev libopenmpi-dev openmpi-bin
  libgtest-dev libgmock-dev libbenchmark-dev clang-14 libclang-rt-14-dev libutf8proc-dev
)
PY_PACKAGES=(safetensors==0.8.0 numpy==2.4.6 ml_dtypes==0.6.0 matplotlib==3.11.2)
CUDNN_FRONTEND=nvidia-cudnn-frontend==1.32.0
CUTLASS=nvidia-cutlass==4.2.0.0

JOBS=${JOBS:-2}
RUN=0
for arg in "$@"; do
  case "$arg" in
    --run) RUN=1 ;;
    -h | --help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    *) echo "setup.sh: unknown argument '$arg' (try --help)" >&2; exit 2 ;;
  esac
done

cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT=$PWD
say() { printf '[setup] %s\n' "$*"; }
t0=$SECONDS

# ---- 1. Debian packages ------------------------------------------------------------------------
missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if ((${#missing[@]})); then
  SUDO=()
  if [ "$(id -u)" -ne 0 ]; then SUDO=(sudo); fi
  say "apt: installing ${#missing[@]} missing package(s): ${missing[*]}"
  "${SUDO[@]}" apt-get update -q
  "${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive \
    apt-get install -y -q --no-install-recommends "${missing[@]}"
else
  say "apt: all ${#APT_PACKAGES[@]} packages already installed, apt-get skipped"
fi

# ---- 2. Python venv ----------------------------------------------------------------------------
if [ -z "${PYTHON:-}" ]; then
  if [ -x /usr/bin/python3 ]; then PYTHON=/usr/bin/python3; else PYTHON=python3; fi
fi
VPY=.venv/bin/python
if [ -e .venv ] && ! "$VPY" -c pass 2>/dev/null; then
  say "venv: .venv is broken, recreating it"
  rm -rf .venv
fi
if [ ! -e .venv ]; then
  say "venv: creating .venv with $PYTHON ($("$PYTHON" --version 2>&1))"
  "$PYTHON" -m venv .venv
fi
# Exits 0 when every pinned package is installed at its pinned version.
pins_ok() {
  "$VPY" - "$@" <<'EOF'
import sys
from importlib.metadata import version, PackageNotFoundError
for spec in sys.argv[1:]:
    name, want = spec.split("==")
    try:
        if version(name) != want:
            sys.exit(1)
    except PackageNotFoundError:
        sys.exit(1)
EOF
}
if pins_ok "${PY_PACKAGES[@]}"; then
  say "venv: ${PY_PACKAGES[*]} already installed"
else
  say "venv: pip install ${PY_PACKAGES[*]}"
  "$VPY" -m pip install --disable-pip-version-check -q "${PY_PACKAGES[@]}"
fi

# ---- 3. C++ headers from PyPI wheels -----------------------------------------------------------
# install_headers PKG==VER DEST SENTINEL WHEEL_DIR:DEST_SUBDIR...
# Downloads the wheel (no dependencies), copies the given folders out of it into
# third_party/DEST, and records PKG==VER in third_party/DEST/VERSION. Skipped when VERSION
# already matches and SENTINEL (a file under DEST) exists. Returns 1 if the wheel lacks a folder.
install_headers() {
  local spec=$1 dest=third_party/$2 sentinel=$3
  shift 3
  if [ "$(cat "$dest/VERSION" 2>/dev/null)" = "$spec" ] && [ -f "$dest/$sentinel" ]; then
    say "third_party: $spec already in $dest"
    return 0
  fi
  local tmp
  tmp=$(mktemp -d "${TMPDIR:-/tmp}/avdit-wheel.XXXXXX")
  say "third_party: downloading $spec"
  "$VPY" -m pip download --disable-pip-version-check -q --no-deps --only-binary=:all: \
    -d "$tmp/whl" "$spec"
  say "third_party: unpacking $(basename "$tmp"/whl/*.whl) into $dest"
  if ! "$VPY" - "$tmp"/whl/*.whl "$tmp/out" "$@" <<'EOF'; then
import os, shutil, sys, zipfile
wheel, out, maps = sys.argv[1], sys.argv[2], sys.argv[3:]
with zipfile.ZipFile(wheel) as z:
    names = z.namelist()
    for m in maps:
        src, dst = m.split(":")
        members = [n for n in names if n.startswith(src + "/") and not n.endswith("/")]
        if not members:
            sys.exit(f"{os.path.basename(wheel)} has no {src}/")
        for n in members:
            target = os.path.join(out, dst, n[len(src) + 1:])
            os.makedirs(os.path.dirname(target), exist_ok=True)
            with z.open(n) as f, open(target, "wb") as g:
                shutil.copyfileobj(f, g)
        print(f"[setup]   {len(members):5d} files  {src}/ -> {dst}/")
    for n in names:  # keep the licences next to the headers
        if ".dist-info/" in n and "LICENSE" in os.path.basename(n).upper():
            with z.open(n) as f, open(os.path.join(out, os.path.basename(n)), "wb") as g:
                shutil.copyfileobj(f, g)
EOF
    rm -rf "$tmp"
    return 1
  fi
  echo "$spec" >"$tmp/out/VERSION"
  rm -rf "$dest"
  mkdir -p third_party
  mv "$tmp/out" "$dest"
  rm -rf "$tmp"
  [ -f "$dest/$sentinel" ] || { say "third_party: $dest/$sentinel is missing"; return 1; }
}

install_headers "$CUDNN_FRONTEND" cudnn_frontend include/cudnn_frontend.h include:include
have_cutlass=1
install_headers "$CUTLASS" cutlass include/cutlass/gemm/group_array_problem_shape.hpp \
  cutlass_library/source/include:include \
  cutlass_library/source/tools/util/include:tools/util/include || {
  have_cutlass=0
  say "third_party: WARNING: $CUTLASS carries no usable CUTLASS C++ headers; CUTLASS is off"
}
{
  echo "# Written by scripts/setup.sh: header-only packages unpacked from PyPI wheels."
  echo "set(AVDIT_CUDNN_FRONTEND_INCLUDE_DIR \"$ROOT/third_party/cudnn_frontend/include\")"
  if ((have_cutlass)); then
    echo "set(AVDIT_CUTLASS_INCLUDE_DIRS \"$ROOT/third_party/cutlass/include;$ROOT/third_party/cutlass/tools/util/include\")"
  else
    echo "set(AVDIT_CUTLASS_INCLUDE_DIRS \"\")"
  fi
} >third_party/paths.cmake.tmp
mv third_party/paths.cmake.tmp third_party/paths.cmake

# ---- report ------------------------------------------------------------------------------------
if ! command -v nvcc >/dev/null && [ -x /usr/local/cuda/bin/nvcc ]; then
  export PATH=/usr/local/cuda/bin:$PATH
fi
if command -v nvcc >/dev/null; then
  say "cuda: $(nvcc --version | tail -n 2 | head -n 1) ($(command -v nvcc))"
else
  say "cuda: nvcc not found; the build will be CPU-only"
fi
say "done in $((SECONDS - t0)) s: apt packages, .venv ($("$VPY" --version 2>&1)), third_party/"

# ---- --run: build and run the main job ---------------------------------------------------------
if ((RUN)); then
  say "build: cmake -S . -B $BUILD_DIR -G Ninja -DAVDIT_CUDA=${AVDIT_CUDA:-AUTO}"
  cmake -S . -B "$BUILD_DIR" -G Ninja -DAVDIT_CUDA="${AVDIT_CUDA:-AUTO}"
  say "build: cmake --build $BUILD_DIR -j $JOBS"
  cmake --build "$BUILD_DIR" -j "$JOBS"
  say "main job: $MAIN_JOB"
  eval "$MAIN_JOB"
fi
