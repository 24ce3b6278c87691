// Shared layout work of the CPU reductions and softmax: the input seen as dense blocks
// (outer, len, inner), where output (o, i) folds data[(o * len + r) * inner + i] for r < len.
#pragma once

#include <algorithm>

#include "tensor/tensor.h"

namespace ember::cpu {

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

// Kernels fold up to kColumnBlock adjacent outputs (columns i) side by side: each step along the
// reduced extent then reads one contiguous run of memory, and the loop over columns vectorizes.
inline constexpr int64_t kColumnBlock = 256;

// The outputs of a layout cut into such blocks, numbered o-major: the unit of work of a thread.
struct ColumnBlocks {
  explicit ColumnBlocks(const ReductionLayout& l)
      : inner(l.inner), len(l.len), width(std::min(l.inner, kColumnBlock)), per_outer((l.inner + width - 1) / width),
        count(l.outer * per_outer) {}
  int64_t first_element(int64_t block) const { return (block / per_outer) * len * inner + first_column(block); }
  int64_t first_output(int64_t block) const { return (block / per_outer) * inner + first_column(block); }
  int64_t lanes(int64_t block) const { return std::min(width, inner - first_column(block)); }

  int64_t inner, len, width, per_outer, count;

 private:
  int64_t first_column(int64_t block) const { return (block % per_outer) * width; }
};

}  // namespace ember::cpu
