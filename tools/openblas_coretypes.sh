#!/usr/bin/env bash
# Prints up to N (default 2) OpenBLAS core types this CPU can run whose GEMM kernels differ from the
# ones OpenBLAS picks by itself here, one per line, for OPENBLAS_CORETYPE (read when the library
# loads). CI reruns the numeric tests under them, so that a result which holds only for this CPU's
# kernels fails on this machine too. Prints nothing when OpenBLAS is not installed.
set -euo pipefail
want="${1:-2}"

own="$(python3 -c '
import ctypes
lib = ctypes.CDLL("libopenblas.so.0")
lib.openblas_get_corename.restype = ctypes.c_char_p
print(lib.openblas_get_corename().decode())' 2>/dev/null)" || exit 0

# Kernel families: core types of one family share their sgemm/dgemm micro-kernels (OpenBLAS's
# kernel/x86_64/KERNEL.<core> files; their blocking may still differ), so a type from another family
# tests more: other vector widths, FMA or none.
family() {
  case "${1,,}" in
    skylakex | cooperlake | sapphirerapids) echo avx512 ;;
    haswell | zen) echo avx2-fma ;;
    sandybridge) echo avx ;;
    *) echo "${1,,}" ;;
  esac
}

flags=" $(grep -m1 '^flags' /proc/cpuinfo | cut -d: -f2) "
has() { local f; for f in "$@"; do [[ "$flags" == *" $f "* ]] || return 1; done; }

# Candidates, most different from one another first, with the instructions each one's kernels use.
n=0
for candidate in "Haswell avx2 fma" "Sandybridge avx" "SkylakeX avx512f avx512bw avx512dq avx512vl" "Nehalem sse4_2"; do
  read -r core needs <<<"$candidate"
  # shellcheck disable=SC2086  # the instruction list is split on purpose
  has $needs || continue
  [[ "$(family "$core")" == "$(family "$own")" ]] && continue
  echo "$core"
  n=$((n + 1))
  ((n < want)) || break
done
