// The row sort: a kernel writes each element's key (tensor/sort_key.h, complemented for a descending
// order) and index in its row, and CUB's segmented radix sort orders the pairs row by row.
#include <cub/device/device_segmented_radix_sort.cuh>

#include <string>

#include "cuda/context.h"
#include "cuda/error.h"
#include "cuda/launch_config.h"
#include "cuda/sort.h"
#include "tensor/sort_key.h"

namespace ember::cuda {

namespace {

// The workspace, in order: keys in, keys out, indices in, row offsets (rows + 1), then CUB's own.
struct Layout {
  size_t keys_in, keys_out, indices_in, offsets, cub, total;
};

size_t aligned(size_t bytes) { return (bytes + 255) / 256 * 256; }

size_t cub_bytes(int64_t rows, int64_t n) {
  size_t bytes = 0;
  EMBER_CUDA_CHECK(cub::DeviceSegmentedRadixSort::SortPairs(
      nullptr, bytes, static_cast<const uint64_t*>(nullptr), static_cast<uint64_t*>(nullptr),
      static_cast<const int64_t*>(nullptr), static_cast<int64_t*>(nullptr), static_cast<int>(rows * n),
      static_cast<int>(rows), static_cast<const int*>(nullptr), static_cast<const int*>(nullptr)));
  return bytes;
}

Layout layout(int64_t rows, int64_t n) {
  Layout l{};
  const size_t items = static_cast<size_t>(rows * n);
  l.keys_in = 0;
  l.keys_out = l.keys_in + aligned(items * sizeof(uint64_t));
  l.indices_in = l.keys_out + aligned(items * sizeof(uint64_t));
  l.offsets = l.indices_in + aligned(items * sizeof(int64_t));
  l.cub = l.offsets + aligned(static_cast<size_t>(rows + 1) * sizeof(int));
  l.total = l.cub + aligned(cub_bytes(rows, n));
  return l;
}

template <class T>
__global__ void __launch_bounds__(kThreads) sort_keys_kernel(const T* x, int64_t rows, int64_t n, uint64_t flip,
                                                             uint64_t* keys, int64_t* indices, int* offsets) {
  const int64_t total = rows * n, step = int64_t{blockDim.x} * gridDim.x;
  for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < total; i += step) {
    keys[i] = sort_key(x[i]) ^ flip;
    indices[i] = i % n;
    if (i % n == 0) offsets[i / n] = static_cast<int>(i);
    if (i == total - 1) offsets[rows] = static_cast<int>(total);
  }
}

}  // namespace

size_t sort_rows_workspace_bytes(int64_t rows, int64_t n) { return layout(rows, n).total; }

void launch_sort_rows(DType dtype, const void* x, int64_t rows, int64_t n, bool descending, int64_t* indices,
                      void* workspace, size_t workspace_bytes, cudaStream_t stream) {
  const int64_t total = rows * n;
  if (total == 0) return;
  const Layout l = layout(rows, n);
  if (workspace_bytes < l.total)
    throw CudaError("sort: a workspace of " + std::to_string(workspace_bytes) + " bytes, " + std::to_string(l.total) +
                    " needed");
  char* base = static_cast<char*>(workspace);
  auto* keys_in = reinterpret_cast<uint64_t*>(base + l.keys_in);
  auto* keys_out = reinterpret_cast<uint64_t*>(base + l.keys_out);
  auto* indices_in = reinterpret_cast<int64_t*>(base + l.indices_in);
  auto* offsets = reinterpret_cast<int*>(base + l.offsets);
  visit(dtype, [&]<class T>() {
    sort_keys_kernel<T><<<grid_blocks(total, kThreads), kThreads, 0, stream>>>(
        static_cast<const T*>(x), rows, n, descending ? ~uint64_t{0} : 0, keys_in, indices_in, offsets);
    EMBER_CUDA_LAUNCH_CHECK();
  });
  size_t cub_bytes = l.total - l.cub;
  EMBER_CUDA_CHECK(cub::DeviceSegmentedRadixSort::SortPairs(base + l.cub, cub_bytes, keys_in, keys_out, indices_in,
                                                            indices, static_cast<int>(total), static_cast<int>(rows),
                                                            offsets, offsets + 1, 0, 64, stream));
}

}  // namespace ember::cuda
