#include "tensor/layout.h"

#include <algorithm>
#include <numeric>

#include "tensor/ops.h"

namespace ember {

namespace {

// t's dims from outermost to innermost in memory: by descending stride, size-1 dims kept in their
// logical place relative to equal strides (a stable sort), so a contiguous tensor keeps 0, 1, ...
std::vector<int> memory_order(const Tensor& t) {
  std::vector<int> order(static_cast<size_t>(t.dim()));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return t.stride(a) > t.stride(b); });
  return order;
}

}  // namespace

bool is_non_overlapping_and_dense(const Tensor& t) {
  if (t.is_contiguous()) return true;
  int64_t expected = 1;
  const std::vector<int> order = memory_order(t);
  for (auto d = order.rbegin(); d != order.rend(); ++d) {
    if (t.size(*d) == 1) continue;
    if (t.stride(*d) != expected) return false;
    expected *= t.size(*d);
  }
  return true;
}

Strides dense_layout_of(const Tensor& t) {
  if (t.is_contiguous() || !is_non_overlapping_and_dense(t)) return {};
  Strides strides = Dims::filled(t.dim(), 0);
  int64_t step = 1;
  const std::vector<int> order = memory_order(t);
  for (auto d = order.rbegin(); d != order.rend(); ++d) {
    strides[*d] = step;
    step *= std::max<int64_t>(t.size(*d), 1);
  }
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
  for (const Tensor& t : inputs)
    if (t.shape() == out && is_non_overlapping_and_dense(t)) return dense_layout_of(t);
  return {};
}

}  // namespace ember
