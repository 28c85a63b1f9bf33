#!/usr/bin/env bash
# Prepares .devdeps/: the Debian packages the CMake build needs but the GPU machine's image lacks
# (fmt, nlohmann-json, CLI11, OpenBLAS, GoogleTest, utf8proc), unpacked without installing, pruned
# to about 43 MB so it fits the device tool's carry limit. Run here; then carry `.devdeps` and run
# scripts/device_build.sh there. The folder is git-ignored (.git/info/exclude).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
out=.devdeps
grep -qx '/.devdeps/' .git/info/exclude 2>/dev/null || { mkdir -p .git/info; echo '/.devdeps/' >>.git/info/exclude; }
rm -rf "$out" && mkdir -p "$out/debs"
(cd "$out/debs" && apt-get download libfmt-dev libfmt9 nlohmann-json3-dev libcli11-dev \
  libopenblas-pthread-dev libopenblas0-pthread libgfortran5 libgtest-dev libgmock-dev \
  libutf8proc-dev libutf8proc2)
for f in "$out"/debs/*.deb; do dpkg -x "$f" "$out/root"; done
rm -rf "$out/debs" "$out/root/usr/share/doc" "$out/root/usr/share/man" "$out/root/usr/share/lintian"
# Only GoogleTest is linked statically; OpenBLAS's static archives and LAPACK are not needed.
find "$out/root" -path '*openblas-pthread*' \( -name '*.a' -o -name 'liblapack*' \) -delete
du -sh "$out"
