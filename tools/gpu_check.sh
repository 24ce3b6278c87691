#!/usr/bin/env bash
# Every GPU check of ember in one script, for a machine with an NVIDIA GPU, nvcc, CMake, Ninja, meson
# and PyTorch but none of the Debian -dev packages (a lent GPU machine):
#   build    build for this GPU's compute capability only, in build-gpu/
#   test     the `cuda` suite: the op table, gradcheck, conv, norms, optimizers, AMP, NCCL, ... on CUDA
#   dist     the `dist` suite (Gloo ranks, NCCL init) and bench_comm over NCCL on this GPU (world of one)
#   train    examples/train on the GPU for mlp, cnn and resnet18 in every --precision mode, beside the
#            same runs on the CPU (fp32, two seeds each side: the noise), as a table of top-1
#   bench    bench_gemm, bench_conv, bench_ops and bench_train on the GPU cases (ember beside raw
#            cuBLASLt/cuDNN and the device copy, in one run)
#   compare  bench/torch_compare.py on the same cases (PyTorch eager, and torch.compile for the
#            ImageNet-sized training steps), then bench/report.py over the bench folder
#   compile  step time eager against captured (train::CompiledStep, CUDA graphs) for SmallCNN at batch
#            128, ResNet-18 at 32 and ResNet-50 at 32 and 256, beside PyTorch eager's, as a table
#   nvtx     one ResNet-50 training step under ncu, filtered by ember's profiler ranges (--nvtx):
#            the kernels of one block's forward and of one conv's backward, per range
#   python   the Python package's pytest suite under this machine's python3 and its PyTorch, against
#            the package in BUILD_DIR/python (a bundle's is built for the GPU image's Python: see
#            tools/gpu_bundle.sh): CUDA tensors, DLPack with PyTorch's CUDA tensors both ways, and
#            `import ember; import torch` with PyTorch's CUDA wheels
# What each step runs of the CUDA paths that only a GPU checks:
#   test     events created on their stream's device (test_tensor), collectives and DDP refused in a
#            capture, a failed capture's gradients dropped, eager and captured steps equal bit for bit
#            (test_compiled_step), the GEMM workspace made before a capture, uint8 atomics and split
#            reductions (ops), NCCL at world size 1 ordered after a side stream (test_dist, test_zero),
#            a checkpointed region's recompute replaying dropout's Philox draws on CUDA (test_checkpoint)
#   dist     the NCCL group's own store keys and the comm thread's stream ordering (DDP and ZeRO)
#   compile  graphs that keep what the step dropped, workspaces freed with their graphs and streams
#   bench    the folded broadcast matmul (bench_train's ViT and ResNet steps), the split reductions,
#            the step peaks of ResNet-50 and ViT-B/16 with their blocks checkpointed
# Multi-GPU paths (an event recorded on cuda:k, one context per rank) need two GPUs: none of these.
# Usage: tools/gpu_check.sh [--bundle FILE] OUTDIR [STEP...]   (no step: all of them, in that order)
#   --bundle FILE: run a build made on another machine and packed by tools/gpu_bundle.sh (carried to
#   the GPU machine; unpacked into $TMPDIR/ember-gpu-bundle) instead of building here: nothing is compiled, the suites run through
#   tools/run_tests.py, and the data set is the bundle's.
# Narrower runs (a lent machine's first call): EMBER_GPU_CHECK_MODELS and EMBER_GPU_CHECK_PRECISIONS
# (space-separated) choose the train step's runs, EMBER_GPU_CHECK_BENCHES the bench binaries
# (gemm conv ops train) and EMBER_GPU_CHECK_<BINARY>_FILTER (GEMM, CONV, ...) a binary's cases;
# EMBER_GPU_CHECK_COMPARE_FILTER the PyTorch cases of the compare step (EMBER_GPU_CHECK_TORCH_COMPILE=0
# leaves out its torch.compile runs), EMBER_GPU_CHECK_COMPILE_SPECS the compile step's model:batch list,
# EMBER_GPU_CHECK_BENCH_EXTRAS=0 the bench step's checkpointing and ZeRO-3 offload runs.
# Every log and JSON goes to OUTDIR, and OUTDIR/summary.txt gets one line per step. Each step runs
# under its own time limit (EMBER_GPU_CHECK_<STEP>_S, seconds) so one failure cannot eat the rest,
# and each step alone builds first (ninja does nothing when an earlier step already built).
#
# Dependencies: unpack the Debian packages where apt works (tools/unpack_deps.sh .deps), carry .deps
# to the GPU machine; it is used when present (or EMBER_DEPS_ROOT names another folder). cuDNN and
# NCCL come from the CUDA toolkit, else from PyTorch's nvidia-* wheels.
# Without a GPU it is a dry run: it builds with the toolkit for sm_${EMBER_GPU_ARCH:-90}, runs the
# cuda suite (every case reports skipped), and skips the steps that need a device, saying so.
#
# On a lent machine (10 minutes a command, a machine that goes back 30 s after a call), run the steps
# in few calls, each writing where the files come back from:
#   tools/gpu_check.sh $OUT build test; tools/gpu_check.sh $OUT train; ... then bench, compare.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT="$PWD"

ALL_STEPS=(build test dist train bench compare compile nvtx python)
# examples/train --precision
read -ra PRECISIONS <<<"${EMBER_GPU_CHECK_PRECISIONS:-fp32 tf32 amp_fp16 amp_bf16 naive_fp16 naive_bf16 pure_bf16}"
read -ra TRAIN_MODELS <<<"${EMBER_GPU_CHECK_MODELS:-mlp cnn resnet18}"
declare -A LIMIT_S=([build]=480 [test]=420 [dist]=240 [train]=420 [bench]=540 [compare]=480 [compile]=420 [nvtx]=300 [python]=240)
BUILD_DIR="${BUILD_DIR:-build-gpu}"  # the steps inherit the driver's (a bundle's build)

usage() { sed -n '2,/^set -uo/{/^set -uo/d;s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}"; }
log() { printf 'gpu_check: %s\n' "$*" >&2; }

# ---- the machine: the GPU's compute capability (empty without one), the dependencies' paths

gpu_arch() {
  command -v nvidia-smi >/dev/null 2>&1 || return 0
  nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -n 1 | tr -d '. \r' | grep -E '^[0-9]+$'
}

# Puts the unpacked Debian packages on the compiler's, linker's and pkg-config's search paths.
use_deps_root() {
  local root
  root="$(cd "$1" && pwd)"
  export EMBER_NO_DEPS=1
  export CPATH="$root/usr/include:$root/usr/include/x86_64-linux-gnu:$root/usr/include/eigen3${CPATH:+:$CPATH}"
  export PKG_CONFIG_PATH="$root/usr/lib/x86_64-linux-gnu/pkgconfig:$root/usr/share/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
  export LIBRARY_PATH="$root/usr/lib/x86_64-linux-gnu:$root/usr/lib${LIBRARY_PATH:+:$LIBRARY_PATH}"
  export LD_LIBRARY_PATH="$root/lib/x86_64-linux-gnu:$root/usr/lib/x86_64-linux-gnu:$root/usr/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  export PKG_CONFIG_SYSROOT_DIR="$root"  # the packages' .pc files name /usr as their prefix
  export CMAKE_PREFIX_PATH="$root/usr${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}"  # Gloo's CMake config
  DATA_DIR="$root/usr/share/datasets/fashion-mnist"
}

# The folder of a package of the nvidia-* wheels PyTorch brings (nvidia.cudnn), if any.
wheel_dir() {
  python3 -c "import importlib; m = importlib.import_module('nvidia.$1'); print(list(m.__path__)[0])" 2>/dev/null
}

# A library from its nvidia-* wheel when the toolkit has none (use_wheel_library cudnn / nccl),
# shaped as Meson finds it (include/ and lib/libNAME.so; the wheel has only the versioned
# libNAME.so.N): a -DNAME-root for ./ember's EMBER_MESON_ARGS, and the wheel's lib/ on the loader's
# path (cuDNN opens its engine libraries from there).
use_wheel_library() {
  local name="$1" nvcc toolkit dir shim lib
  nvcc="$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)"
  toolkit="$(dirname "$(dirname "$(readlink -f "$nvcc")")")"
  [[ -f "$toolkit/include/$name.h" ]] && return 0
  dir="$(wheel_dir "$name")" || { log "no $name in $toolkit or in a wheel: $2 will be unavailable"; return 0; }
  shim="$ROOT/$BUILD_DIR-deps/$name"
  mkdir -p "$shim/lib"
  ln -sfn "$dir/include" "$shim/include"
  for lib in "$dir"/lib/lib"$name"*.so.*; do ln -sfn "$lib" "$shim/lib/$(basename "$lib")"; done
  ln -sfn "$(ls "$dir"/lib/lib"$name".so.* | head -n 1)" "$shim/lib/lib$name.so"
  log "$name from the wheel in $dir"
  export EMBER_MESON_ARGS="${EMBER_MESON_ARGS:+$EMBER_MESON_ARGS }-D$name-root=$shim"
  export LD_LIBRARY_PATH="$dir/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
}

# A bundle of tools/gpu_bundle.sh: its build answers at the path it was built at (meson's test list
# and the test binaries name that checkout) through links; its libraries, and CUDA's own libraries
# from the toolkit or PyTorch's nvidia-* wheels, go on the loader's path.
use_bundle() {
  local origin build_name lib dir missing unpacked
  if [[ -f "$BUNDLE" ]]; then
    unpacked="${TMPDIR:-/tmp}/ember-gpu-bundle"  # outside the checkout, which a device call sends
    rm -rf "$unpacked" && mkdir -p "$unpacked" && tar -C "$unpacked" -xJf "$BUNDLE" ||
      { log "cannot unpack $BUNDLE"; exit 2; }
    BUNDLE="$unpacked"
  fi
  [[ -f "$BUNDLE/origin" ]] || { log "$BUNDLE is no bundle of tools/gpu_bundle.sh (no origin file)"; exit 2; }
  BUNDLE="$(cd "$BUNDLE" && pwd)"
  read -r origin build_name <"$BUNDLE/origin"
  if [[ "$origin" != "$ROOT" ]]; then
    [[ -e "$origin" && "$(readlink -f "$origin")" != "$ROOT" ]] &&
      { log "the bundle was built at $origin, which exists here and is not this checkout"; exit 2; }
    mkdir -p "$(dirname "$origin")" && ln -sfn "$ROOT" "$origin"
  fi
  BUILD_DIR="$build_name"
  [[ -e "$BUILD_DIR" && ! -L "$BUILD_DIR" ]] && { log "$ROOT/$BUILD_DIR exists: move it away to run the bundle"; exit 2; }
  ln -sfn "$BUNDLE/build" "$BUILD_DIR"
  export LD_LIBRARY_PATH="$BUNDLE/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  DATA_DIR="$BUNDLE/data"
  local roots=(/usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib)
  mapfile -t -O "${#roots[@]}" roots < <(python3 -c 'import nvidia; print(*nvidia.__path__, sep="\n")' 2>/dev/null)
  mapfile -t missing < <(find "$BUILD_DIR/" -type f \( -name '*.so' -o -perm -u+x \) -exec ldd {} \; 2>/dev/null |
    awk '$3 == "not" {print $1}' | sort -u)
  for lib in "${missing[@]}"; do
    dir="$(find "${roots[@]}" -name "$lib" -print -quit 2>/dev/null)"
    if [[ -n "$dir" ]]; then
      export LD_LIBRARY_PATH="$(dirname "$dir"):$LD_LIBRARY_PATH"
    else
      log "bundle: $lib is in neither the toolkit nor PyTorch's wheels"
    fi
  done
  log "bundle $BUNDLE as $ROOT/$BUILD_DIR; loader path $LD_LIBRARY_PATH"
}

# ---- the steps: each runs in a child of this script (under `timeout`) with OUT, ARCH and HAVE_GPU set

ember_build() {  # configure and build build-gpu/ (a no-op when an earlier step built it or a bundle is run)
  [[ -n "$BUNDLE" ]] && return 0
  ./ember build --build-dir="$BUILD_DIR" --cuda=enabled "-Dcuda-arch=$ARCH"
}

run_suite() {  # run_suite SUITE: the suite's tests, their log in OUT/SUITE-testlog.json
  local rc=0
  if [[ -n "$BUNDLE" ]]; then
    python3 tools/run_tests.py "$BUILD_DIR" --suite "$1" --log "$OUT/$1-testlog.json" || rc=$?
  else
    ./ember test --build-dir="$BUILD_DIR" --suite "$1" --print-errorlogs || rc=$?
    cp "$BUILD_DIR/meson-logs/testlog.json" "$OUT/$1-testlog.json" 2>/dev/null
  fi
  return "$rc"
}

step_build() {
  ember_build || return
  if [[ -n "$BUNDLE" ]]; then
    echo "prebuilt: $BUNDLE (built at $(cat "$BUNDLE/origin"))"
    return 0
  fi
  meson introspect "$BUILD_DIR" --buildoptions | python3 -c '
import json, sys
o = {x["name"]: x["value"] for x in json.load(sys.stdin)}
print("cuda-arch:", o.get("cuda-arch"), " cudnn-root:", o.get("cudnn-root") or "(the toolkit)",
      " nccl-root:", o.get("nccl-root") or "(the toolkit)")'
}

step_test() {
  ember_build >/dev/null || return
  run_suite cuda
}

# One training run: train_run DEVICE MODEL PRECISION SEED (settings from the environment of step_train).
train_run() {
  local device="$1" model="$2" precision="$3" seed="$4" samples="$TRAIN_SAMPLES" val=10000 dir
  # ResNet-18 on the CPU takes minutes per 10,000 images: it gets fewer, and a smaller test set.
  [[ "$model" == resnet18 ]] && samples="$RESNET_SAMPLES" val=2000
  dir="$OUT/train/$model-$precision-$device-seed$seed"
  mkdir -p "$dir"
  local threads=()
  [[ "$device" == cpu ]] && threads=(--threads "$CPU_THREADS")
  if "$BUILD_DIR/examples/train" --model "$model" --precision "$precision" --device "$device" --seed "$seed" \
      --epochs "$EPOCHS" --train-samples "$samples" --val-samples "$val" --batch-size 128 --data "$DATA_DIR" --work-dir "$dir" \
      --save-interval 0 "${threads[@]}" >"$dir/log.txt" 2>&1; then
    echo "ok   $device $model $precision seed $seed"
  else
    echo "FAIL $device $model $precision seed $seed (see $dir/log.txt)"
    return 1
  fi
}

step_train() {
  ember_build >/dev/null || return
  export -f train_run
  export OUT BUILD_DIR DATA_DIR
  export EPOCHS="${EMBER_GPU_CHECK_EPOCHS:-2}" TRAIN_SAMPLES="${EMBER_GPU_CHECK_SAMPLES:-20000}"
  export RESNET_SAMPLES="${EMBER_GPU_CHECK_RESNET_SAMPLES:-5000}"
  local cores cpu_runs=() gpu_runs=() m p
  cores="$(nproc)"
  # Two CPU runs at a time beside three GPU runs (no timings are read here); the GPU runs' host
  # threads keep a few cores.
  export CPU_THREADS=$(((cores > 6 ? cores - 4 : 2) / 2))
  # The CPU reference and the seed-to-seed noise on each side: fp32 with seeds 0 and 1.
  for m in "${TRAIN_MODELS[@]}"; do cpu_runs+=("cpu $m fp32 0" "cpu $m fp32 1"); done
  if [[ -n "$HAVE_GPU" ]]; then
    for m in "${TRAIN_MODELS[@]}"; do
      for p in "${PRECISIONS[@]}"; do gpu_runs+=("cuda $m $p 0"); done
      gpu_runs+=("cuda $m fp32 1")
    done
  else
    log "train: no GPU, only the CPU reference runs"
  fi
  local rc=0 cpu_pool
  printf '%s\n' "${cpu_runs[@]}" | xargs -P 2 -L 1 bash -c 'train_run "$@"' _ &
  cpu_pool=$!
  if ((${#gpu_runs[@]})); then
    printf '%s\n' "${gpu_runs[@]}" | xargs -P 3 -L 1 bash -c 'train_run "$@"' _ || rc=$?
  fi
  wait "$cpu_pool" || rc=$?
  python3 - "$OUT/train" "${TRAIN_MODELS[*]}" "${PRECISIONS[*]}" <<'EOF' | tee "$OUT/train.md"
# The last top-1 of each run (scalars.json), GPU modes against the CPU's fp32 mean. Noise: the gap
# between seeds 0 and 1 in fp32 on each side; a mode is flagged when it lies more than twice the
# larger noise (at least 1 point) from the CPU mean.
import json, sys
from pathlib import Path
models, precisions = sys.argv[2].split(), sys.argv[3].split()
top1 = {}
for run in sorted(Path(sys.argv[1]).iterdir()):
    model, precision, device, seed = run.name.rsplit("-", 3)
    values = [json.loads(l).get("accuracy/top1") for l in (run / "scalars.json").read_text().splitlines()] \
        if (run / "scalars.json").exists() else []
    values = [v for v in values if v is not None]
    top1[(model, precision, device, seed)] = values[-1] if values else None
print("| model | precision | GPU top-1 | CPU fp32 top-1 (seeds 0, 1) | GPU - CPU mean | noise (GPU, CPU) | |")
print("| --- | --- | --- | --- | --- | --- | --- |")
for model in models:
    c0, c1 = top1.get((model, "fp32", "cpu", "seed0")), top1.get((model, "fp32", "cpu", "seed1"))
    g0, g1 = top1.get((model, "fp32", "cuda", "seed0")), top1.get((model, "fp32", "cuda", "seed1"))
    cpu_mean = (c0 + c1) / 2 if c0 is not None and c1 is not None else None
    noise = [abs(a - b) for a, b in ((g0, g1), (c0, c1)) if a is not None and b is not None]
    bound = 2 * max(noise + [1.0])
    for precision in precisions:
        g = top1.get((model, precision, "cuda", "seed0"))
        diff = g - cpu_mean if g is not None and cpu_mean is not None else None
        flag = "" if diff is None else ("ok" if abs(diff) <= bound else f"OUTSIDE {bound:.2f}")
        fmt = lambda v: "-" if v is None else f"{v:.2f}"
        print(f"| {model} | {precision} | {fmt(g)} | {fmt(c0)}, {fmt(c1)} | {fmt(diff)} | "
              f"{', '.join(f'{n:.2f}' for n in noise) or '-'} | {flag} |")
EOF
  return "$rc"
}

step_bench() {
  ember_build >/dev/null || return
  if [[ -z "$HAVE_GPU" ]]; then
    echo "skipped: no GPU (the bench binaries register their GPU cases only where one is present)"
    return 0
  fi
  mkdir -p "$OUT/bench"
  local name filter rc=0
  # case filter per binary, and its share of the step's time
  local -A filters=([gemm]='^gemm/cuda/' [conv]='^conv/cuda/' [ops]='^(ops|dispatch)/cuda/' [train]='^train/cuda/')
  local -A shares=([gemm]=150 [conv]=150 [ops]=60 [train]=150)
  for name in ${EMBER_GPU_CHECK_BENCHES:-gemm conv ops train}; do
    local var="EMBER_GPU_CHECK_${name^^}_FILTER"
    filter="${!var:-${filters[$name]}}"
    log "bench_$name on ${filter} (at most ${shares[$name]} s)"
    timeout --kill-after=10 "${shares[$name]}" "$BUILD_DIR/bench/bench_$name" --benchmark_filter="$filter" \
      --benchmark_min_time="${EMBER_GPU_CHECK_MIN_TIME:-0.1}" --benchmark_out="$OUT/bench/bench_$name.json" \
      --benchmark_out_format=json || { rc=$?; log "bench_$name exited $rc"; }
  done
  [[ "${EMBER_GPU_CHECK_BENCH_EXTRAS:-1}" == 1 ]] || return "$rc"
  # Activation checkpointing's memory and time on the ImageNet-sized steps (step_peak_MiB beside the
  # plain cases' in bench_train.json).
  log "bench_train --activation-checkpointing on the 224 px steps (at most 120 s)"
  timeout --kill-after=10 120 "$BUILD_DIR/bench/bench_train" --activation-checkpointing --precision=fp32,amp_bf16 \
    --benchmark_filter='^train/cuda/(fp32|amp_bf16)/checkpointed/(resnet50_224_nhwc|vit_b16_224)/' \
    --benchmark_min_time="${EMBER_GPU_CHECK_MIN_TIME:-0.1}" --benchmark_out="$OUT/bench/bench_train_checkpointed.json" \
    --benchmark_out_format=json || { rc=$?; log "bench_train --activation-checkpointing exited $rc"; }
  # ZeRO-3 with the parameter shards in pinned host memory (offload_param): the NCCL case of the cuda
  # suite checks its numbers; this run shows what it costs, beside zero3 without it (one rank).
  local offload
  for offload in "" "--offload-optimizer --offload-param"; do
    log "train --strategy zero3 $offload (at most 90 s)"
    # shellcheck disable=SC2086  # the flags are words
    timeout --kill-after=10 90 "$BUILD_DIR/examples/train" --strategy zero3 $offload --model resnet18 --device cuda \
      --data "$DATA_DIR" --epochs 1 --max-iters 60 --log-interval 20 --save-interval 0 --work-dir "$OUT/zero3${offload:+_offload}" \
      >"$OUT/bench/train_zero3${offload:+_offload}.log" 2>&1 || { rc=$?; log "train zero3 $offload exited $rc"; }
  done
  return "$rc"
}

step_compare() {
  ember_build >/dev/null || return
  if ! python3 -c 'import torch' >/dev/null 2>&1; then
    echo "skipped: torch does not import"
    return 0
  fi
  if [[ -z "$HAVE_GPU" ]]; then
    echo "skipped: no GPU"
    return 0
  fi
  mkdir -p "$OUT/bench"
  local rc=0
  timeout --kill-after=10 300 python3 bench/torch_compare.py --bench-dir "$BUILD_DIR/bench" \
    --filter "${EMBER_GPU_CHECK_COMPARE_FILTER:-/cuda/}" --min-time 0.2 --out "$OUT/bench/torch.json" || rc=$?
  if [[ "${EMBER_GPU_CHECK_TORCH_COMPILE:-1}" == 1 ]]; then
    timeout --kill-after=10 150 python3 bench/torch_compare.py --bench-dir "$BUILD_DIR/bench" --compile \
      --filter '^train/cuda/(fp32|amp_bf16)/(resnet50_224_nhwc|vit_b16_224)/' --min-time 0.5 \
      --out "$OUT/bench/torch_compile.json" || rc=$?
  fi
  python3 bench/report.py "$OUT/bench" || rc=$?
  return "$rc"
}

# Whole-step capture: each shape eagerly and captured in ember (bench_train, with and without
# --compile), and PyTorch eager on the same step; summary in OUT/compile/summary.md.
step_compile() {
  ember_build >/dev/null || return
  if [[ -z "$HAVE_GPU" ]]; then
    echo "skipped: no GPU"
    return 0
  fi
  mkdir -p "$OUT/compile"
  local spec model batch flag tag rc=0
  for spec in ${EMBER_GPU_CHECK_COMPILE_SPECS:-cnn:128 resnet18:32 resnet50:32 resnet50:256}; do
    model="${spec%%:*}" batch="${spec##*:}"
    for flag in "" --compile; do
      tag="${flag:+_compiled}"
      timeout --kill-after=10 90 "$BUILD_DIR/bench/bench_train" $flag --batch="$batch" --precision=fp32,amp_bf16 \
        --benchmark_filter="^train/cuda/(fp32|amp_bf16)/(compiled/)?$model/$batch(/manual_time)?\$" \
        --benchmark_min_time="${EMBER_GPU_CHECK_MIN_TIME:-0.3}" --benchmark_out="$OUT/compile/ember_${model}_${batch}${tag}.json" \
        --benchmark_out_format=json >/dev/null || { rc=$?; log "bench_train $flag $spec exited $rc"; }
    done
    if python3 -c 'import torch' >/dev/null 2>&1; then
      timeout --kill-after=10 90 python3 bench/torch_compare.py --bench-dir "$BUILD_DIR/bench" \
        --bench-args "--batch=$batch --precision=fp32,amp_bf16" --filter "^train/cuda/(fp32|amp_bf16)/$model/$batch(/manual_time)?\$" \
        --min-time 0.3 --out "$OUT/compile/torch_${model}_${batch}.json" >/dev/null || rc=$?
    fi
  done
  python3 - "$OUT/compile" <<'EOF' | tee "$OUT/compile/summary.md"
import json, pathlib, sys
folder = pathlib.Path(sys.argv[1])
def img_per_s(path):
    try:
        cases = json.loads(path.read_text())["benchmarks"]
    except (OSError, ValueError, KeyError):
        return {}
    return {c["name"].removesuffix("/manual_time").replace("compiled/", ""): c.get("img_per_s") for c in cases}
print("| case | ember eager img/s | ember captured img/s | captured / eager | PyTorch eager img/s | captured / PyTorch |")
print("|---|---|---|---|---|---|")
for eager_file in sorted(folder.glob("ember_*[0-9].json")):
    eager = img_per_s(eager_file)
    captured = img_per_s(eager_file.with_name(eager_file.stem + "_compiled.json"))
    torch = img_per_s(folder / eager_file.name.replace("ember_", "torch_"))
    for name, e in eager.items():
        c, t = captured.get(name), torch.get(name)
        ratio = lambda a, b: f"{a / b:.2f}" if a and b else "-"
        print(f"| {name} | {e or '-'} | {c or '-'} | {ratio(c, e)} | {t or '-'} | {ratio(c, t)} |")
EOF
  return "$rc"
}

# ember's ranges are real NVTX ranges: ncu profiles only the kernels launched inside the ranges it is
# told to include (a push/pop range is named with a trailing '/'), here layer1.0's forward and
# layer1.0.conv2's backward in two iterations of a ResNet-50 run (and layer1.0's forward in its
# validation pass). The per-kernel summary lists each range's kernels.
step_python() {
  ember_build || return
  local package="$BUILD_DIR/python"
  [[ -d "$package/ember" ]] || { echo "no Python package in $package (-Dpython=disabled, or no nanobind)"; return 1; }
  if ! PYTHONPATH="$package" python3 -c 'import ember' 2>"$OUT/python-import.txt"; then
    echo "the package does not import under $(python3 --version 2>&1): $(tail -1 "$OUT/python-import.txt")"
    return 1
  fi
  PYTHONPATH="$package" EMBER_TRAIN_PROGRAM="$BUILD_DIR/examples/train" \
    python3 -m pytest -q -p no:cacheprovider -rs tests/python 2>&1 | tee "$OUT/python.log"
  return "${PIPESTATUS[0]}"
}

step_nvtx() {
  ember_build >/dev/null || return
  if [[ -z "$HAVE_GPU" ]] || ! command -v ncu >/dev/null 2>&1; then
    echo "skipped: needs a GPU and ncu"
    return 0
  fi
  local rc=0 range
  for range in "layer1.0: Bottleneck/" "conv2d backward (layer1.0.conv2: Conv2d)/"; do
    local name="${range%%[:(]*}"
    name="${name// /_}"
    echo "== ncu --nvtx-include '$range'"
    timeout --kill-after=10 140 ncu --nvtx --nvtx-include "$range" --launch-count 80 --print-summary per-kernel \
      "$BUILD_DIR/examples/train" --model resnet50 --device cuda --nvtx --max-iters 2 --train-samples 64 \
      --val-samples 64 --batch-size 32 --data "$DATA_DIR" --save-interval 0 >"$OUT/nvtx-$name.txt" 2>&1 || rc=$?
    tail -n 60 "$OUT/nvtx-$name.txt"
  done
  return "$rc"
}

# The dist suite (Gloo ranks; with a GPU, init_process_group on NCCL too) and bench_comm over NCCL
# on this GPU as a world of one (the NCCL collectives' cost per call; a ring needs two GPUs). The
# NCCL collective tests themselves are in the cuda suite (the test step).
step_dist() {
  ember_build >/dev/null || return
  local rc=0
  run_suite dist || rc=$?
  if [[ -z "$HAVE_GPU" ]]; then
    echo "skipped: no GPU for bench_comm over NCCL (the dist suite ran)"
    return "$rc"
  fi
  mkdir -p "$OUT/bench"
  timeout --kill-after=10 120 "$BUILD_DIR/bench/bench_comm" --backend=nccl \
    --benchmark_filter='comm/nccl/(all_reduce|reduce_scatter|all_gather)/' \
    --benchmark_out="$OUT/bench/bench_comm_nccl.json" --benchmark_out_format=json || rc=$?
  return "$rc"
}

# ---- the driver

if [[ "${1:-}" == --run-step ]]; then  # a child: run one step function
  "step_$2"
  exit
fi
BUNDLE=""
if [[ "${1:-}" == --bundle ]]; then
  BUNDLE="${2:?--bundle needs the tarball of tools/gpu_bundle.sh}"
  shift 2
fi
if (($# < 1)) || [[ "$1" == -h || "$1" == --help ]]; then
  usage
  exit $(($# < 1 ? 2 : 0))
fi
mkdir -p "$1" || exit 2
OUT="$(cd "$1" && pwd)"
shift
steps=("$@")
((${#steps[@]})) || steps=("${ALL_STEPS[@]}")
for s in "${steps[@]}"; do
  [[ -n "${LIMIT_S[$s]:-}" ]] || { log "unknown step '$s' (steps: ${ALL_STEPS[*]})"; exit 2; }
done

DATA_DIR=/usr/share/datasets/fashion-mnist
command -v nvcc >/dev/null 2>&1 || export PATH="$PATH:/usr/local/cuda/bin"
if [[ -n "$BUNDLE" ]]; then
  use_bundle
else
  deps="${EMBER_DEPS_ROOT:-}"
  [[ -z "$deps" && -d .deps ]] && deps=.deps
  [[ -n "$deps" ]] && use_deps_root "$deps"
  use_wheel_library cudnn "conv2d on CUDA"
  use_wheel_library nccl "process groups of CUDA tensors"
fi
ARCH="$(gpu_arch)"
HAVE_GPU="${ARCH:+yes}"
if [[ -z "$HAVE_GPU" ]]; then
  ARCH="${EMBER_GPU_ARCH:-90}"
  log "no NVIDIA GPU here: a dry run (build for sm_$ARCH; the steps that need a device are skipped)"
fi
export OUT ARCH HAVE_GPU DATA_DIR BUNDLE BUILD_DIR LD_LIBRARY_PATH

summary="$OUT/summary.txt"
{
  echo "gpu_check $(date -u +%Y-%m-%dT%H:%M:%SZ) at $(git rev-parse --short HEAD 2>/dev/null)$(git diff --quiet 2>/dev/null || echo '+changes')"
  if [[ -n "$HAVE_GPU" ]]; then
    nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap --format=csv,noheader
  else
    echo "no GPU: dry run for sm_$ARCH"
  fi
} >>"$summary"

status=0
for s in "${steps[@]}"; do
  var="EMBER_GPU_CHECK_${s^^}_S"
  limit="${!var:-${LIMIT_S[$s]}}"
  log "step $s (at most $limit s), log: $OUT/$s.log"
  t0=$SECONDS
  timeout --kill-after=20 "$limit" bash "${BASH_SOURCE[0]}" --run-step "$s" 2>&1 | tee "$OUT/$s.log"
  rc=${PIPESTATUS[0]}
  if ((rc == 0)); then
    result="ok"
    grep -q '^skipped:' "$OUT/$s.log" && result="$(grep -m1 '^skipped:' "$OUT/$s.log")"
  elif ((rc == 124 || rc == 137)); then
    result="TIMED OUT after $limit s"
  else
    result="FAILED (exit $rc)"
  fi
  [[ "$result" == ok || "$result" == skipped:* ]] || status=1
  [[ "$s" == test ]] && result+=" — $(tail -n 1 "$OUT/test.log")"
  echo "$s: $result, $((SECONDS - t0)) s" | tee -a "$summary"
done
exit "$status"
