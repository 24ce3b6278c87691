// Front ends and vjp of softmax / log_softmax.
#include "tensor/autocast.h"
#include "tensor/ops.h"
#include "tensor/primitives/linalg.h"

namespace ember {

namespace {
Tensor softmax_along(const Tensor& x_in, int64_t dim, bool log, std::optional<DType> dtype) {
  const char* op = log ? "log_softmax" : "softmax";
  const auto [x] = amp::autocast_args(op, dtype, x_in);
  const int d = wrap_dim(dim, x.dim(), op);
  const DType dt = dtype ? *dtype : is_floating(x.dtype()) ? x.dtype() : kDefaultFloat;
  return run1(Softmax(d, log), {x.to(dt)});
}
}  // namespace

Tensor softmax(const Tensor& x, int64_t dim, std::optional<DType> dtype) { return softmax_along(x, dim, false, dtype); }
Tensor log_softmax(const Tensor& x, int64_t dim, std::optional<DType> dtype) {
  return softmax_along(x, dim, true, dtype);
}

// With y the output and g its cotangent, reductions along dim kept as size 1:
//   softmax:     dx = y * (g - sum(g * y))
//   log_softmax: dx = g - exp(y) * sum(g)
std::vector<Tensor> Softmax::vjp(const std::vector<Tensor>& g, const std::vector<Tensor>&,
                                 const std::vector<Tensor>& out) {
  const Tensor& y = out[0];
  if (log_) return {g[0] - exp(y) * sum(g[0], {dim_}, /*keepdim=*/true)};
  return {y * (g[0] - sum(g[0] * y, {dim_}, /*keepdim=*/true))};
}

}  // namespace ember
