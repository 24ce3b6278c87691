// The dims of an elementwise walk over N operands after coalescing: size-1 dims dropped, and a dim
// merged into the one before it wherever every operand steps through both as through one. A
// contiguous walk becomes a single dim; kernels then loop over the innermost dim only.
#pragma once

#include <array>
#include <cstdint>

#include "tensor/shape.h"

namespace ember {

template <int N>
struct CoalescedDims {
  int nd = 0;  // at least 1 (a single element is one dim of size 1)
  int64_t sizes[kMaxDims] = {};
  int64_t strides[N][kMaxDims] = {};  // in whatever unit the input strides were
};

template <int N>
CoalescedDims<N> coalesce(const Shape& shape, const std::array<Strides, N>& strides) {
  CoalescedDims<N> c;
  for (int d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) continue;
    if (c.nd > 0) {
      bool mergeable = true;
      for (int k = 0; k < N; ++k) mergeable = mergeable && c.strides[k][c.nd - 1] == strides[k][d] * shape[d];
      if (mergeable) {
        c.sizes[c.nd - 1] *= shape[d];
        for (int k = 0; k < N; ++k) c.strides[k][c.nd - 1] = strides[k][d];
        continue;
      }
    }
    c.sizes[c.nd] = shape[d];
    for (int k = 0; k < N; ++k) c.strides[k][c.nd] = strides[k][d];
    ++c.nd;
  }
  if (c.nd == 0) {
    c.sizes[0] = 1;
    c.nd = 1;
  }
  return c;
}

}  // namespace ember
