#!/usr/bin/env bash
# FlashAttention-4 for bench/peers/attention_peer.py --fa4-site, on a GPU machine with no network.
# The cu13 library wheel of nvidia-cutlass-dsl (~92 MB) is larger than one carry (64 MiB), so the
# wheels travel as two folders, each one carry, stashed on the warm machine, then joined, checked
# and installed:
#   here:     scripts/fa4_site.sh fetch              .whl/fa4a (part 1, the sha256, the small wheels)
#                                                    and .whl/fa4b (part 2)
#   device:   scripts/fa4_site.sh stash .whl/fa4a    (a call carrying .whl/fa4a)
#             scripts/fa4_site.sh install build-fa4/site .whl/fa4b
#                                                    (the next call, carrying .whl/fa4b, while the
#                                                    machine is still warm): join, check the sha256,
#                                                    pip install --no-deps --target DIR
set -euo pipefail
# build-fa4/ is ignored by git and so kept by the device between calls (its README); /tmp may not be.
stash=${FA4_STASH:-$PWD/build-fa4/stash}
cmd=${1:-}
case "$cmd" in
  fetch)
    dir=.whl/fa4a
    mkdir -p "$dir" .whl/fa4b
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' EXIT
    # The device's python3 is 3.12 (KINDS.md); no dependencies beyond what the torch image has.
    pip download --no-deps --only-binary=:all: --python-version 3.12 --platform manylinux_2_28_x86_64 -d "$tmp" \
      flash-attn-4==4.0.0b36 nvidia-cutlass-dsl==4.8.1 nvidia-cutlass-dsl-libs-base==4.8.1 \
      nvidia-cutlass-dsl-libs-core==4.8.1 nvidia-cutlass-dsl-libs-cu13==4.8.1 "quack-kernels>=0.5.3" "apache-tvm-ffi>=0.1.11,<0.2" \
      torch-c-dlpack-ext einops
    big=$(ls "$tmp"/nvidia_cutlass_dsl_libs_cu13-*.whl)
    (cd "$tmp" && sha256sum "$(basename "$big")") > "$dir/libs_cu13.sha256"
    split -b 46m "$big" "$dir/libs_cu13.part."
    rm "$big"
    mv "$dir"/libs_cu13.part.ab .whl/fa4b/
    mv "$tmp"/*.whl "$dir"/
    du -sh "$dir" .whl/fa4b
    ;;
  stash)
    dir=${2:?usage: fa4_site.sh stash CARRIED_DIR}
    mkdir -p "$stash"
    [ -d "$dir" ] || { echo "fa4_site.sh stash: no $dir in this call's tree (carry it)" >&2; exit 2; }
    cp -n "$dir"/* "$stash"/ 2>/dev/null || true
    ls -la "$stash"
    ;;
  install)
    target=$(realpath -m "${2:?usage: fa4_site.sh install DIR [CARRIED_DIR]}")  # the cd below
    dir=${3:-}
    mkdir -p "$stash"
    if [ -n "$dir" ]; then cp -n "$dir"/* "$stash"/ 2>/dev/null || true; fi
    cd "$stash"
    [ -f libs_cu13.sha256 ] || { echo "fa4_site.sh install: libs_cu13.sha256 missing from $stash: stash the small files first" >&2; exit 2; }
    whl=$(awk '{print $2}' libs_cu13.sha256)
    cat libs_cu13.part.* > "$whl.tmp" && mv "$whl.tmp" "$whl"
    sha256sum -c libs_cu13.sha256 || { echo "fa4_site.sh install: $whl does not match its sha256; a part is missing or cut short ($(ls libs_cu13.part.* | tr '\n' ' '))" >&2; exit 2; }
    python3 -m pip install --no-deps --no-index --target "$target" ./*.whl
    ;;
  *)
    echo "usage: fa4_site.sh fetch | stash CARRIED_DIR | install TARGET [CARRIED_DIR]" >&2
    exit 2
    ;;
esac
