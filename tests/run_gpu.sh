#!/usr/bin/env bash
# Builds ember for the GPU of this machine (its compute capability only, so nvcc compiles one
# architecture) and runs every CUDA test: the 'cuda' suite, which a machine without a GPU skips.
# Arguments go to `meson test` (e.g. a test name). Ends with "N passed, N failed, N skipped".
#
# On a machine without the Debian packages (a lent GPU machine), unpack them here first
# (tools/unpack_deps.sh) and set EMBER_DEPS_ROOT to that folder: it is put on the compiler's and
# pkg-config's search paths, and package installation is skipped.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

if ! command -v nvidia-smi >/dev/null 2>&1; then
  echo "run_gpu.sh: nvidia-smi not found: no NVIDIA GPU or driver on this machine" >&2
  exit 1
fi
arch="$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -n 1 | tr -d '. ')"
if [[ ! "$arch" =~ ^[0-9]+$ ]]; then
  echo "run_gpu.sh: nvidia-smi reports no GPU compute capability (got '${arch}')" >&2
  exit 1
fi

if [[ -n "${EMBER_DEPS_ROOT:-}" ]]; then
  root="$(cd "$EMBER_DEPS_ROOT" && pwd)"
  export EMBER_NO_DEPS=1
  export CPATH="$root/usr/include:$root/usr/include/x86_64-linux-gnu:$root/usr/include/eigen3${CPATH:+:$CPATH}"
  export PKG_CONFIG_PATH="$root/usr/lib/x86_64-linux-gnu/pkgconfig:$root/usr/share/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
  export LIBRARY_PATH="$root/usr/lib/x86_64-linux-gnu${LIBRARY_PATH:+:$LIBRARY_PATH}"
  export LD_LIBRARY_PATH="$root/lib/x86_64-linux-gnu:$root/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  # pkg-config files name /usr as their prefix: point them at the unpacked tree.
  export PKG_CONFIG_SYSROOT_DIR="$root"
  # Without pkg-config, Meson asks CMake, which reads the packages' own config files.
  export CMAKE_PREFIX_PATH="$root/usr${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}"
fi

echo "run_gpu.sh: building for sm_${arch} in build-gpu/"
exec ./ember test --build-dir=build-gpu --cuda=enabled "-Dcuda-arch=${arch}" --suite cuda "$@"
