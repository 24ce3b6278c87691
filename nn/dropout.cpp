// dropout as a composite: a uniform draw from the Philox stream, a comparison and a product.
#include "nn/dropout.h"

#include <cmath>
#include <string>

#include "tensor/autocast.h"

namespace ember {

Tensor dropout(const Tensor& input_in, double p, bool training, Generator* gen) {
  const auto [input] = amp::autocast_args("dropout", input_in);
  if (!(p >= 0 && p <= 1)) throw ValueError("dropout: probability has to be between 0 and 1, but got " + std::to_string(p));
  if (!is_floating(input.dtype()))
    throw DTypeError(std::string("dropout: expected a floating input, got ") + dtype_name(input.dtype()));
  if (!training || p == 0) return input;
  if (p == 1) return input * 0.0;  // zeros, with a (zero) gradient path as in PyTorch
  const Tensor u = rand(input.shape(), TensorOptions(DType::f32).with_device(input.device()), gen);
  // The 0/1 mask first, then 1 / (1 - p) as a scalar: 16-bit inputs are scaled in f32 and rounded
  // once, not by a 16-bit copy of the scale.
  return input * ge(u, p).to(input.dtype()) * (1.0 / (1.0 - p));
}

}  // namespace ember
