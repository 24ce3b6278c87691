// The (outer, len, inner) view of a reduction's input; see tensor/reduction_layout.h.
#include "tensor/reduction_layout.h"

#include <algorithm>
#include <vector>

#include "autograd/grad_mode.h"
#include "tensor/ops.h"

namespace ember {

ReductionLayout reduction_layout(const Tensor& x, const Shape& dims) {
  NoGradGuard no_grad;
  std::vector<bool> reduced(x.dim(), dims.empty());
  for (int64_t d : dims) reduced[d] = true;
  Shape rows_order;  // kept dims, then reduced dims
  int64_t len = 1, outputs = 1;
  for (int i = 0; i < x.dim(); ++i)
    if (!reduced[i]) {
      rows_order.push_back(i);
      outputs *= x.shape()[i];
    }
  for (int i = 0; i < x.dim(); ++i)
    if (reduced[i]) {
      rows_order.push_back(i);
      len *= x.shape()[i];
    }
  if (x.numel() == 0) return {x, outputs, len, 1};  // nothing is read

  // Read x in its memory order (dims by decreasing stride; size-1 dims do not matter). If it is
  // dense there, with the reduced dims adjacent and the kept dims in their logical order, then
  // output (o, i) folds a fixed stride of x's own memory: no copy. This covers contiguous and
  // transposed inputs.
  std::vector<int> memory_order;
  for (int i = 0; i < x.dim(); ++i)
    if (x.shape()[i] != 1) memory_order.push_back(i);
  std::stable_sort(memory_order.begin(), memory_order.end(),
                   [&](int a, int b) { return x.strides()[a] > x.strides()[b]; });
  bool readable = true;
  int64_t dense_stride = 1;
  for (auto d = memory_order.rbegin(); d != memory_order.rend(); ++d) {
    readable = readable && x.strides()[*d] == dense_stride;
    dense_stride *= x.shape()[*d];
  }
  enum { kBefore, kInside, kAfter } part = kBefore;  // where we are relative to the reduced block
  int last_kept = -1;
  int64_t outer = 1, inner = 1;
  for (int d : memory_order) {
    if (reduced[d]) {
      readable = readable && part != kAfter;
      part = kInside;
    } else {
      readable = readable && d > last_kept;
      last_kept = d;
      if (part == kInside) part = kAfter;
      (part == kBefore ? outer : inner) *= x.shape()[d];
    }
  }
  if (readable) return {x, outer, len, inner};
  // Otherwise one copy, with the reduced dims innermost.
  return {permute(x, rows_order).contiguous(), outputs, len, 1};
}

ReductionLayout dim_layout(const Tensor& x, int dim) {
  NoGradGuard no_grad;
  if (x.dim() == 0) return {x.contiguous(), 1, 1, 1};
  int64_t outer = 1, inner = 1;
  for (int i = 0; i < dim; ++i) outer *= x.shape()[i];
  for (int i = dim + 1; i < x.dim(); ++i) inner *= x.shape()[i];
  return {x.contiguous(), outer, x.shape()[dim], inner};
}


}  // namespace ember
