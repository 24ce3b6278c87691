// Memory while a stream is captured into a CUDA graph (cuda/graph.cpp). cudaMallocAsync on the
// capturing stream makes graph allocations, whose addresses stay fixed for the graph's life (the
// "private pool" of a captured step); but cudaFreeAsync inside a capture may only release a graph
// allocation (CUDA runtime API reference, cudaFreeAsync), so cuda/memory.cpp holds back the frees
// of older memory that the captured step drops (a set-to-none gradient) until the capture ends.
#pragma once

#include <cuda_runtime_api.h>

namespace ember::cuda {

// Opens the bookkeeping of this thread's capture.
void begin_capture_memory();
// Closes it and frees, on `stream`, the older memory the capture dropped. Its last readers are
// queued before the capture began, so the graph never reads it.
void end_capture_memory(cudaStream_t stream);

}  // namespace ember::cuda
