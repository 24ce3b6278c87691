/// @file
/// Parameter initialisation with PyTorch's formulas (torch.nn.init). Each function writes into its
/// tensor in place under NoGradGuard, draws from `gen` (the default generator when null) and
/// returns the tensor; a tensor that is undefined (ValueError) or not floating (DTypeError) is refused.
#pragma once

#include <optional>
#include <string>

#include "tensor/ops.h"

namespace ember::nn::init {

/// Which fan the Kaiming initialisations scale by: fan_in keeps the forward pass's variance, fan_out the
/// backward's.
enum class FanMode { fan_in, fan_out };

/// A tensor's fans (calculate_fan_in_and_fan_out).
struct Fans {
  /// inputs and outputs a unit sees: size(1) and size(0) times the receptive field @{
  int64_t fan_in, fan_out;
  /// @}
};

/// The recommended gain for a nonlinearity: linear/conv*/sigmoid 1, tanh 5/3, relu sqrt(2),
/// leaky_relu sqrt(2 / (1 + slope^2)) (slope `param`, default 0.01), selu 3/4; ValueError for others.
double calculate_gain(const std::string& nonlinearity, std::optional<double> param = {});
/// fan_in = size(1) * receptive field, fan_out = size(0) * receptive field (ValueError below 2 dims).
Fans calculate_fan_in_and_fan_out(const Tensor& t);
int64_t fan_in(const Tensor& t);   ///< calculate_fan_in_and_fan_out(t).fan_in.
int64_t fan_out(const Tensor& t);  ///< calculate_fan_in_and_fan_out(t).fan_out.

Tensor& uniform_(Tensor& t, double a = 0.0, double b = 1.0, Generator* gen = nullptr);  ///< U(a, b).
/// N(mean, std^2); ValueError for std < 0.
Tensor& normal_(Tensor& t, double mean = 0.0, double std = 1.0, Generator* gen = nullptr);
Tensor& constant_(Tensor& t, double value);  ///< Every element `value`.
Tensor& zeros_(Tensor& t);                   ///< Every element 0.
Tensor& ones_(Tensor& t);                    ///< Every element 1.
/// U(-bound, bound) with bound = gain(nonlinearity, a) * sqrt(3 / fan).
Tensor& kaiming_uniform_(Tensor& t, double a = 0.0, FanMode mode = FanMode::fan_in,
                         const std::string& nonlinearity = "leaky_relu", Generator* gen = nullptr);
/// N(0, std^2) with std = gain(nonlinearity, a) / sqrt(fan).
Tensor& kaiming_normal_(Tensor& t, double a = 0.0, FanMode mode = FanMode::fan_in,
                        const std::string& nonlinearity = "leaky_relu", Generator* gen = nullptr);
/// U(-a, a) with a = gain * sqrt(6 / (fan_in + fan_out)).
Tensor& xavier_uniform_(Tensor& t, double gain = 1.0, Generator* gen = nullptr);
/// N(0, std^2) with std = gain * sqrt(2 / (fan_in + fan_out)).
Tensor& xavier_normal_(Tensor& t, double gain = 1.0, Generator* gen = nullptr);
/// N(mean, std^2) restricted to [a, b] (exactly: out-of-range draws are redrawn).
Tensor& trunc_normal_(Tensor& t, double mean = 0.0, double std = 1.0, double a = -2.0, double b = 2.0,
                      Generator* gen = nullptr);

}  // namespace ember::nn::init
