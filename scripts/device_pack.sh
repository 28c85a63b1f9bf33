#!/usr/bin/env bash
# Packs what a GPU-machine build needs but git does not hold into one compressed file,
# .carry/deps.tar.xz (about 22 MB, under the device tool's 64 MiB carry limit): the unpacked
# Debian -dev packages (.devdeps, from scripts/device_deps.sh), the PyPI headers of third_party/
# (CUTLASS, cudnn-frontend, from scripts/setup.sh) and the goldens and reference configs of
# ../shared (which the device tool does not send). Run here once per session, then name `.carry`
# in the call's carry list; scripts/device_build.sh unpacks it there.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
[ -d .devdeps ] || scripts/device_deps.sh
[ -d third_party/cutlass ] || { echo "no third_party/: run scripts/setup.sh first" >&2; exit 2; }
shared=$(cd ../shared && pwd)
grep -qx '/.carry/' .git/info/exclude || echo '/.carry/' >>.git/info/exclude
mkdir -p .carry
tar -cJf .carry/deps.tar.xz.tmp .devdeps third_party -C "$(dirname "$shared")" \
  "$(basename "$shared")/golden" "$(basename "$shared")/reference-configs"
mv .carry/deps.tar.xz.tmp .carry/deps.tar.xz
du -sh .carry/deps.tar.xz
