// The dims of an elementwise walk over N operands after coalescing: dims taken in operand 0's memory
// order (the output's: outermost first), size-1 dims dropped, and a dim merged into the one before
// it wherever every operand steps through both as through one. A walk over operands stored alike
// (contiguous, or all channels-last) becomes a single dim; kernels then loop over the innermost dim only.
#pragma once

#include <algorithm>
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
  // Operand 0's memory order, when each of its dims steps forward (a broadcast operand 0, with
  // stride 0 somewhere, keeps the logical order). A stable sort leaves a row-major one as it is.
  const int rank = shape.size();
  int order[kMaxDims];
  bool forward = true;
  for (int d = 0; d < rank; ++d) {
    order[d] = d;
    forward = forward && (shape[d] == 1 || strides[0][d] > 0);
  }
  if (forward) std::stable_sort(order, order + rank, [&](int a, int b) { return strides[0][a] > strides[0][b]; });
  for (int i = 0; i < rank; ++i) {
    const int d = order[i];
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
