// Front ends of the cumulative ops: cumsum runs its primitive, whose vjp is the reverse cumsum;
// cumprod is composed of multiplications so that autograd differentiates it exactly, zeros included.
#include "tensor/autocast.h"
#include "tensor/ops.h"
#include "tensor/primitives/scan.h"

namespace ember {

namespace {

// PyTorch's result dtype of cumsum and cumprod: the given one, else x's floating dtype, else i64.
DType scan_dtype(const char* op, const Tensor& x, std::optional<DType> dtype) {
  if (dtype && *dtype == DType::boolean) throw DTypeError(std::string(op) + ": dtype bool is not supported");
  if (dtype) return *dtype;
  return is_floating(x.dtype()) ? x.dtype() : DType::i64;
}

// x converted to the result dtype, a 0-dim x seen as one element (dim 0 or -1, as in PyTorch).
struct ScanInput {
  Tensor values;
  int dim;
};
ScanInput scan_input(const char* op, const Tensor& x, int64_t dim, std::optional<DType> dtype) {
  const int d = wrap_dim(dim, x.dim(), op);
  const Tensor converted = x.to(scan_dtype(op, x, dtype));
  return {x.dim() == 0 ? reshape(converted, {1}) : converted, d};
}

Tensor like_input(const Tensor& y, const Tensor& x) { return x.dim() == 0 ? reshape(y, {}) : y; }

}  // namespace

std::vector<Tensor> CumulativeSum::vjp(const std::vector<Tensor>& g, const std::vector<Tensor>&,
                                       const std::vector<Tensor>&) {
  // out[i] = sum_{j <= i} x[j], so dx[j] = sum_{i >= j} g[i]: the cumulative sum from the other end.
  return {run1(CumulativeSum(dim_, !reverse_), {g[0]})};
}

Tensor cumsum(const Tensor& x_in, int64_t dim, std::optional<DType> dtype) {
  const auto [x] = amp::autocast_args("cumsum", dtype, x_in);
  const ScanInput in = scan_input("cumsum", x, dim, dtype);
  return like_input(run1(CumulativeSum(in.dim, false), {in.values}), x);
}

Tensor cumprod(const Tensor& x_in, int64_t dim, std::optional<DType> dtype) {
  const auto [x] = amp::autocast_args("cumprod", dtype, x_in);
  const ScanInput in = scan_input("cumprod", x, dim, dtype);
  // Hillis and Steele's scan: after the step of `shift`, y[i] holds the product of x[i - 2 shift + 1 .. i].
  // log2(n) multiplications of the whole tensor; the gradient of each is exact where x has zeros,
  // which the shortcut grad = reverse_cumsum(g y) / x is not.
  // 16-bit inputs multiply in f32 and round once, as cumsum accumulates them.
  const DType result = in.values.dtype();
  Tensor y = in.values.to(opmath_dtype(result));
  const int64_t n = y.size(in.dim);
  for (int64_t shift = 1; shift < n; shift *= 2) {
    const Tensor kept = narrow(y, in.dim, 0, shift);
    const Tensor multiplied = mul(narrow(y, in.dim, shift, n - shift), narrow(y, in.dim, 0, n - shift));
    y = cat({kept, multiplied}, in.dim);
  }
  return like_input(y.to(result), x);
}

}  // namespace ember
