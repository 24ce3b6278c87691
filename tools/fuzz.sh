#!/usr/bin/env bash
# Fuzzes ember's file readers: builds the libFuzzer targets of tests/fuzz/ with Debian's clang
# (coverage, ASan, UBSan) in build-fuzz/ and runs each for RUNS executions (default 10^6) on its
# committed seed corpus. New inputs go to build-fuzz/corpus/<target>/, crashes to
# build-fuzz/crashes/<target>-*; a crash's input belongs in a regression test. Not run in CI.
#   tools/fuzz.sh [RUNS] [target...]     targets: safetensors idx cifar10 checkpoint sharded_checkpoint
#                                        optimizer_state image (default: all)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

runs="${1:-1000000}"
(($#)) && shift
targets=("$@")
((${#targets[@]})) || targets=(safetensors idx cifar10 checkpoint sharded_checkpoint optimizer_state image)

# clang and its libFuzzer/sanitizer runtime, beside the build's own packages.
./ember deps
if ! command -v clang++ >/dev/null || ! ls /usr/lib/llvm-*/lib/clang/*/lib/linux/libclang_rt.fuzzer-x86_64.a >/dev/null 2>&1; then
  sudo=(); [[ "$(id -u)" -ne 0 ]] && sudo=(sudo)
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends clang libclang-rt-14-dev
fi

dir=build-fuzz
if [[ ! -f "$dir/build.ninja" ]]; then
  # CPU only, no OpenMP: the readers need none, and the build stays small. Gloo stays: the sharded
  # checkpoint target writes its seed from a ZeRO run on a group of one. -D_Bool=bool:
  # glibc's <sys/platform/x86.h> (cpu/gemm_deterministic.cpp) spells bool as C's _Bool, which only
  # g++ takes in C++.
  CC=clang CXX=clang++ meson setup "$dir" -Dfuzzing=true -Dtests=false -Dcuda=disabled \
    -Dopenmp=disabled -Db_sanitize=address,undefined -Db_lundef=false \
    -Dcpp_args="-fsanitize=fuzzer-no-link -fno-sanitize-recover=all -D_Bool=bool"
fi
ninja -C "$dir" "${targets[@]/#/tests/fuzz/fuzz_}"

mkdir -p "$dir/crashes"
status=0
summary=()
for t in "${targets[@]}"; do
  mkdir -p "$dir/corpus/$t"
  log="$dir/fuzz_$t.log"
  echo "=== fuzz_$t: $runs runs (log: $log)"
  # A finding stops the target (exit non-zero) with the input saved under crashes/.
  if "$dir/tests/fuzz/fuzz_$t" -runs="$runs" -artifact_prefix="$dir/crashes/$t-" -print_final_stats=1 \
      "$dir/corpus/$t" "tests/fuzz/corpus/$t" >"$log" 2>&1; then
    summary+=("fuzz_$t: $(grep -o 'Done [0-9]* runs in [0-9]* second(s)' "$log" | tail -n 1), clean")
  else
    status=1
    summary+=("fuzz_$t: FAILED, see $log and $dir/crashes/")
    tail -n 30 "$log"
  fi
done
printf '%s\n' "${summary[@]}"
exit "$status"
