// sort, argsort and topk: the dim moved last and made contiguous, one SortRows over the rows, the
// indices moved back and the values gathered from the input.
#include "tensor/sort.h"

#include "tensor/autocast.h"
#include "tensor/primitives/sort.h"

namespace ember {

std::vector<OutputSpec> SortRows::infer(const std::vector<Tensor>& in) const {
  const Tensor& x = in[0];
  if (x.dim() != 2 || (x.numel() > 0 && !x.is_contiguous()))  // an empty tensor's strides do not matter
    throw ShapeError("sort: the primitive takes a contiguous (rows, n) tensor, got shape " + to_string(x.shape()));
  if (k_ < 0 || k_ > x.size(1))
    throw IndexError("sort: k = " + std::to_string(k_) + " of rows of " + std::to_string(x.size(1)));
  return {{{x.size(0), k_}, DType::i64}};
}

namespace {

// The first k of x's elements along dim in sort order, and their indices.
ValuesIndices sorted_along(const Tensor& x_in, int64_t dim, int64_t k, bool descending, const char* op) {
  const auto [x] = amp::autocast_args(op, x_in);
  const Tensor x1 = x.dim() == 0 ? reshape(x, {1}) : x;
  const int d = wrap_dim(dim, x1.dim(), op);
  const int64_t n = x1.size(d);
  if (k < 0 || k > n)
    throw IndexError(std::string(op) + ": k = " + std::to_string(k) + " is out of range for dim " + std::to_string(d) +
                     " of size " + std::to_string(n) + " (shape " + to_string(x.shape()) + ")");
  const Tensor rows_last = contiguous(transpose(x1, d, -1));
  Shape lead = rows_last.shape();
  lead.erase(lead.size() - 1);
  const Tensor sorted = run1(SortRows(k, descending), {reshape(rows_last, {numel(lead), n})});
  Shape out_shape = lead;
  out_shape.push_back(k);
  const Tensor indices = contiguous(transpose(reshape(sorted, out_shape), d, -1));
  const Tensor values = gather(x1, d, indices);
  if (x.dim() == 0) return {reshape(values, {}), reshape(indices, {})};
  return {values, indices};
}

}  // namespace

ValuesIndices sort(const Tensor& x, int64_t dim, bool descending) {
  const int64_t n = x.dim() == 0 ? 1 : x.size(wrap_dim(dim, x.dim(), "sort"));
  return sorted_along(x, dim, n, descending, "sort");
}

Tensor argsort(const Tensor& x, int64_t dim, bool descending) { return sort(x, dim, descending).indices; }

ValuesIndices topk(const Tensor& x, int64_t k, int64_t dim, bool largest) {
  return sorted_along(x, dim, k, largest, "topk");
}

}  // namespace ember
