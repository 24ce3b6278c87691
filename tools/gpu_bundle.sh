#!/usr/bin/env bash
# Packs a CUDA build made on this machine into one file that a lent GPU machine runs without
# building: building there costs minutes of a session's 15 minutes of device time, here none.
#   tools/gpu_bundle.sh [BUILD_DIR] [BUNDLE]    (defaults: build-gpu, .gpu/ember-gpu.tar.xz)
# BUILD_DIR: a build from `./ember build --build-dir=build-gpu --cuda=enabled -Dcuda-arch=90
# -Ddnnl=disabled -Dpython-interpreter=PY` (oneDNN is 80 MiB of libraries that no GPU check uses; PY a
# Python of the GPU image's minor version with nanobind, e.g. pyenv's 3.12, so that gpu_check.sh's
# python step can import the package there). BUNDLE, an xz tarball
# (the device tool carries 64 MiB; unpacked it is about twice that), holds:
#   build/    the build directory without its object files and meson's private state, binaries
#             stripped; meson's test list (meson-info/) and the test binaries' compiled-in paths
#             name this machine's checkout, which the GPU side recreates as a link
#             (tools/gpu_check.sh --bundle)
#   lib/      the shared libraries the binaries load that a GPU machine's image lacks (the Debian
#             ones: OpenBLAS, Gloo, SLEEF, Google Benchmark, ...); CUDA's own libraries (cuBLAS,
#             cuDNN, NCCL, the runtime) are the GPU machine's, from its toolkit or PyTorch's wheels
#   data/     Fashion-MNIST with the first EMBER_BUNDLE_TRAIN_IMAGES training images (20000: what
#             the train step reads) and the whole test set, so the bundle stays under the 64 MiB
#             the device tool carries
#   origin    the checkout path the build was made in, and the build directory's name there
# Prints the bundle's size. .gpu/ is ignored by git: name it in the device call's carry.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

build="${1:-build-gpu}"
out="${2:-.gpu/ember-gpu.tar.xz}"
train_images="${EMBER_BUNDLE_TRAIN_IMAGES:-20000}"
data_src="${EMBER_DATA_DIR:-/usr/share/datasets/fashion-mnist}"
[[ -f "$build/build.ninja" ]] || { echo "gpu_bundle: $build is not a configured build directory" >&2; exit 2; }
[[ -f "$build/libember.so" ]] || { echo "gpu_bundle: $build/libember.so is missing: build first" >&2; exit 2; }

bundle="$(mktemp -d)"
trap 'rm -rf "$bundle"' EXIT
mkdir -p "$bundle/build" "$bundle/lib" "$bundle/data"
# Everything but object files, static libraries, logs and meson's private state (tools/run_tests.py
# reads the test list in meson-info/).
tar -C "$build" --exclude='*.p' --exclude='*.a' --exclude='*.o' --exclude='./meson-logs' --exclude='./meson-private' \
  --exclude='./docs' -cf - . |
  tar -C "$bundle/build" -xf -
echo "$PWD $(basename "$build")" >"$bundle/origin"

mapfile -t elves < <(find "$bundle/build" -type f \( -name '*.so' -o -perm -u+x \) -exec sh -c \
  'head -c 4 "$1" | grep -q ELF && echo "$1"' _ {} \;)
for f in "${elves[@]}"; do strip --strip-unneeded "$f"; done

# Libraries the GPU machine has already: the C and C++ runtimes, and CUDA's.
provided='^(linux-vdso|ld-linux|libc|libm|libdl|librt|libpthread|libstdc\+\+|libgcc_s|libcuda|libcudart|libcublas|libcublasLt|libcudnn.*|libnccl|libnvrtc|libnvToolsExt)\.so'
for f in "${elves[@]}"; do
  ldd "$f" 2>/dev/null | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}'
done | sort -u | while read -r soname path; do
  [[ "$soname" =~ $provided ]] && continue
  [[ "$(realpath "$path")" == "$(realpath "$bundle")/"* ]] && continue  # libember.so and the build's own modules
  cp -L "$path" "$bundle/lib/$soname"
done
strip --strip-unneeded "$bundle"/lib/*.so* 2>/dev/null || true

# The data set, cut to its first N training images (an IDX file's header holds its count).
python3 - "$data_src" "$bundle/data" "$train_images" <<'EOF'
import gzip, shutil, struct, sys
from pathlib import Path
src, dst, n = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3])
for name in ("t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"):
    shutil.copy(src / name, dst / name)
for name, item_bytes_of in (("train-images-idx3-ubyte.gz", lambda dims: dims[1] * dims[2]),
                            ("train-labels-idx1-ubyte.gz", lambda dims: 1)):
    raw = gzip.decompress((src / name).read_bytes())
    ndim = raw[3]
    dims = list(struct.unpack(f">{ndim}I", raw[4:4 + 4 * ndim]))
    keep = min(n, dims[0])
    header = raw[:4] + struct.pack(f">{ndim}I", keep, *dims[1:])
    body = raw[4 + 4 * ndim:4 + 4 * ndim + keep * item_bytes_of(dims)]
    (dst / name).write_bytes(gzip.compress(header + body, compresslevel=9))
EOF

mkdir -p "$(dirname "$out")"
tar -C "$bundle" -cf - . | xz -T0 -6 >"$out"
echo "gpu_bundle: $out is $(du -h "$out" | cut -f1), unpacked $(du -sh "$bundle" | cut -f1):" \
  "$(du -sh "$bundle/build" | cut -f1) build, $(du -sh "$bundle/lib" | cut -f1) libraries" \
  "($(ls "$bundle/lib" | tr '\n' ' ')), $(du -sh "$bundle/data" | cut -f1) data"
