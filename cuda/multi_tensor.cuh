// The device side of multi-tensor launches (cuda/multi_tensor.h): which tensor and which elements a
// block works on. Included by cuda/*.cu only.
#pragma once

#include "cuda/multi_tensor.h"

namespace ember::cuda {

struct Chunk {
  int t;  // the tensor in the list
  int64_t begin, end;
};

// This block's chunk (tensors with no elements own no chunk and are passed over).
__device__ __forceinline__ Chunk block_chunk(const TensorList& l) {
  const int32_t b = static_cast<int32_t>(blockIdx.x);
  int t = 0;
  while (l.first_chunk[t + 1] <= b) ++t;
  const int64_t begin = int64_t{b - l.first_chunk[t]} * kChunk;
  return {t, begin, begin + kChunk < l.numel[t] ? begin + kChunk : l.numel[t]};
}

}  // namespace ember::cuda
