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
// 16-bit outputs compute this in f32 and round dx once (sum(g) over 70000 elements is inf in f16).
std::vector<Tensor> Softmax::vjp(const std::vector<Tensor>& g_in, const std::vector<Tensor>&,
                                 const std::vector<Tensor>& out) {
  const DType ct = opmath_dtype(out[0].dtype());
  const Tensor y = out[0].to(ct), g = g_in[0].to(ct);
  if (log_) return {g - exp(y) * sum(g, {dim_}, /*keepdim=*/true)};
  return {y * (g - sum(g * y, {dim_}, /*keepdim=*/true))};
}

}  // namespace ember
