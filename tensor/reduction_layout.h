// A reduction's input seen as dense blocks (outer, len, inner): output (o, i) folds
// data[(o * len + r) * inner + i] for r < len. Shape work only, shared by the CPU and CUDA kernels.
#pragma once

#include "tensor/tensor.h"

namespace ember {

struct ReductionLayout {
  Tensor data;        // dense from data<T>() on; a copy only when no view of the input will do
  int64_t outer = 0;  // output (o, i) is element o * inner + i of the output
  int64_t len = 0;    // elements folded into each output
  int64_t inner = 1;
};

// Reducing `dims` (sorted, unique; empty = every dim), outputs in the order of the kept dims; r
// runs over the reduced elements in memory order (the index along the dim when only one is
// reduced). No copy when x is dense in some order of its dims in which the reduced dims are
// adjacent and the kept dims keep their order: contiguous, transposed and channels-last inputs.
ReductionLayout reduction_layout(const Tensor& x, const Shape& dims);
// Rows along `dim` in x's own element order, the order softmax writes its output in.
ReductionLayout dim_layout(const Tensor& x, int dim);

}  // namespace ember
