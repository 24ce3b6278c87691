// The primitive behind sort, argsort and topk (tensor/sort.cpp).
#pragma once

#include "tensor/primitive.h"

namespace ember {

// The indices of the first k elements of each row of a contiguous (rows, n) tensor, in the order of
// tensor/sort_key.h (ascending, or descending), ties in index order: a stable sort. Not
// differentiable: the front ends gather the values, so gradients flow through gather.
class SortRows final : public Primitive {
 public:
  static constexpr bool kDifferentiable = false;
  SortRows(int64_t k, bool descending) : k_(k), descending_(descending) {}
  const char* name() const override { return "sort"; }
  std::vector<OutputSpec> infer(const std::vector<Tensor>& in) const;
  EMBER_PRIMITIVE_KERNELS;

 private:
  int64_t k_;
  bool descending_;
};

}  // namespace ember
