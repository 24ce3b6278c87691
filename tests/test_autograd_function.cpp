// autograd::Function, custom functions with a hand-written backward: values and gradients against the
// same computation made of ember ops, gradcheck and gradgradcheck, list arguments and several outputs,
// non-differentiable outputs, outputs saved without a reference cycle, an output that is an input,
// every misuse's error, autocast through amp::register_policy; on a GPU, the same function on CUDA.
#include <any>
#include <memory>

#include "autograd/engine.h"
#include "autograd/function.h"
#include "autograd/gradcheck.h"
#include "tensor/autocast.h"
#include "tensor/primitive.h"
#include "tests/helpers.h"

using namespace ember;
using namespace ember_test;

const Device kCuda{DeviceType::cuda, 0};

namespace {

// swish with a slope: x * sigmoid(beta x); d/dx = s + beta x s (1 - s) with s = sigmoid(beta x).
struct ScaledSwish : autograd::Function<ScaledSwish> {
  static constexpr const char* name = "scaled_swish";
  static Tensor forward(FunctionContext& ctx, const Tensor& x, double beta) {
    ctx.save_for_backward({x});
    ctx.saved_data["beta"] = beta;
    return x * sigmoid(x * beta);
  }
  static std::vector<Tensor> backward(FunctionContext& ctx, std::vector<Tensor> grads) {
    const Tensor x = ctx.saved_tensors()[0];
    const double beta = std::any_cast<double>(ctx.saved_data.at("beta"));
    const Tensor s = sigmoid(x * beta);
    return {grads[0] * (s + x * beta * s * (1.0 - s)), Tensor()};
  }
};

Tensor composed_swish(const Tensor& x, double beta) { return x * sigmoid(x * beta); }

// exp saving its output; backward g * y, itself differentiable through the saved output.
struct SavedOutputExp : autograd::Function<SavedOutputExp> {
  static Tensor forward(FunctionContext& ctx, const Tensor& x) {
    Tensor y = exp(x);
    ctx.save_for_backward({y});
    return y;
  }
  static std::vector<Tensor> backward(FunctionContext& ctx, std::vector<Tensor> grads) {
    return {grads[0] * ctx.saved_tensors()[0]};
  }
};

// A list argument and two outputs: the weighted sum of the list and the index of the largest
// weight (an integer output, marked non-differentiable like a mask would be).
struct WeightedSum : autograd::Function<WeightedSum> {
  static constexpr const char* name = "weighted_sum";
  static std::vector<Tensor> forward(FunctionContext& ctx, const std::vector<Tensor>& xs, const Tensor& w) {
    Tensor total = xs[0] * w.narrow(0, 0, 1);
    for (size_t i = 1; i < xs.size(); ++i) total = total + xs[i] * w.narrow(0, static_cast<int64_t>(i), 1);
    Tensor best = argmax(w, 0);
    ctx.mark_non_differentiable({best});
    std::vector<Tensor> save = xs;
    save.push_back(w);
    ctx.save_for_backward(save);
    return {total, best};
  }
  static std::vector<Tensor> backward(FunctionContext& ctx, std::vector<Tensor> grads) {
    const std::vector<Tensor> saved = ctx.saved_tensors();
    const Tensor& w = saved.back();
    std::vector<Tensor> out, dws;
    for (size_t i = 0; i + 1 < saved.size(); ++i) {
      out.push_back(grads[0] * w.narrow(0, static_cast<int64_t>(i), 1));
      dws.push_back(sum(grads[0] * saved[i]).reshape({1}));
    }
    out.push_back(cat(dws, 0));
    return out;
  }
};

// Identity forward, negated gradient (the gradient reversal layer of domain adaptation).
struct GradientReversal : autograd::Function<GradientReversal> {
  static Tensor forward(FunctionContext&, const Tensor& x) { return x; }
  static std::vector<Tensor> backward(FunctionContext&, std::vector<Tensor> grads) { return {-grads[0]}; }
};

// Misbehaving backwards, one per error.
struct TooFewGradients : autograd::Function<TooFewGradients> {
  static constexpr const char* name = "too_few";
  static Tensor forward(FunctionContext&, const Tensor& x, double) { return x * 2.0; }
  static std::vector<Tensor> backward(FunctionContext&, std::vector<Tensor> g) { return {g[0] * 2.0}; }
};
struct GradientForANumber : autograd::Function<GradientForANumber> {
  static constexpr const char* name = "gradient_for_a_number";
  static Tensor forward(FunctionContext&, const Tensor& x, double) { return x * 2.0; }
  static std::vector<Tensor> backward(FunctionContext&, std::vector<Tensor> g) { return {g[0] * 2.0, g[0]}; }
};
struct WrongShape : autograd::Function<WrongShape> {
  static constexpr const char* name = "wrong_shape";
  static Tensor forward(FunctionContext&, const Tensor& x) { return x * 2.0; }
  static std::vector<Tensor> backward(FunctionContext&, std::vector<Tensor> g) { return {sum(g[0])}; }
};
struct ReadsSavedInForward : autograd::Function<ReadsSavedInForward> {
  static Tensor forward(FunctionContext& ctx, const Tensor& x) {
    ctx.save_for_backward({x});
    return ctx.saved_tensors()[0];
  }
  static std::vector<Tensor> backward(FunctionContext&, std::vector<Tensor> g) { return g; }
};

// Records needs_input_grad for a tensor, a number and a tensor.
struct Needs : autograd::Function<Needs> {
  static inline std::vector<bool> seen;
  static Tensor forward(FunctionContext& ctx, const Tensor& a, int, const Tensor& b) {
    seen = {ctx.needs_input_grad(0), ctx.needs_input_grad(1), ctx.needs_input_grad(2)};
    expect_error<IndexError>("slot 3", [&] { ctx.needs_input_grad(3); }, {"needs_input_grad(3)", "3 arguments"});
    return a + b;
  }
  static std::vector<Tensor> backward(FunctionContext&, std::vector<Tensor> g) { return {g[0], Tensor(), g[0]}; }
};

// The dtype each forward saw, for the autocast cases.
DType seen_input = DType::f64, seen_product = DType::f64;
template <const char* Name>
struct Probe : autograd::Function<Probe<Name>> {
  static constexpr const char* name = Name;
  static Tensor forward(FunctionContext& ctx, const Tensor& x, const Tensor& w) {
    ctx.save_for_backward({x, w});
    seen_input = x.dtype();
    Tensor y = matmul(x, w);  // matmul's own policy: lower
    seen_product = y.dtype();
    return y;
  }
  static std::vector<Tensor> backward(FunctionContext& ctx, std::vector<Tensor> g) {
    const std::vector<Tensor> xw = ctx.saved_tensors();
    return {matmul(g[0], xw[1].transpose(0, 1)), matmul(xw[0].transpose(0, 1), g[0])};
  }
};
constexpr char kProbeFp32[] = "test_probe_fp32";
constexpr char kProbeLower[] = "test_probe_lower";
constexpr char kProbeUnregistered[] = "test_probe_unregistered";

void check_swish_against_composition(Device device) {
  for (const double beta : {0.5, 1.5}) {
    const Tensor x0 = uniform_f64({3, 4}, -4, 4, 7).to(DType::f32).to(device);
    const Tensor a = x0.detach().requires_grad_(), b = x0.detach().requires_grad_();
    const Tensor g = uniform_f64({3, 4}, -1, 1, 8, false).to(DType::f32).to(device);
    const Tensor ya = ScaledSwish::apply(a, beta), yb = composed_swish(b, beta);
    CHECK(ya.device() == device);
    check_values(ya.to(kCPU), to_host(yb.to(kCPU)), tolerance(DType::f32), "forward");
    REQUIRE(ya.grad_fn());
    CHECK(std::string(ya.grad_fn()->name()) == "scaled_swish");
    autograd::backward({ya}, {g});
    autograd::backward({yb}, {g});
    check_values(a.grad().to(kCPU), to_host(b.grad().to(kCPU)), tolerance(DType::f32), "gradient");
  }
}

}  // namespace

TEST_SUITE("cpu") {

TEST_CASE("Function: values and gradients equal the composition's; gradcheck and gradgradcheck pass") {
  check_swish_against_composition(kCPU);
  const Tensor x = uniform_f64({2, 5}, -3, 3, 1);
  const autograd::SingleFunction f = [](const std::vector<Tensor>& in) { return ScaledSwish::apply(in[0], 1.5); };
  CHECK(gradcheck(f, {x}).entries == 100);
  CHECK(gradgradcheck(f, {x}).entries > 0);
}

TEST_CASE("Function: gradcheck catches a wrong backward") {
  struct Halved : autograd::Function<Halved> {
    static Tensor forward(FunctionContext&, const Tensor& x) { return x * x; }
    static std::vector<Tensor> backward(FunctionContext&, std::vector<Tensor> g) { return {g[0]}; }  // lacks 2x
  };
  const autograd::SingleFunction f = [](const std::vector<Tensor>& in) { return Halved::apply(in[0]); };
  CHECK_THROWS_AS(gradcheck(f, {uniform_f64({3}, 1, 2, 2)}), AutogradError);
}

TEST_CASE("Function: a list argument, two outputs, a non-differentiable one, needs_input_grad") {
  const Tensor x0 = uniform_f64({2, 3}, -1, 1, 3), x1 = uniform_f64({2, 3}, -1, 1, 4);
  const Tensor x2 = uniform_f64({2, 3}, -1, 1, 5, false), w = uniform_f64({3}, 0, 1, 6);
  const std::vector<Tensor> out = WeightedSum::apply(std::vector<Tensor>{x0, x1, x2}, w);
  REQUIRE(out.size() == 2);
  CHECK(out[0].grad_fn());
  CHECK_FALSE(out[1].grad_fn());
  CHECK_FALSE(out[1].requires_grad());
  CHECK(out[1].item<int64_t>() == argmax(w, 0).item<int64_t>());
  const autograd::MultiFunction f = [](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{WeightedSum::apply(std::vector<Tensor>{in[0], in[1], in[2]}, in[3])[0]};
  };
  CHECK(gradcheck(f, {x0, x1, x2, w}).entries > 0);
  // x2 needs no gradient: its slot reads false and gets none.
  autograd::backward({sum(out[0])});
  CHECK(x0.grad().defined());
  CHECK_FALSE(x2.grad().defined());
}

TEST_CASE("Function: needs_input_grad by argument slot, false for numbers and under no-grad") {
  const Tensor a = ones({2}).requires_grad_(), b = ones({2});
  Needs::apply(a, 3, b);
  CHECK(Needs::seen == std::vector<bool>{true, false, false});
  {
    NoGradGuard no_grad;
    const Tensor y = Needs::apply(a, 3, b);
    CHECK(Needs::seen == std::vector<bool>{false, false, false});
    CHECK_FALSE(y.grad_fn());
  }
}

TEST_CASE("Function: a saved output holds no cycle, and double backward goes through it") {
  std::weak_ptr<autograd::Node> node;
  {
    const Tensor x = uniform_f64({4}, -1, 1, 9);
    const Tensor y = SavedOutputExp::apply(x);
    node = y.grad_fn();
    CHECK_FALSE(node.expired());
    check_values(autograd::grad({sum(y)}, {x})[0], to_host(exp(x.detach())), tolerance(DType::f64), "gradient");
  }
  CHECK(node.expired());  // freed with its output: the saved output does not keep its node alive
  const autograd::SingleFunction f = [](const std::vector<Tensor>& in) { return SavedOutputExp::apply(in[0]); };
  CHECK(gradgradcheck(f, {uniform_f64({3}, -1, 1, 10)}).entries > 0);
}

TEST_CASE("Function: an output that is its input gets the node, the input keeps its own history") {
  const Tensor x = full({3}, 2.0).requires_grad_();
  const Tensor y = GradientReversal::apply(x);
  CHECK(x.is_leaf());
  CHECK_FALSE(x.grad_fn());
  REQUIRE(y.grad_fn());
  CHECK(y.raw_data() == x.raw_data());  // the same elements, no copy
  autograd::backward({sum(y * 3.0)});
  check_values(x.grad(), {{3}, {-3, -3, -3}}, tolerance(DType::f32), "reversed gradient");
}

TEST_CASE("Function: misuse raises AutogradError naming the function and the values") {
  const Tensor x = ones({2, 2}).requires_grad_();
  expect_error<AutogradError>("too few", [&] { autograd::backward({sum(TooFewGradients::apply(x, 1.0))}); },
                              {"backward of too_few", "returned 1 gradients", "took 2 arguments"});
  expect_error<AutogradError>("number slot", [&] { autograd::backward({sum(GradientForANumber::apply(x, 1.0))}); },
                              {"gradient_for_a_number", "argument 1", "not a tensor"});
  expect_error<AutogradError>("shape", [&] { autograd::backward({sum(WrongShape::apply(x))}); },
                              {"wrong_shape", "shape ()", "(2, 2)"});
  expect_error<AutogradError>("saved in forward", [&] { ReadsSavedInForward::apply(x); },
                              {"saved_tensors()", "in backward"});
  // A saved tensor written in place, then backward; a second backward after the first freed it.
  const Tensor z = ones({2}).requires_grad_() * 1.0;
  const Tensor y = ScaledSwish::apply(z, 1.0);
  z.add_(ones({2}));
  expect_error<AutogradError>("in-place", [&] { autograd::backward({sum(y)}); }, {"scaled_swish", "modified by an in-place"});
  const Tensor w = ones({2}).requires_grad_();
  const Tensor v = ScaledSwish::apply(w, 1.0);
  autograd::backward({sum(v)});
  expect_error<AutogradError>("twice", [&] { autograd::backward({sum(v)}); }, {"scaled_swish", "retain_graph"});
}

TEST_CASE("register_policy: a custom function joins autocast by name; errors name the op") {
  amp::register_policy(kProbeFp32, amp::Policy::fp32);
  amp::register_policy(kProbeFp32, amp::Policy::fp32);  // the same again: nothing happens
  amp::register_policy(kProbeLower, amp::Policy::lower);
  CHECK(amp::policy_of(kProbeFp32) == amp::Policy::fp32);
  CHECK_FALSE(amp::find_policy(kProbeUnregistered));
  const Tensor x = ones({2, 3}).to(DType::bf16), w = ones({3, 2}).requires_grad_();
  {
    amp::Autocast region(DeviceType::cpu, DType::bf16);
    // fp32: the arguments arrive in f32 and matmul inside is not autocast again.
    const Tensor y = Probe<kProbeFp32>::apply(x, w);
    CHECK(name(seen_input) == "float32");
    CHECK(name(seen_product) == "float32");
    CHECK(name(y.dtype()) == "float32");
    // lower: the arguments arrive in bf16; w's gradient still reaches it in f32.
    const Tensor z = Probe<kProbeLower>::apply(x.to(DType::f32), w);
    CHECK(name(seen_input) == "bfloat16");
    autograd::backward({sum(z.to(DType::f32))});
    CHECK(name(w.grad().dtype()) == "float32");
    // Not registered: forward sees the caller's dtypes and its ops are autocast one by one.
    Probe<kProbeUnregistered>::apply(x.to(DType::f32), w);
    CHECK(name(seen_input) == "float32");
    CHECK(name(seen_product) == "bfloat16");
  }
  Probe<kProbeFp32>::apply(x, w.to(DType::bf16));  // outside a region nothing is cast
  CHECK(name(seen_input) == "bfloat16");
  // A front end written with a primitive uses the registered policy through autocast_args.
  {
    amp::Autocast region(DeviceType::cpu, DType::bf16);
    auto [cast] = amp::autocast_args(kProbeLower, ones({2}));
    CHECK(name(cast.dtype()) == "bfloat16");
  }
  expect_error<ValueError>("empty", [] { amp::register_policy("", amp::Policy::fp32); }, {"empty"});
  expect_error<ValueError>("built in", [] { amp::register_policy("matmul", amp::Policy::fp32); },
                           {"'matmul'", "built-in", "lower"});
  expect_error<ValueError>("conflict", [] { amp::register_policy(kProbeFp32, amp::Policy::lower); },
                           {"test_probe_fp32", "fp32", "not lower"});
}

}  // TEST_SUITE("cpu")

EMBER_CUDA_TEST_CASE("cuda Function: the same custom function runs on CUDA with the composition's gradients") {
  check_swish_against_composition(kCuda);
}
