#!/usr/bin/env bash
# GPU time by kernel of any CUDA program on a machine without nsys/ncu: builds libkernprof (a CUPTI
# injection library, kernprof.cpp) into /tmp when missing or stale, runs CMD with it injected and
# writes the markdown table to OUT.md; exits with CMD's status. See README.md.
#   bench/kernprof/kernprof.sh OUT.md -- CMD ARGS...
# Env: KERNPROF_CUPTI (a libcupti.so* to use instead of searching), CUDA_HOME (searched first),
#      KERNPROF_TOP, KERNPROF_CSV (passed through to the library).
set -uo pipefail
src=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/kernprof.cpp
if [[ $# -lt 3 || $2 != -- ]]; then
  echo "usage: $0 OUT.md -- CMD ARGS..." >&2
  exit 2
fi
out=$(realpath -m "$1")  # absolute: CMD may change directory before it exits
shift 2

# Where CUPTI may live: CUDA toolkits, and pip's CUDA wheels (site-packages/nvidia/*/), asked of
# CMD's own interpreter when CMD is a python, so a venv's torch is found.
toolkits=()
[[ -n ${CUDA_HOME:-} ]] && toolkits+=("$CUDA_HOME")
for d in /usr/local/cuda /usr/local/cuda-*; do [[ -d $d ]] && toolkits+=("$d"); done
is_py=0
[[ $(basename "$1") == python* ]] && is_py=1
py=python3
((is_py)) && py=$1
site=$("$py" -c 'import nvidia,os;print(os.path.dirname(nvidia.__path__[0]))' 2>/dev/null)
wheels=()
if [[ -n $site ]]; then for d in "$site"/nvidia/*/; do wheels+=("${d%/}"); done; fi
# A python CMD most likely runs PyTorch, which may load its wheel's libcupti itself: use that one
# so the process holds a single CUPTI. Anything else gets the toolkit's.
if ((is_py)); then
  lib_roots=("${wheels[@]}" "${toolkits[@]}")
else
  lib_roots=("${toolkits[@]}" "${wheels[@]}")
fi
# Headers: the toolkit's first (kernprof.cpp names CUpti_ActivityKernel10, CUDA 13's newest).
inc_roots=("${toolkits[@]}" "${wheels[@]}")

first_with() {  # FILE DIR...: the first DIR holding FILE
  local f=$1 d
  shift
  for d; do [[ -e $d/$f ]] && { echo "$d"; return 0; }; done
  return 1
}
inc_dirs=() lib_dirs=()
for r in "${inc_roots[@]}"; do inc_dirs+=("$r/include" "$r/extras/CUPTI/include"); done
for r in "${lib_roots[@]}"; do lib_dirs+=("$r/lib64" "$r/lib" "$r/extras/CUPTI/lib64"); done
searched="searched ${toolkits[*]:-no /usr/local/cuda*}${site:+ and $site/nvidia/*}"
includes=()
for h in cupti_activity.h cuda.h builtin_types.h; do
  d=$(first_with "$h" "${inc_dirs[@]}") ||
    { echo "kernprof.sh: no $h found ($searched); set CUDA_HOME to a CUDA toolkit" >&2; exit 2; }
  includes+=("-I$d")
done
lib=${KERNPROF_CUPTI:-}
if [[ -z $lib ]]; then
  for d in "${lib_dirs[@]}"; do
    for f in "$d"/libcupti.so "$d"/libcupti.so.*; do [[ -e $f ]] && lib=$f && break 2; done
  done
fi
if [[ -n ${KERNPROF_CUPTI:-} && ! -e $lib ]]; then
  echo "kernprof.sh: KERNPROF_CUPTI=$lib does not exist" >&2
  exit 2
fi
if [[ -z $lib ]]; then
  echo "kernprof.sh: no libcupti.so found ($searched); set KERNPROF_CUPTI=/path/libcupti.so.N" >&2
  exit 2
fi

# One build per CUPTI library; its directory goes in the RUNPATH, so LD_LIBRARY_PATH stays as the
# program had it (setting it could swap the program's own CUDA libraries for the toolkit's).
so=/tmp/libkernprof-$(printf %s "$lib" | cksum | cut -d' ' -f1).so
if [[ ! -f $so || $src -nt $so ]]; then
  command -v g++ >/dev/null || { echo "kernprof.sh: g++ not found (to build $so)" >&2; exit 2; }
  if ! g++ -O2 -shared -fPIC -std=c++17 "$src" "${includes[@]}" "$lib" \
    -Wl,-rpath,"$(dirname "$lib")" -o "$so.tmp.$$" || ! mv "$so.tmp.$$" "$so"; then
    rm -f "$so.tmp.$$"
    echo "kernprof.sh: building $so against $lib failed" >&2
    exit 1
  fi
fi
echo "kernprof.sh: $so (CUPTI $lib) -> $out" >&2

rm -f "$out"
CUDA_INJECTION64_PATH=$so KERNPROF_OUT=$out "$@"
rc=$?
[[ -s $out ]] || echo "kernprof.sh: no report in $out (no CUDA in CMD? killed? _exit?)" >&2
exit $rc
