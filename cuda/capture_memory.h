// Memory while a stream is captured into a CUDA graph (cuda/graph.cpp). cudaMallocAsync on the
// capturing stream makes graph allocations, whose addresses stay fixed for the graph's life (the
// "private pool" of a captured step); but cudaFreeAsync inside a capture may only release a graph
// allocation (CUDA runtime API reference, cudaFreeAsync), so cuda/memory.cpp holds back the frees
// of older memory that the captured step drops (a set-to-none gradient, a state tensor rebound to a
// new one). The graph may read that memory before dropping it, at every replay: the graph keeps it
// until it is destroyed.
#pragma once

#include <cuda_runtime_api.h>

#include <utility>
#include <vector>

#include "tensor/device.h"

namespace ember::cuda {

// Memory allocated before a capture whose last owner the capture dropped.
using HeldMemory = std::vector<std::pair<Device, void*>>;

// Opens the bookkeeping of this thread's capture.
void begin_capture_memory();
// Closes it; returns the older memory the capture dropped, for the graph to keep.
HeldMemory end_capture_memory();
// Frees held memory on `stream`, after the work queued there (a destroyed graph's, a failed capture's).
void free_held_memory(const HeldMemory& held, cudaStream_t stream);

}  // namespace ember::cuda
