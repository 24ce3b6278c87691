/// @file
/// Finite-difference checks of backward formulas (the test every differentiable op must pass).
///
/// gradcheck(fn, inputs) compares, for every input that requires grad, the analytical Jacobian
/// d fn(inputs) / d input (one backward per output element, through autograd::grad with a one-hot
/// grad_output) against central differences (fn(x + eps) - fn(x - eps)) / (2 eps), entry by entry:
///     |analytical - numerical| <= atol + rtol * |numerical|
/// Every floating input must be f64 (finite differences in f32 are noise); integer and bool inputs
/// (indices, masks) are passed through untouched. Inputs must not overlap in memory (no expanded
/// tensors): expand inside fn instead. Only floating outputs are differentiated.
///
/// gradgradcheck(fn, inputs) checks second derivatives: it runs gradcheck on
///     (inputs, v) -> autograd::grad(fn(inputs), inputs, v, create_graph=true)
/// with random cotangents v that also require grad, so the backward of every vjp is checked too.
///
/// Both return statistics on success and throw AutogradError naming the input index, the element,
/// and the numerical and analytical values on the first mismatch.
#pragma once

#include <functional>
#include <vector>

#include "tensor/tensor.h"

namespace ember::autograd {

/// A function of tensors to check, with several outputs.
using MultiFunction = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;
/// A function of tensors to check, with one output.
using SingleFunction = std::function<Tensor(const std::vector<Tensor>&)>;

/// What a passing check reports.
struct GradcheckResult {
  int64_t entries = 0;         ///< Jacobian entries compared
  double max_abs_error = 0.0;  ///< largest |analytical - numerical| seen
};

/// Checks fn's first derivatives against central differences of step `eps` (see the file's
/// description); AutogradError at the first mismatch.
GradcheckResult gradcheck(const MultiFunction& fn, const std::vector<Tensor>& inputs, double eps = 1e-6,
                          double atol = 1e-5, double rtol = 1e-3);
/// gradcheck of a function with one output.
GradcheckResult gradcheck(const SingleFunction& fn, const std::vector<Tensor>& inputs, double eps = 1e-6,
                          double atol = 1e-5, double rtol = 1e-3);

/// Checks fn's second derivatives: gradcheck of its vjp (see the file's description).
GradcheckResult gradgradcheck(const MultiFunction& fn, const std::vector<Tensor>& inputs, double eps = 1e-6,
                              double atol = 1e-5, double rtol = 1e-3);
/// gradgradcheck of a function with one output.
GradcheckResult gradgradcheck(const SingleFunction& fn, const std::vector<Tensor>& inputs, double eps = 1e-6,
                              double atol = 1e-5, double rtol = 1e-3);

}  // namespace ember::autograd

namespace ember {
using autograd::gradcheck;
using autograd::gradgradcheck;
using autograd::GradcheckResult;
}  // namespace ember
