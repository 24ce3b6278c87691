#include "tensor/layout.h"

#include <algorithm>
#include <numeric>

#include "tensor/ops.h"

namespace ember {

namespace {

// Whether t's elements fill a block exactly once, taking its dims by descending stride (a stable
// sort: size-1 dims keep their logical place among equal strides); when they do and `fresh` is given,
// the strides of a fresh dense tensor with t's shape in that dim order. One sort on the stack: every
// elementwise op asks this of its inputs.
bool dense_in_stride_order(const Tensor& t, Strides* fresh) {
  const int rank = t.dim();
  int order[kMaxDims];
  std::iota(order, order + rank, 0);
  std::stable_sort(order, order + rank, [&](int a, int b) { return t.stride(a) > t.stride(b); });
  if (fresh) *fresh = Dims::filled(rank, 0);
  int64_t expected = 1, step = 1;  // step: as expected, but a size-0 dim does not zero the outer strides
  for (int k = rank - 1; k >= 0; --k) {
    const int d = order[k];
    if (t.size(d) != 1 && t.stride(d) != expected) return false;
    expected *= t.size(d);
    if (fresh) (*fresh)[d] = step;
    step *= std::max<int64_t>(t.size(d), 1);
  }
  return true;
}

}  // namespace

bool is_non_overlapping_and_dense(const Tensor& t) { return t.is_contiguous() || dense_in_stride_order(t, nullptr); }

Strides dense_layout_of(const Tensor& t) {
  Strides strides;
  if (t.is_contiguous() || !dense_in_stride_order(t, &strides)) return {};
  return strides;
}

bool is_channels_last(const Tensor& x) {
  if (x.dim() != 4 || x.is_contiguous()) return false;
  int64_t expected = 1;
  for (int d : {1, 3, 2, 0}) {  // NHWC strides, ignoring those of size-1 dims (never used)
    if (x.size(d) != 1 && x.stride(d) != expected) return false;
    expected *= x.size(d);
  }
  return true;
}

Tensor to_channels_last(const Tensor& x) {
  if (x.dim() != 4)
    throw ShapeError("to_channels_last: expected a 4-D tensor (N, C, H, W), got " + to_string(x.shape()));
  if (is_channels_last(x)) return x;
  return permute(contiguous(permute(x, {0, 2, 3, 1})), {0, 3, 1, 2});
}

Strides elementwise_output_layout(const std::vector<Tensor>& inputs, const Shape& out) {
  for (const Tensor& t : inputs) {
    if (!(t.shape() == out)) continue;
    if (t.is_contiguous()) return {};
    Strides strides;
    if (dense_in_stride_order(t, &strides)) return strides;
  }
  return {};
}

}  // namespace ember
