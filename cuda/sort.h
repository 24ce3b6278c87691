// Launchers of the row sort (cuda/sort.cu), called by cuda/sort.cpp: each row of a contiguous
// (rows, n) tensor sorted by tensor/sort_key.h's key with CUB's segmented radix sort, which is
// stable, so equal keys keep index order as on the CPU. Each runs on `stream` of the current device.
#pragma once

#include <cstddef>
#include <cstdint>

#include <cuda_runtime_api.h>

#include "tensor/dtype.h"

namespace ember::cuda {

// The bytes of device memory launch_sort_rows needs for rows of n elements.
size_t sort_rows_workspace_bytes(int64_t rows, int64_t n);
// indices (rows, n) = the index order that sorts each row of x (ascending or descending);
// `workspace` holds sort_rows_workspace_bytes(rows, n) bytes.
void launch_sort_rows(DType dtype, const void* x, int64_t rows, int64_t n, bool descending, int64_t* indices,
                      void* workspace, size_t workspace_bytes, cudaStream_t stream);

}  // namespace ember::cuda
