#!/usr/bin/env bash
# Packs the gpu test executables with the shared libraries the device image lacks (fmt, OpenBLAS
# and its Fortran runtime), so they can be built here and carried to the GPU machine, whose image
# has CUDA 13 but none of the Debian -dev packages the CMake configure needs.
# Usage: tests/gpu/pack_for_device.sh BUILD_DIR [OUT_DIR]   (OUT_DIR defaults to BUILD_DIR/device)
# There: LD_LIBRARY_PATH=OUT_DIR/lib:/usr/local/cuda/lib64 OUT_DIR/ops_cuda_test
set -euo pipefail
build=${1:?usage: pack_for_device.sh BUILD_DIR [OUT_DIR]}
out=${2:-$build/device}
rm -rf "$out"
mkdir -p "$out/lib"
shopt -s nullglob
tests=()
for src in "$(dirname "$0")"/*_test.cpp; do
  name=$(basename "$src" .cpp)
  [[ -x "$build/$name" ]] || { echo "missing $build/$name: build it first" >&2; exit 1; }
  tests+=("$name")
  strip -o "$out/$name" "$build/$name"  # debug info would not fit the carry limit
done
# glibc, libstdc++ and the CUDA libraries come from the device image; everything else travels.
keep='^(linux-vdso|ld-linux|libc\.|libm\.|libdl\.|libpthread\.|librt\.|libstdc\+\+|libgcc_s|libcudart|libcublas|libcublasLt)'
for name in "${tests[@]}"; do
  ldd "$build/$name" | awk '/=> \// {print $1, $3}' | while read -r lib path; do
    [[ $lib =~ $keep ]] || cp -Lu "$path" "$out/lib/$lib"
  done
done
du -sh "$out"
ls -l "$out" "$out/lib"
