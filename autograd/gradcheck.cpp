// gradcheck and gradgradcheck: analytical Jacobians (autograd::grad, one output element at a time)
// against central finite differences. Written to be read: no batching, no cleverness.
#include "autograd/gradcheck.h"

#include <cmath>
#include <cstdio>

#include "autograd/engine.h"
#include "autograd/grad_mode.h"
#include "tensor/ops.h"

namespace ember::autograd {

namespace {

// "(1, 2)": the multi-index of flat (row-major) element k of `shape`.
std::string element_name(const Shape& shape, int64_t k) {
  Shape idx = Dims::filled(shape.size(), 0);
  for (int d = shape.size() - 1; d >= 0; --d) {
    idx[d] = k % shape[d];
    k /= shape[d];
  }
  return to_string(idx);
}

// The address of flat element k of an f64 tensor of any strides.
double* element_ptr(const Tensor& x, int64_t k) {
  int64_t offset = 0;
  for (int d = x.dim() - 1; d >= 0; --d) {
    offset += (k % x.shape()[d]) * x.strides()[d];
    k /= x.shape()[d];
  }
  return x.data<double>() + offset;
}

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.8g", v);
  return buf;
}

// Values of fn's floating outputs, without recording a graph.
std::vector<std::vector<double>> evaluate(const MultiFunction& fn, const std::vector<Tensor>& inputs) {
  NoGradGuard no_grad;
  std::vector<std::vector<double>> values;
  for (const Tensor& y : fn(inputs))
    if (is_floating(y.dtype())) values.push_back(y.to_vector<double>());
  return values;
}

void check_inputs(const char* who, const std::vector<Tensor>& inputs, std::vector<size_t>& diff) {
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& x = inputs[i];
    if (!x.defined()) throw ValueError(std::string(who) + ": input " + std::to_string(i) + " is undefined");
    if (is_floating(x.dtype()) && x.dtype() != DType::f64)
      throw DTypeError(std::string(who) + ": input " + std::to_string(i) + " is " + dtype_name(x.dtype()) +
                       "; finite differences need float64 inputs");
    if (!x.requires_grad()) continue;
    if (!x.device().is_cpu())
      throw DeviceError(std::string(who) + ": input " + std::to_string(i) + " is on " + x.device().str() +
                        "; finite differences perturb host memory, so check on CPU tensors");
    for (int d = 0; d < x.dim(); ++d)
      if (x.shape()[d] > 1 && x.strides()[d] == 0)
        throw ValueError(std::string(who) + ": input " + std::to_string(i) + " of shape " + to_string(x.shape()) +
                         " overlaps itself in memory (expanded); expand inside fn instead");
    diff.push_back(i);
  }
  if (diff.empty()) throw ValueError(std::string(who) + ": no input requires grad, nothing to check");
}

}  // namespace

GradcheckResult gradcheck(const MultiFunction& fn, const std::vector<Tensor>& inputs, double eps, double atol,
                          double rtol) {
  std::vector<size_t> diff;  // indices of the inputs we differentiate
  check_inputs("gradcheck", inputs, diff);
  std::vector<Tensor> wrt;
  for (size_t i : diff) wrt.push_back(inputs[i]);

  // Analytical Jacobians: jac[o][w][j * numel(input w) + k] = d output_o[j] / d input_w[k].
  std::vector<Tensor> outputs;
  std::vector<size_t> output_index;  // position of each floating output among fn's outputs
  if (!(eps > 0)) throw ValueError("gradcheck: eps must be positive, got " + std::to_string(eps));
  {
    EnableGradGuard enable;
    const std::vector<Tensor> all = fn(inputs);
    // A function with no output would pass with nothing checked.
    if (all.empty()) throw ValueError("gradcheck: the function returned no tensor, so there is nothing to check");
    for (size_t o = 0; o < all.size(); ++o)
      if (is_floating(all[o].dtype())) {
        outputs.push_back(all[o]);
        output_index.push_back(o);
      }
  }
  std::vector<std::vector<std::vector<double>>> jac(outputs.size());
  for (size_t o = 0; o < outputs.size(); ++o) {
    const Tensor& y = outputs[o];
    for (const Tensor& x : wrt) jac[o].emplace_back(static_cast<size_t>(y.numel() * x.numel()), 0.0);
    if (!y.requires_grad()) continue;  // y does not depend on any input: its Jacobian is zero
    for (int64_t j = 0; j < y.numel(); ++j) {
      std::vector<double> onehot(static_cast<size_t>(y.numel()), 0.0);
      onehot[j] = 1.0;
      const Tensor v = from_vector(onehot, y.shape()).to(y.dtype());
      const std::vector<Tensor> g = grad({y}, wrt, {v}, /*retain_graph=*/true, /*create_graph=*/false,
                                         /*allow_unused=*/true);
      for (size_t w = 0; w < wrt.size(); ++w) {
        if (!g[w].defined()) continue;
        const std::vector<double> row = g[w].to_vector<double>();
        std::copy(row.begin(), row.end(), jac[o][w].begin() + j * wrt[w].numel());
      }
    }
  }

  // Numerical Jacobians, one input element at a time, compared as they come.
  GradcheckResult result;
  for (size_t w = 0; w < wrt.size(); ++w) {
    const Tensor& x = wrt[w];
    for (int64_t k = 0; k < x.numel(); ++k) {
      double* p = element_ptr(x, k);
      const double original = *p;
      *p = original + eps;
      const auto plus = evaluate(fn, inputs);
      *p = original - eps;
      const auto minus = evaluate(fn, inputs);
      *p = original;
      for (size_t o = 0; o < outputs.size(); ++o) {
        for (int64_t j = 0; j < outputs[o].numel(); ++j) {
          const double numerical = (plus[o][j] - minus[o][j]) / (2 * eps);
          const double analytical = jac[o][w][j * x.numel() + k];
          const double error = std::fabs(analytical - numerical);
          result.max_abs_error = std::max(result.max_abs_error, error);
          ++result.entries;
          if (error <= atol + rtol * std::fabs(numerical)) continue;  // NaN fails here too
          throw AutogradError("gradcheck: Jacobian mismatch for input " + std::to_string(diff[w]) + " (shape " +
                              to_string(x.shape()) + ") element " + element_name(x.shape(), k) + ", output " +
                              std::to_string(output_index[o]) + " element " + element_name(outputs[o].shape(), j) +
                              ": numerical " + num(numerical) + " vs analytical " + num(analytical) +
                              " (difference " + num(error) + " > atol " + num(atol) + " + rtol " + num(rtol) +
                              " * |numerical|)");
        }
      }
    }
  }
  return result;
}

GradcheckResult gradgradcheck(const MultiFunction& fn, const std::vector<Tensor>& inputs, double eps, double atol,
                              double rtol) {
  std::vector<size_t> diff;
  check_inputs("gradgradcheck", inputs, diff);

  // Random cotangents for fn's floating outputs, from a fixed seed so that a failure reproduces.
  Generator gen(20240601);
  std::vector<Tensor> cotangents;
  {
    EnableGradGuard enable;
    for (const Tensor& y : fn(inputs))
      if (is_floating(y.dtype()))
        cotangents.push_back(randn(y.shape(), TensorOptions(DType::f64).with_requires_grad(), &gen));
  }

  // (inputs, cotangents) -> the vector-Jacobian products of fn, recorded for differentiation.
  const size_t n = inputs.size();
  const MultiFunction first_derivative = [&](const std::vector<Tensor>& args) {
    EnableGradGuard enable;
    const std::vector<Tensor> xs(args.begin(), args.begin() + static_cast<std::ptrdiff_t>(n));
    std::vector<Tensor> roots, root_grads, wrt;
    size_t c = 0;
    for (const Tensor& y : fn(xs)) {
      if (!is_floating(y.dtype())) continue;
      if (y.requires_grad()) {
        roots.push_back(y);
        root_grads.push_back(args[n + c].to(y.dtype()));
      }
      ++c;
    }
    for (size_t i : diff) wrt.push_back(xs[i]);
    std::vector<Tensor> grads(wrt.size());
    if (!roots.empty()) grads = grad(roots, wrt, root_grads, /*retain_graph=*/true, /*create_graph=*/true, true);
    for (size_t w = 0; w < wrt.size(); ++w)
      if (!grads[w].defined()) grads[w] = zeros_like(wrt[w]);
    return grads;
  };

  std::vector<Tensor> args = inputs;
  args.insert(args.end(), cotangents.begin(), cotangents.end());
  try {
    return gradcheck(first_derivative, args, eps, atol, rtol);
  } catch (const AutogradError& e) {
    throw AutogradError("gradgradcheck: the first derivative's Jacobian is wrong (inputs 0.." + std::to_string(n - 1) +
                        " are fn's inputs, the rest the cotangents of its outputs; outputs are the gradients of "
                        "the inputs that require grad). " + e.what());
  }
}

namespace {
MultiFunction as_multi(const SingleFunction& fn) {
  return [fn](const std::vector<Tensor>& xs) { return std::vector<Tensor>{fn(xs)}; };
}
}  // namespace

GradcheckResult gradcheck(const SingleFunction& fn, const std::vector<Tensor>& inputs, double eps, double atol,
                          double rtol) {
  return gradcheck(as_multi(fn), inputs, eps, atol, rtol);
}

GradcheckResult gradgradcheck(const SingleFunction& fn, const std::vector<Tensor>& inputs, double eps, double atol,
                              double rtol) {
  return gradgradcheck(as_multi(fn), inputs, eps, atol, rtol);
}

}  // namespace ember::autograd
