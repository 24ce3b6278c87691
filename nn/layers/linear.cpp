// Linear and Flatten.
#include "nn/layers/linear.h"

#include <cmath>

#include "nn/init.h"
#include "tensor/error.h"

namespace ember::nn {

Linear::Linear(int64_t in, int64_t out, bool with_bias) : in_features(in), out_features(out) {
  if (in <= 0 || out <= 0)
    throw ValueError("Linear: features must be positive, got in=" + std::to_string(in) + " out=" + std::to_string(out));
  weight = register_parameter("weight", empty({out, in}));
  if (with_bias) bias = register_parameter("bias", empty({out}));
  reset_parameters();
}

void Linear::reset_parameters() {
  init::kaiming_uniform_(weight, std::sqrt(5.0));
  if (bias.defined()) {
    const double bound = 1.0 / std::sqrt(static_cast<double>(in_features));
    init::uniform_(bias, -bound, bound);
  }
}

std::string Linear::extra_repr() const {
  return "in_features=" + std::to_string(in_features) + ", out_features=" + std::to_string(out_features) +
         ", bias=" + (bias.defined() ? "True" : "False");
}

Tensor Linear::forward(const Tensor& x) {
  if (x.dim() < 1 || x.size(-1) != in_features)
    throw ShapeError("Linear: input " + to_string(x.shape()) + " does not end in in_features=" +
                     std::to_string(in_features));
  return linear(x, weight, bias);
}

std::string Flatten::extra_repr() const {
  return "start_dim=" + std::to_string(start_dim) + ", end_dim=" + std::to_string(end_dim);
}

}  // namespace ember::nn
