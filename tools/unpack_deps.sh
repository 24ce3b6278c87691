#!/usr/bin/env bash
# Downloads the Debian packages ember builds against and unpacks them (no installation, no root)
# into one folder, for a machine that has the CUDA toolkit but not these packages: a lent GPU
# machine. Run it where apt works and carry the folder there: tools/gpu_check.sh uses .deps when
# present (or the folder EMBER_DEPS_ROOT names). Usage: tools/unpack_deps.sh [folder]   (default: .deps)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

dest="${1:-.deps}"
# Headers and the shared libraries the build links (zlib, SLEEF, Google Benchmark for bench/, Gloo
# with the libraries it loads for dist/, oneDNN with the OpenCL loader it links for CPU conv2d), plus
# the data set the training program reads. OpenBLAS is left out: without it the CPU GEMM falls back to Eigen.
packages=(libeigen3-dev nlohmann-json3-dev doctest-dev libcli11-dev zlib1g-dev zlib1g libsleef-dev libsleef3
          libbenchmark-dev libbenchmark1debian libgloo-dev libgloo0 libhiredis0.14 libibverbs1 libnl-3-200
          libnl-route-3-200 libdnnl-dev libdnnl2 ocl-icd-libopencl1 dataset-fashion-mnist)

downloads="$(mktemp -d)"
trap 'rm -rf "$downloads"' EXIT
(cd "$downloads" && apt-get download "${packages[@]}")
mkdir -p "$dest"
for deb in "$downloads"/*.deb; do
  dpkg-deb -x "$deb" "$dest"
done
# Absolute links (libz.so -> /lib/...) would point outside the folder on the other machine.
find "$dest" -type l -lname '/*' | while read -r link; do
  ln -sfn "$(realpath -m --relative-to="$(dirname "$link")" "$dest$(readlink "$link")")" "$link"
done
echo "unpacked ${#packages[@]} packages into $dest; use: EMBER_DEPS_ROOT=$dest tools/gpu_check.sh OUTDIR"
