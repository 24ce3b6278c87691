// 02_autograd_custom_op: reverse-mode autograd, then an op of your own with its own backward.
// Part 1 records a small graph, runs backward and checks the gradients against the derivatives
// worked by hand (accumulation into .grad, autograd::grad, NoGradGuard). Part 2 defines squareplus
// (Barron 2021, arXiv:2112.11687: y = (x + sqrt(x^2 + b)) / 2, a softplus made of algebra) as a
// primitive, the way every ember op is one: a class with infer(), a CPU kernel and a vjp written
// with public ops. It checks the vjp against finite differences (gradcheck), its own backward too
// (gradgradcheck: double backward comes free because the vjp is made of differentiable ops), and
// that gradcheck does catch a wrong gradient. Part 3 writes the same op the shorter way, when its forward
// can be made of ember ops: an autograd::Function (torch.autograd.Function's pattern), a forward of
// public ops and a hand-written backward, which runs on every device the ops run on, no kernel needed.
//
// Read next: tensor/primitive.h (Primitive, run(): how an op becomes an autograd node),
// autograd/engine.cpp (backward: the nodes in dependency order), autograd/function.h (custom
// functions: the context, list arguments, autocast for them), autograd/gradcheck.h (gradcheck,
// gradgradcheck), tensor/elementwise.cpp (the vjps of ember's own elementwise ops), and docs/code.md's
// "How to add an op" for an op that belongs in the library (its CUDA kernel, its test row).
//
//   ninja -C build examples/02_autograd_custom_op && build/examples/02_autograd_custom_op
#include <CLI/CLI.hpp>

#include <any>
#include <cmath>
#include <iostream>

#include "autograd/engine.h"
#include "autograd/function.h"
#include "autograd/gradcheck.h"
#include "checks.h"
#include "tensor/convert.h"
#include "tensor/ops.h"
#include "tensor/primitive.h"

using namespace ember;
using ember_examples::Checks;
using ember_examples::run_checked;

namespace {

// squareplus as a primitive. run() calls infer() for the output's shape and dtype, then the
// kernel of the inputs' device; when grad mode records, this object becomes the autograd node and
// keeps what kSaves asks for (here the input x, which the vjp reads).
class Squareplus final : public Primitive {
 public:
  static constexpr int kSaves = kSaveInputs;
  explicit Squareplus(double b) : b_(b) {}
  const char* name() const override { return "squareplus"; }
  std::vector<OutputSpec> infer(const std::vector<Tensor>& in) const { return {{in[0].shape(), in[0].dtype()}}; }

  // The front end passes a contiguous input; the output is a fresh contiguous tensor. 16-bit floats
  // compute in float (compute_t) and round once, as ember's own kernels do.
  void eval_cpu(const std::vector<Tensor>& in, std::vector<Tensor>& out) {
    visit_floating(in[0].dtype(), "squareplus", [&]<class T>() {
      using C = compute_t<T>;
      const T* x = in[0].data<T>();
      T* y = out[0].data<T>();
      const C b = static_cast<C>(b_);
      for (int64_t i = 0; i < in[0].numel(); ++i) {
        const C v = convert<C>(x[i]);
        y[i] = convert<T>((v + std::sqrt(v * v + b)) / 2);
      }
    });
  }
  // A library op would launch a kernel from cuda/ here (docs/code.md, "How to add an op").
  void eval_cuda(const std::vector<Tensor>&, std::vector<Tensor>&) {
    throw NotImplementedError("squareplus: this example has no CUDA kernel");
  }

  // dL/dx = dL/dy * dy/dx with dy/dx = (1 + x / sqrt(x^2 + b)) / 2. Public ops only, so backward can
  // itself be recorded (create_graph) and differentiated again.
  std::vector<Tensor> vjp(const std::vector<Tensor>& cotangents, const std::vector<Tensor>& inputs,
                          const std::vector<Tensor>&) override {
    const Tensor& x = inputs[0];
    return {cotangents[0] * ((x / sqrt(x * x + b_) + 1.0) * 0.5)};
  }

 private:
  double b_;
};

// The op's front end: checks its arguments (messages show the values), then runs the primitive.
Tensor squareplus(const Tensor& x, double b = 4.0) {
  if (!(b > 0)) throw ValueError("squareplus: b must be positive, got " + std::to_string(b));
  return run1(Squareplus(b), {x.contiguous()});
}

// squareplus again, as a custom function: forward made of ember ops (recorded as nothing: apply() runs
// it with grad mode off), backward written by hand from what forward saved.
struct SquareplusFunction : autograd::Function<SquareplusFunction> {
  static constexpr const char* name = "squareplus_function";  // named in errors and grad_fn
  static Tensor forward(FunctionContext& ctx, const Tensor& x, double b) {
    ctx.save_for_backward({x});  // inputs and outputs: an intermediate made here has no history (grad
    ctx.saved_data["b"] = b;     // mode was off), so a double backward through it would miss its x
    return (x + sqrt(x * x + b)) * 0.5;
  }
  // One entry per forward argument: x's gradient, and none for the number b.
  static std::vector<Tensor> backward(FunctionContext& ctx, std::vector<Tensor> grads) {
    const Tensor x = ctx.saved_tensors()[0];
    const double b = std::any_cast<double>(ctx.saved_data["b"]);
    return {grads[0] * ((x / sqrt(x * x + b) + 1.0) * 0.5), Tensor()};
  }
};

void autograd_basics(Checks& checks) {
  std::cout << "\n== autograd: record, backward, read .grad\n";
  const Tensor x = from_vector<float>({1, 2, 3}, {3}, TensorOptions().with_requires_grad());
  const Tensor w = from_vector<float>({0.5f, -1, 2}, {3}, TensorOptions().with_requires_grad());
  const Tensor loss = sum(w * x * x);  // L = sum_i w_i x_i^2
  std::cout << "L = " << loss << "\n";
  checks.expect(loss.grad_fn() && std::string(loss.grad_fn()->name()) == "sum",
                "the result of a recorded op points at its node (grad_fn): the graph is built as ops run");
  loss.backward({}, /*retain_graph=*/true);
  std::cout << "dL/dx = " << x.grad() << ", dL/dw = " << w.grad() << "\n";
  checks.expect(x.grad().to_vector<float>() == std::vector<float>{1, -4, 12}, "dL/dx_i = 2 w_i x_i");
  checks.expect(w.grad().to_vector<float>() == std::vector<float>{1, 4, 9}, "dL/dw_i = x_i^2");
  loss.backward();  // the graph was retained: a second backward adds to .grad
  checks.expect(w.grad().to_vector<float>() == std::vector<float>{2, 8, 18}, "backward accumulates into .grad");
  // autograd::grad returns gradients without touching .grad (what a gradient penalty needs, step 8).
  const Tensor gx = autograd::grad({sum(x * x)}, {x})[0];
  checks.expect(gx.to_vector<float>() == std::vector<float>{2, 4, 6}, "autograd::grad(sum(x^2), x) = 2x");
  {
    NoGradGuard no_grad;
    checks.expect(!(x * 2).requires_grad(), "under NoGradGuard nothing is recorded");
  }
}

void custom_op(Checks& checks) {
  std::cout << "\n== a custom op: squareplus as a primitive\n";
  Generator gen(7);
  const Tensor x = mul(randn({3, 4}, DType::f64, &gen), 3.0).requires_grad_();
  const Tensor y = squareplus(x);
  std::cout << "squareplus(" << x.select(0, 0).detach() << ")\n  = " << y.select(0, 0).detach() << "\n";
  const Tensor composed = (x + sqrt(x * x + 4.0)) * 0.5;
  checks.expect(allclose(y, composed, 1e-12, 1e-12), "the kernel computes (x + sqrt(x^2 + b)) / 2");
  checks.expect(std::string(y.grad_fn()->name()) == "squareplus", "its output's grad_fn is the primitive itself");
  const Tensor g_custom = autograd::grad({sum(y)}, {x})[0];
  const Tensor g_composed = autograd::grad({sum(composed)}, {x})[0];
  checks.expect(allclose(g_custom, g_composed, 1e-12, 1e-12),
                "its vjp gives the gradient autograd derives for the composition of ember's ops");

  // Finite differences in float64: every entry of the Jacobian, numerical against the vjp's.
  const auto fn = [](const std::vector<Tensor>& in) { return squareplus(in[0]); };
  const GradcheckResult first = gradcheck(fn, {x.detach().requires_grad_()});
  std::cout << "gradcheck: " << first.entries << " Jacobian entries, largest error " << first.max_abs_error << "\n";
  checks.expect(first.entries == 144, "gradcheck passes: the vjp matches finite differences");
  const GradcheckResult second = gradgradcheck(fn, {x.detach().requires_grad_()});
  std::cout << "gradgradcheck: " << second.entries << " entries, largest error " << second.max_abs_error << "\n";
  checks.expect(second.entries > 0, "gradgradcheck passes: the vjp's own backward is right too");

  // The check is only worth something if it fails on a wrong gradient: a hook that doubles
  // squareplus's gradient stands in for a vjp that forgot its factor 1/2.
  const auto wrong = [](const std::vector<Tensor>& in) {
    Tensor y = squareplus(in[0]);
    if (y.requires_grad()) y.register_hook([](const Tensor& g) { return g * 2; });
    return y;
  };
  bool caught = false;
  try {
    gradcheck(wrong, {x.detach().requires_grad_()});
  } catch (const AutogradError& e) {
    caught = true;
    std::cout << "gradcheck on a doubled gradient: " << e.what() << "\n";
  }
  checks.expect(caught, "gradcheck rejects a wrong gradient, naming the entry and both values");
}

void custom_function(Checks& checks) {
  std::cout << "\n== the same op as an autograd::Function: ember ops forward, a backward by hand\n";
  Generator gen(8);
  const Tensor x = mul(randn({3, 4}, DType::f64, &gen), 3.0).requires_grad_();
  const Tensor y = SquareplusFunction::apply(x, 4.0);
  checks.expect(allclose(y, squareplus(x), 1e-12, 1e-12), "it computes what the primitive computes");
  checks.expect(std::string(y.grad_fn()->name()) == "squareplus_function",
                "apply() records one node, the function's, however many ops forward ran");
  const auto fn = [](const std::vector<Tensor>& in) { return SquareplusFunction::apply(in[0], 4.0); };
  checks.expect(gradcheck(fn, {x.detach().requires_grad_()}).entries == 144, "gradcheck passes on its backward");
  checks.expect(gradgradcheck(fn, {x.detach().requires_grad_()}).entries > 0,
                "and gradgradcheck: backward is made of ember ops, so it is differentiable in turn");
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Step 2 of the example ladder: autograd, and a custom op whose backward gradcheck verifies.",
               "02_autograd_custom_op"};
  CLI11_PARSE(app, argc, argv);
  return run_checked("02_autograd_custom_op", [&](Checks& checks) {
    autograd_basics(checks);
    custom_op(checks);
    custom_function(checks);
  });
}
