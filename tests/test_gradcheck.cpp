// gradcheck (finite differences in f64) for every differentiable op, gradgradcheck for the ones
// whose vjps are themselves differentiated (double backward), and tests of gradcheck itself. The op
// checks run again on CUDA (the 'cuda' suite): the checked function then moves its f64 inputs to the
// GPU and its outputs back, so both the finite differences and the analytical Jacobian come from the
// CUDA kernels and vjps.
#include <cmath>
#include <limits>

#include "autograd/gradcheck.h"
#include "nn/attention.h"
#include "tests/helpers.h"

using namespace ember;
using namespace ember_test;

namespace {

using Fn = std::function<Tensor(const std::vector<Tensor>&)>;
using MultiFn = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;

// The device the checked functions run on; gradcheck itself perturbs inputs on the CPU.
Device g_device = kCPU;
struct RunOn {
  explicit RunOn(Device d) { g_device = d; }
  ~RunOn() { g_device = kCPU; }
};
// A constant a checked function uses (a mask, an index), on the device the functions run on.
Tensor dev(const Tensor& t) { return t.to(g_device); }

std::vector<Tensor> to_device(const std::vector<Tensor>& xs, Device d) {
  std::vector<Tensor> out;
  for (const Tensor& x : xs) out.push_back(x.to(d));  // differentiable: the gradient copies back
  return out;
}
// fn run on g_device: inputs moved there, outputs moved back to the CPU, where gradcheck reads them.
MultiFn on_device(const MultiFn& fn) {
  if (g_device.is_cpu()) return fn;
  return [fn, d = g_device](const std::vector<Tensor>& x) { return to_device(fn(to_device(x, d)), kCPU); };
}
Fn on_device(const Fn& fn) {
  if (g_device.is_cpu()) return fn;
  return [fn, d = g_device](const std::vector<Tensor>& x) { return fn(to_device(x, d)).to(kCPU); };
}

// Runs gradcheck and turns its exception into a test failure naming the case.
void check(const std::string& what, const Fn& fn, const std::vector<Tensor>& inputs) {
  try {
    const GradcheckResult r = gradcheck(on_device(fn), inputs);
    CHECK_MESSAGE(r.entries > 0, what);
  } catch (const std::exception& e) {
    FAIL_CHECK(what, ": ", std::string(e.what()));
  }
}
void check_multi(const std::string& what, const MultiFn& fn, const std::vector<Tensor>& inputs) {
  try {
    gradcheck(on_device(fn), inputs);
    CHECK(true);
  } catch (const std::exception& e) {
    FAIL_CHECK(what, ": ", std::string(e.what()));
  }
}
void check2(const std::string& what, const Fn& fn, const std::vector<Tensor>& inputs) {
  try {
    const GradcheckResult r = gradgradcheck(on_device(fn), inputs);
    CHECK_MESSAGE(r.entries > 0, what);
  } catch (const std::exception& e) {
    FAIL_CHECK(what, " (second order): ", std::string(e.what()));
  }
}

uint64_t next_seed() {
  static uint64_t s = 1;
  return s++;
}
// f64 leaf requiring grad, uniform in [lo, hi].
Tensor u(const Shape& s, double lo = -2, double hi = 2) { return uniform_f64(s, lo, hi, next_seed()); }
// f64 leaf whose values have magnitude in [lo, hi] with random signs (away from 0).
Tensor away_from_zero(const Shape& s, double lo = 0.3, double hi = 2) {
  std::vector<double> v = random_values(numel(s), DType::f64, lo, hi, false, next_seed());
  const std::vector<double> signs = random_values(numel(s), DType::f64, 0, 1, true, next_seed());
  for (size_t i = 0; i < v.size(); ++i) v[i] *= signs[i] != 0 ? 1 : -1;
  return from_vector(v, s).requires_grad_(true);
}
// f64 leaf holding a shuffled arithmetic sequence (n must not be a multiple of 7): distinct values spaced `gap` apart (no ties,
// so max/min and friends are differentiable there).
Tensor distinct(const Shape& s, double gap = 0.37) {
  const int64_t n = numel(s);
  std::vector<double> v(static_cast<size_t>(n));
  // (+0.05 keeps |values| distinct too, for norm p=inf.)
  for (int64_t i = 0; i < n; ++i) v[i] = (static_cast<double>((i * 7) % n) - n / 2.0) * gap + 0.05;
  return from_vector(v, s).requires_grad_(true);
}
Tensor index(const std::vector<int64_t>& v, const Shape& s) { return dev(from_vector(v, s)); }

void unary_ops() {
  const Shape s{2, 3};
  check("neg", [](const auto& x) { return neg(x[0]); }, {u(s)});
  check("abs", [](const auto& x) { return abs(x[0]); }, {away_from_zero(s)});
  check("sign", [](const auto& x) { return sign(x[0]); }, {away_from_zero(s)});
  check("square", [](const auto& x) { return square(x[0]); }, {u(s)});
  check("relu", [](const auto& x) { return relu(x[0]); }, {away_from_zero(s)});
  check("clamp", [](const auto& x) { return clamp(x[0], -1.0, 1.0); }, {from_vector<double>({-1.7, -0.4, 0.2, 0.9, 1.3, 2.2}, s).requires_grad_(true)});
  check("clamp(min)", [](const auto& x) { return clamp(x[0], 0.1, std::nullopt); }, {away_from_zero(s)});
  check("exp", [](const auto& x) { return exp(x[0]); }, {u(s)});
  check("log", [](const auto& x) { return log(x[0]); }, {u(s, 0.3, 3)});
  check("log1p", [](const auto& x) { return log1p(x[0]); }, {u(s, -0.5, 3)});
  check("sqrt", [](const auto& x) { return sqrt(x[0]); }, {u(s, 0.3, 3)});
  check("rsqrt", [](const auto& x) { return rsqrt(x[0]); }, {u(s, 0.3, 3)});
  check("sin", [](const auto& x) { return sin(x[0]); }, {u(s, -3, 3)});
  check("cos", [](const auto& x) { return cos(x[0]); }, {u(s, -3, 3)});
  check("tanh", [](const auto& x) { return tanh(x[0]); }, {u(s)});
  check("sigmoid", [](const auto& x) { return sigmoid(x[0]); }, {u(s, -4, 4)});
  check("gelu", [](const auto& x) { return gelu(x[0]); }, {u(s, -3, 3)});
  check("gelu(tanh)", [](const auto& x) { return gelu(x[0], true); }, {u(s, -3, 3)});
  check("silu", [](const auto& x) { return silu(x[0]); }, {u(s, -4, 4)});
  check("erf", [](const auto& x) { return erf(x[0]); }, {u(s)});
  check("reciprocal", [](const auto& x) { return reciprocal(x[0]); }, {away_from_zero(s, 0.5, 2)});
  for (double e : {2.0, 3.0, -1.0, 0.0, 1.0})
    check("pow(x, " + std::to_string(e) + ")", [e](const auto& x) { return pow(x[0], e); }, {away_from_zero(s)});
  for (double e : {0.5, 2.5, -1.5})
    check("pow(x, " + std::to_string(e) + ")", [e](const auto& x) { return pow(x[0], e); }, {u(s, 0.3, 2)});
}

void binary_ops() {
  struct Pair {
    Shape a, b;
  };
  const std::vector<Pair> shapes = {{{2, 3}, {2, 3}}, {{3, 1, 4}, {2, 4}}, {{2, 3}, {}}, {{4, 1}, {1, 3}}};
  for (const auto& p : shapes) {
    const std::string sh = std::string(" ").append(to_string(p.a)).append(" with ").append(to_string(p.b));
    check("add" + sh, [](const auto& x) { return add(x[0], x[1]); }, {u(p.a), u(p.b)});
    check("sub" + sh, [](const auto& x) { return sub(x[0], x[1]); }, {u(p.a), u(p.b)});
    check("mul" + sh, [](const auto& x) { return mul(x[0], x[1]); }, {u(p.a), u(p.b)});
    check("div" + sh, [](const auto& x) { return div(x[0], x[1]); }, {u(p.a), away_from_zero(p.b, 0.5, 2)});
    check("pow" + sh, [](const auto& x) { return pow(x[0], x[1]); }, {u(p.a, 0.3, 2), u(p.b, -2, 2)});
    // maximum/minimum away from ties: a in [-2, -0.2] u [0.2, 2], b in (-0.1, 0.1).
    check("maximum" + sh, [](const auto& x) { return maximum(x[0], x[1]); }, {away_from_zero(p.a, 0.2, 2), u(p.b, -0.1, 0.1)});
    check("minimum" + sh, [](const auto& x) { return minimum(x[0], x[1]); }, {away_from_zero(p.a, 0.2, 2), u(p.b, -0.1, 0.1)});
  }
  check("one input requires grad", [](const auto& x) { return mul(x[0], x[1]); },
        {u({2, 3}), uniform_f64({2, 3}, -1, 1, 77, false)});
  check("shared input x * x", [](const auto& x) { return mul(x[0], x[0]); }, {u({3})});
  check("add(x, 2.5)", [](const auto& x) { return add(x[0], 2.5); }, {u({2, 3})});
  check("sub(x, 1)", [](const auto& x) { return sub(x[0], 1); }, {u({2, 3})});
  check("mul(x, -3)", [](const auto& x) { return mul(x[0], -3); }, {u({2, 3})});
  check("div(x, 4)", [](const auto& x) { return div(x[0], 4); }, {u({2, 3})});
  check("2 - x", [](const auto& x) { return 2 - x[0]; }, {u({2, 3})});
  check("3 / x", [](const auto& x) { return 3 / x[0]; }, {away_from_zero({2, 3}, 0.5, 2)});
  check("maximum(x, 0.5)", [](const auto& x) { return maximum(x[0], 0.5); }, {away_from_zero({2, 3}, 0.6, 2)});
  check("minimum(x, -0.5)", [](const auto& x) { return minimum(x[0], -0.5); }, {away_from_zero({2, 3}, 0.6, 2)});
  check("clamp with tensor bounds (x, min, max)", [](const auto& x) { return clamp(x[0], x[1], x[2]); },
        {away_from_zero({2, 3}, 0.2, 2), u({3}, -0.1, 0.1), u({2, 1}, 1.0, 1.1)});
  check("clamp, tensor min only", [](const auto& x) { return clamp(x[0], x[1], Tensor()); }, {away_from_zero({2, 3}, 0.2, 2), u({3}, -0.1, 0.1)});
  check("add(a, b, alpha=-1.5)", [](const auto& x) { return add(x[0], x[1], -1.5); }, {u({2, 3}), u({3})});
  check("sub(a, b, alpha=2)", [](const auto& x) { return sub(x[0], x[1], 2); }, {u({2, 3}), u({2, 1})});
  check("rsub(a, b, alpha=0.5)", [](const auto& x) { return rsub(x[0], x[1], 0.5); }, {u({2, 3}), u({2, 3})});
  check("rsub(a, 2, alpha=3)", [](const auto& x) { return rsub(x[0], 2, 3); }, {u({2, 3})});
  // Piecewise constant: the zero gradient, away from the steps (quotients in (k + 0.1, k + 0.9)).
  const Tensor fractional = from_vector<double>({2.3, -4.6, 7.5, -1.25}, {4}).requires_grad_(true);
  check("div(trunc)", [](const auto& x) { return div(x[0], x[1], RoundingMode::trunc); },
        {fractional, from_vector<double>({1, 1, 2, -1}, {4}).requires_grad_(true)});
  check("div(floor)", [](const auto& x) { return div(x[0], x[1], RoundingMode::floor) + x[0]; },
        {fractional, from_vector<double>({1, 1, 2, -1}, {4}).requires_grad_(true)});
}

void select_and_cast_ops() {
  const Tensor m = dev(from_vector<bool>({true, false, true, false}, {4}));
  const Tensor m2 = dev(from_vector<bool>({true, false, false, true, true, false}, {2, 3}));
  check("where", [m](const auto& x) { return where(m, x[0], x[1]); }, {u({3, 4}), u({3, 4})});
  check("where broadcast", [m](const auto& x) { return where(m, x[0], x[1]); }, {u({2, 1}), u({})});
  check("masked_fill", [m2](const auto& x) { return masked_fill(x[0], m2, 5.0); }, {u({2, 3})});
  check("masked_fill with a 0-dim tensor value (x and value)", [m2](const auto& x) { return masked_fill(x[0], m2, x[1]); },
        {u({2, 3}), u({})});
  check("to(float64) is the identity", [](const auto& x) { return x[0].to(DType::f64) * 2; }, {u({2, 3})});
  // Through f32 the values carry f32 rounding, so a larger step keeps the difference quotient clean.
  try {
    gradcheck(on_device(Fn([](const std::vector<Tensor>& x) { return (x[0].to(DType::f32) * 3).to(DType::f64); })),
              {u({2, 3})}, /*eps=*/1e-3, /*atol=*/1e-3, /*rtol=*/1e-3);
    CHECK(true);
  } catch (const std::exception& e) {
    FAIL_CHECK("cast through float32: ", std::string(e.what()));
  }
}

void view_ops() {
  check("view", [](const auto& x) { return x[0].view({3, 2}) * x[0].view({3, 2}); }, {u({2, 3})});
  check("reshape (copy of a transposed input)", [](const auto& x) { return x[0].t().reshape({6}); }, {u({2, 3})});
  check("permute", [](const auto& x) { return permute(x[0], {2, 0, 1}); }, {u({2, 3, 2})});
  check("transpose", [](const auto& x) { return transpose(x[0], 0, 1) * 2; }, {u({2, 3})});
  check("t", [](const auto& x) { return x[0].t(); }, {u({2, 3})});
  check("narrow", [](const auto& x) { return narrow(x[0], 1, 1, 2); }, {u({2, 4})});
  check("slice with step", [](const auto& x) { return slice(x[0], 0, 1, 7, 2); }, {u({7, 2})});
  check("slice of a slice", [](const auto& x) { return slice(slice(x[0], 1, 0, 6, 2), 1, 1, 3); }, {u({2, 6})});
  check("select", [](const auto& x) { return select(x[0], 1, -1); }, {u({2, 3, 2})});
  check("expand", [](const auto& x) { return x[0].expand({2, 3, 4}); }, {u({3, 1})});
  check("broadcast_to from 0-dim", [](const auto& x) { return broadcast_to(x[0], {2, 2}); }, {u({})});
  check("squeeze", [](const auto& x) { return squeeze(x[0]); }, {u({1, 3, 1})});
  check("squeeze(dim)", [](const auto& x) { return squeeze(x[0], 0); }, {u({1, 3, 1})});
  check("squeeze(dims)", [](const auto& x) { return squeeze(x[0], Shape{0, 2}); }, {u({1, 3, 1, 2})});
  check("t of 1-D", [](const auto& x) { return x[0].t() * x[0]; }, {u({3})});
  check("unsqueeze", [](const auto& x) { return unsqueeze(x[0], 1); }, {u({2, 3})});
  check("flatten", [](const auto& x) { return flatten(x[0], 1); }, {u({2, 2, 2})});
  check("contiguous", [](const auto& x) { return x[0].t().contiguous(); }, {u({2, 3})});
  check("clone", [](const auto& x) { return x[0].clone() * x[0]; }, {u({2, 3})});
  check("sum_to", [](const auto& x) { return sum_to(x[0], {3, 1}); }, {u({2, 3, 4})});
  // A leaf that is itself a transposed, strided tensor.
  Tensor base = uniform_f64({3, 4}, -1, 1, 99, false);
  Tensor strided_leaf = base.t().detach().requires_grad_(true);
  check("non-contiguous leaf", [](const auto& x) { return x[0] * x[0]; }, {strided_leaf});
}

void in_place_ops() {
  // Each in-place op writes into a fresh non-leaf; the graph must route gradients around it.
  const Tensor m = dev(from_vector<bool>({true, false, false, true, true, false}, {2, 3}));
  check("add_", [](const auto& x) { Tensor a = x[0] * 1; add_(a, x[1]); return a; }, {u({2, 3}), u({3})});
  check("sub_ scalar", [](const auto& x) { Tensor a = x[0] * 2; sub_(a, 1.5); return a; }, {u({2, 3})});
  check("neg_", [](const auto& x) { Tensor a = x[0] * 2; neg_(a); return a; }, {u({2, 3})});
  check("relu_", [](const auto& x) { Tensor a = x[0] * 1; relu_(a); return a; }, {away_from_zero({2, 3})});
  check("exp_", [](const auto& x) { Tensor a = x[0] * 1; exp_(a); return a; }, {u({2, 3})});
  check("tanh_", [](const auto& x) { Tensor a = x[0] * 1; tanh_(a); return a; }, {u({2, 3})});
  check("sigmoid_", [](const auto& x) { Tensor a = x[0] * 1; sigmoid_(a); return a; }, {u({2, 3})});
  check("sqrt_", [](const auto& x) { Tensor a = x[0] * 1; sqrt_(a); return a; }, {u({2, 3}, 0.5, 2)});
  check("copy_ (gradient to src)", [](const auto& x) { Tensor a = x[0] * 1; copy_(a, x[1]); return a * x[0]; },
        {u({2, 3}), u({3})});
  check("masked_fill_", [m](const auto& x) { Tensor a = x[0] * 1; masked_fill_(a, m, 2.0); return a; }, {u({2, 3})});
  check("fill_", [](const auto& x) { Tensor a = x[0] * 1; fill_(a, 2.0); return a + x[0]; }, {u({2, 3})});
  check("mul_", [](const auto& x) { Tensor a = x[0] * 1; mul_(a, x[1]); return a; }, {u({2, 3}), u({3})});
}

void join_ops() {
  check("cat", [](const auto& x) { return cat({x[0], x[1], x[2]}, 0); }, {u({2, 3}), u({1, 3}), u({3, 3})});
  check("cat(dim -1)", [](const auto& x) { return cat({x[0], x[1]}, -1); }, {u({2, 1}), u({2, 3})});
  check("stack", [](const auto& x) { return stack({x[0], x[1]}, 1); }, {u({2, 3}), u({2, 3})});
  check_multi("split", [](const auto& x) { return split(x[0], 2, 1); }, {u({2, 5})});
  check_multi("split_with_sizes", [](const auto& x) { return split_with_sizes(x[0], {1, 3}, 0); }, {u({4, 2})});
  check_multi("chunk", [](const auto& x) { return chunk(x[0], 3, 0); }, {u({5, 2})});
  check("split parts recombined", [](const auto& x) {
    const auto parts = split(x[0], 2, 0);
    return parts[0] * parts[1];
  }, {u({4, 3})});
}

void index_ops() {
  const Tensor i1 = index({2, 0, 2, 1}, {4});
  check("index_select", [i1](const auto& x) { return index_select(x[0], 0, i1); }, {u({3, 2})});
  check("index_select(dim 1, i32)", [i1](const auto& x) { return index_select(x[0], 1, i1.to(DType::i32)); },
        {u({2, 3})});
  const Tensor i2 = index({0, 2, 0}, {3});
  check("index_add (self and src)", [i2](const auto& x) { return index_add(x[0], 0, i2, x[1]); },
        {u({3, 2}), u({3, 2})});
  const Tensor gi = index({0, 2, 1, 1, 0, 0}, {2, 3});
  check("gather", [gi](const auto& x) { return gather(x[0], 1, gi); }, {u({2, 4})});
  check("gather(dim 0)", [gi](const auto& x) { return gather(x[0], 0, gi.narrow(1, 0, 2)); }, {u({3, 2})});
  check("scatter_add (self and src)", [gi](const auto& x) { return scatter_add(x[0], 1, gi, x[1]); },
        {u({2, 4}), u({2, 3})});
  check("index_add(alpha=-2) (self and src)", [i2](const auto& x) { return index_add(x[0], 0, i2, x[1], -2); },
        {u({3, 2}), u({3, 2})});
  const Tensor i0 = index({0}, {});
  check("index_select of 0-dim", [i0](const auto& x) { return index_select(x[0], 0, i0) * 3; }, {u({})});
  check("gather of 0-dim", [i0](const auto& x) { return gather(x[0], 0, i0) * 3; }, {u({})});
  check("scatter_add of 0-dim (self and src)", [i0](const auto& x) { return scatter_add(x[0], 0, i0, x[1]) * x[1]; },
        {u({}), u({})});
}

void reduction_ops() {
  const Shape s{2, 3, 2};
  for (const auto& dk : std::vector<std::pair<Shape, bool>>{{{}, false}, {{1}, false}, {{0, 2}, true}, {{-1}, true}}) {
    const Shape dims = dk.first;
    const bool keep = dk.second;
    const std::string d = std::string(" dims ").append(to_string(dims)).append(keep ? " keepdim" : "");
    check("sum" + d, [dims, keep](const auto& x) { return sum(x[0], dims, keep); }, {u(s)});
    check("mean" + d, [dims, keep](const auto& x) { return mean(x[0], dims, keep); }, {u(s)});
    check("prod" + d, [dims, keep](const auto& x) { return prod(x[0], dims, keep); }, {away_from_zero(s, 0.5, 1.5)});
    check("amax" + d, [dims, keep](const auto& x) { return amax(x[0], dims, keep); }, {distinct(s)});
    check("amin" + d, [dims, keep](const auto& x) { return amin(x[0], dims, keep); }, {distinct(s)});
    check("var" + d, [dims, keep](const auto& x) { return var(x[0], dims, 1, keep); }, {u(s)});
    check("var(correction 0)" + d, [dims, keep](const auto& x) { return var(x[0], dims, 0, keep); }, {u(s)});
    check("std(correction 0.5)" + d, [dims, keep](const auto& x) { return ember::std(x[0], dims, 0.5, keep); }, {u(s)});
    check("std" + d, [dims, keep](const auto& x) { return ember::std(x[0], dims, 1, keep); }, {u(s)});
    check("norm" + d, [dims, keep](const auto& x) { return norm(x[0], 2.0, dims, keep); }, {away_from_zero(s)});
    check("norm p=1" + d, [dims, keep](const auto& x) { return norm(x[0], 1.0, dims, keep); }, {away_from_zero(s)});
    check("norm p=3" + d, [dims, keep](const auto& x) { return norm(x[0], 3.0, dims, keep); }, {away_from_zero(s)});
    check("norm p=inf" + d, [dims, keep](const auto& x) {
      return norm(x[0], std::numeric_limits<double>::infinity(), dims, keep);
    }, {distinct(s)});
    if (!dims.empty())
      check("logsumexp" + d, [dims, keep](const auto& x) { return logsumexp(x[0], dims, keep); }, {u(s)});
  }
  check("prod with a zero", [](const auto& x) { return prod(x[0], {1}); },
        {from_vector<double>({0.0, 1.5, -0.7, 0.8, 1.2, 0.9}, {2, 3}).requires_grad_(true)});
  check("max(dim) values", [](const auto& x) { return max(x[0], 1).values; }, {distinct({3, 4})});
  check("min(dim) values", [](const auto& x) { return min(x[0], 0, true).values; }, {distinct({3, 4})});
  check("max()", [](const auto& x) { return max(x[0]); }, {distinct({3, 4})});
  check("min()", [](const auto& x) { return min(x[0]); }, {distinct({3, 4})});
  check("sum of a transposed input", [](const auto& x) { return sum(x[0].t(), {0}); }, {u({3, 4})});
  for (int64_t dim : {0, 1, -1}) {
    check("cumsum dim " + std::to_string(dim), [dim](const auto& x) { return cumsum(x[0], dim); }, {u({3, 5, 2})});
    check("cumprod dim " + std::to_string(dim), [dim](const auto& x) { return cumprod(x[0], dim); }, {u({3, 5, 2})});
  }
  check("cumsum of a transposed input", [](const auto& x) { return cumsum(x[0].t(), 1); }, {u({4, 3})});
  // Zeros, one and two in a row: the gradient there is a product of the other elements, which the
  // shortcut reverse_cumsum(g * y) / x would make NaN.
  check("cumprod through zeros", [](const auto& x) { return cumprod(x[0], 0); },
        {make_tensor({1.5, 0, -0.7, 2, 0, 0, 1.2}, {7}, DType::f64).requires_grad_(true)});
}

void linalg_and_softmax_ops() {
  check("mm", [](const auto& x) { return mm(x[0], x[1]); }, {u({2, 3}), u({3, 4})});
  check("mm transposed operands", [](const auto& x) { return mm(x[0].t(), x[1].t()); }, {u({3, 2}), u({4, 3})});
  check("bmm", [](const auto& x) { return bmm(x[0], x[1]); }, {u({2, 2, 3}), u({2, 3, 2})});
  check("matmul broadcast batch", [](const auto& x) { return matmul(x[0], x[1]); }, {u({2, 1, 2, 3}), u({3, 3, 2})});
  check("matmul vector @ matrix", [](const auto& x) { return matmul(x[0], x[1]); }, {u({3}), u({3, 2})});
  check("matmul matrix @ vector", [](const auto& x) { return matmul(x[0], x[1]); }, {u({2, 3}), u({3})});
  check("matmul dot", [](const auto& x) { return matmul(x[0], x[1]); }, {u({4}), u({4})});
  check("matmul batch @ vector", [](const auto& x) { return matmul(x[0], x[1]); }, {u({2, 2, 3}), u({3})});
  check("linear", [](const auto& x) { return linear(x[0], x[1], x[2]); }, {u({4, 3}), u({2, 3}), u({2})});
  check("linear batched", [](const auto& x) { return linear(x[0], x[1], x[2]); }, {u({2, 3, 3}), u({2, 3}), u({2})});
  check("linear without bias", [](const auto& x) { return linear(x[0], x[1]); }, {u({2, 3, 3}), u({2, 3})});
  check("linear transposed x and w", [](const auto& x) { return linear(x[0].t(), x[1].t(), x[2]); },
        {u({3, 4}), u({3, 2}), u({2})});
  check("linear 1-D x", [](const auto& x) { return linear(x[0], x[1], x[2]); }, {u({3}), u({2, 3}), u({2})});
  check("linear 1-D weight", [](const auto& x) { return linear(x[0], x[1], x[2]); }, {u({4, 3}), u({3}), u({})});
  for (int64_t dim : {0, 1, -1}) {
    check("softmax dim " + std::to_string(dim), [dim](const auto& x) { return softmax(x[0], dim); }, {u({2, 3, 2})});
    check("log_softmax dim " + std::to_string(dim), [dim](const auto& x) { return log_softmax(x[0], dim); },
          {u({2, 3, 2})});
  }
  check("scaled_dot_product_attention", [](const auto& x) { return scaled_dot_product_attention(x[0], x[1], x[2]); },
        {u({2, 3, 4}), u({2, 5, 4}), u({2, 5, 3})});
  check("scaled_dot_product_attention causal", [](const auto& x) {
    return scaled_dot_product_attention(x[0], x[1], x[2], {}, 0.0, true);
  }, {u({2, 4, 3}), u({2, 3, 3}), u({2, 3, 2})});
}

void second_derivatives() {
  const Shape s{2, 3};
  check2("tanh", [](const auto& x) { return tanh(x[0]); }, {u(s)});
  check2("exp", [](const auto& x) { return exp(x[0]); }, {u(s)});
  check2("relu", [](const auto& x) { return relu(x[0]) * x[0]; }, {away_from_zero(s)});
  check2("log", [](const auto& x) { return log(x[0]); }, {u(s, 0.5, 2)});
  check2("sigmoid", [](const auto& x) { return sigmoid(x[0]); }, {u(s)});
  check2("sin", [](const auto& x) { return sin(x[0]); }, {u(s)});
  check2("sqrt", [](const auto& x) { return sqrt(x[0]); }, {u(s, 0.5, 2)});
  check2("gelu", [](const auto& x) { return gelu(x[0]); }, {u(s)});
  check2("gelu(tanh)", [](const auto& x) { return gelu(x[0], true); }, {u(s, -3, 3)});
  check2("silu", [](const auto& x) { return silu(x[0]); }, {u(s)});
  check2("pow(x, 3)", [](const auto& x) { return pow(x[0], 3); }, {u(s)});
  check2("reciprocal", [](const auto& x) { return reciprocal(x[0]); }, {away_from_zero(s, 0.5, 2)});
  check2("mul", [](const auto& x) { return mul(x[0], x[1]); }, {u(s), u({3})});
  check2("div", [](const auto& x) { return div(x[0], x[1]); }, {u(s), away_from_zero({2, 1}, 0.5, 2)});
  check2("pow", [](const auto& x) { return pow(x[0], x[1]); }, {u(s, 0.5, 2), u(s, -1, 2)});
  check2("matmul", [](const auto& x) { return matmul(x[0], x[1]); }, {u({2, 3}), u({3, 2})});
  check2("bmm", [](const auto& x) { return bmm(x[0], x[1]); }, {u({2, 2, 3}), u({2, 3, 2})});
  check2("linear", [](const auto& x) { return linear(x[0], x[1], x[2]); }, {u({2, 2, 3}), u({2, 3}), u({2})});
  check2("softmax", [](const auto& x) { return softmax(x[0], -1); }, {u({2, 3})});
  check2("log_softmax", [](const auto& x) { return log_softmax(x[0], 0); }, {u({2, 3})});
  check2("scaled_dot_product_attention", [](const auto& x) { return scaled_dot_product_attention(x[0], x[1], x[2]); },
         {u({2, 3, 2}), u({2, 4, 2}), u({2, 4, 2})});
  check2("logsumexp", [](const auto& x) { return logsumexp(x[0], {1}); }, {u({2, 3})});
  check2("var", [](const auto& x) { return var(x[0], {1}); }, {u({2, 3})});
  check2("norm", [](const auto& x) { return norm(x[0]); }, {away_from_zero({2, 3})});
  check2("prod", [](const auto& x) { return prod(x[0], {1}); }, {away_from_zero(s, 0.5, 1.5)});
  check2("cumsum", [](const auto& x) { return cumsum(x[0], 1) * x[0]; }, {u(s)});
  check2("cumprod", [](const auto& x) { return cumprod(x[0], 1); }, {u({2, 5})});
  check2("mean of squares", [](const auto& x) { return mean(x[0] * x[0]); }, {u(s)});
  check2("where", [](const auto& x) { return where(gt(x[1], 0), x[0] * x[0], x[1]); }, {u(s), away_from_zero(s)});
  check2("index_select", [](const auto& x) { return index_select(x[0], 0, index({1, 1, 0}, {3})) * x[0].sum(); },
         {u({2, 2})});
}

// ---- conventions where the derivative is undefined or a choice: 0^0, NaN operands, ties, clamp's
// bounds. Each row states the rule and where it comes from; the values are the gradients PyTorch 2.15
// gives for the same inputs.
struct ConventionRow {
  const char* rule;
  std::function<Tensor(const Tensor&, const Tensor&)> f;
  std::vector<double> a, b;
  std::vector<double> grad_a, grad_b;  // of sum(f(a, b))
};

void gradient_conventions() {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const std::vector<ConventionRow> rows = {
      {"pow(a, b) at a = 0, b = 0: d/da is 0, not 0 * 0^-1 = NaN (pow_backward_self masks b == 0); d/db is 0 "
       "at a = 0, b >= 0 (pow_backward_exponent)",
       [](const Tensor& a, const Tensor& b) { return pow(a, b); }, {0, 0, 2}, {0, 2, 0}, {0, 0, 0},
       {0, 0, std::log(2.0)}},
      {"maximum with a NaN operand: both operands get the whole gradient (neither a < b nor a > b); a tie splits "
       "it 0.5 / 0.5; the smaller operand gets none",
       [](const Tensor& a, const Tensor& b) { return maximum(a, b); }, {nan, 1, 3, 1}, {1, nan, 3, 2},
       {1, 1, 0.5, 0}, {1, 1, 0.5, 1}},
      {"minimum: the same rule with the larger operand getting none",
       [](const Tensor& a, const Tensor& b) { return minimum(a, b); }, {nan, 1, 3, 1}, {1, nan, 3, 2},
       {1, 1, 0.5, 1}, {1, 1, 0.5, 0}},
      {"relu at NaN passes the gradient; at 0 and below gives 0 (threshold_backward: 0 where the output <= 0)",
       [](const Tensor& a, const Tensor& b) { return relu(a) + b; }, {nan, 0, -1, 2}, {0, 0, 0, 0},
       {1, 0, 0, 1}, {1, 1, 1, 1}},
      {"clamp(x, -1, 1) passes the gradient only strictly inside (-1, 1): 0 at either bound, outside, and at NaN "
       "(clamp_backward, PyTorch 2.15)",
       [](const Tensor& a, const Tensor& b) { return clamp(a, -1.0, 1.0) + b; }, {-1, 1, 0.5, nan, 3}, {0, 0, 0, 0, 0},
       {0, 0, 1, 0, 0}, {1, 1, 1, 1, 1}},
      {"clamp(x, min=0): 0 at the bound",
       [](const Tensor& a, const Tensor& b) { return clamp(a, 0.0, std::nullopt) + b; },
       {0, 1, -1}, {0, 0, 0}, {0, 1, 0}, {1, 1, 1}},
  };
  for (const ConventionRow& r : rows)
    for (DType dt : {DType::f64, DType::f32, DType::f16, DType::bf16}) {
      const std::string what = std::string(r.rule) + " in " + name(dt) + " on " + g_device.str();
      INFO(what);
      const Shape shape{static_cast<int64_t>(r.a.size())};
      Tensor a = make_tensor(r.a, shape, dt, g_device).requires_grad_(true);
      Tensor b = make_tensor(r.b, shape, dt, g_device).requires_grad_(true);
      sum(r.f(a, b)).backward();
      const std::vector<double> ga = values(a.grad()), gb = values(b.grad());
      for (size_t i = 0; i < ga.size(); ++i) {
        // ln 2 rounds in the 16-bit dtypes; every other expected value is exact there.
        CHECK(ga[i] == doctest::Approx(r.grad_a[i]).epsilon(0.01));
        CHECK(gb[i] == doctest::Approx(r.grad_b[i]).epsilon(0.01));
      }
    }
}

}  // namespace

// Each op check on the CPU, and again with the functions run on CUDA.
#define EMBER_GRADCHECK_CASES(title, fn)                                  \
  TEST_CASE("gradcheck: " title * doctest::test_suite("cpu")) { fn(); }   \
  EMBER_CUDA_TEST_CASE("cuda gradcheck: " title) {                        \
    const RunOn cuda(Device(DeviceType::cuda, 0));                        \
    fn();                                                                 \
  }
EMBER_GRADCHECK_CASES("unary ops", unary_ops)
EMBER_GRADCHECK_CASES("binary ops with broadcasting and scalar forms", binary_ops)
EMBER_GRADCHECK_CASES("where, masked_fill, casts", select_and_cast_ops)
EMBER_GRADCHECK_CASES("views", view_ops)
EMBER_GRADCHECK_CASES("in-place ops on non-leaves", in_place_ops)
EMBER_GRADCHECK_CASES("cat stack split chunk", join_ops)
EMBER_GRADCHECK_CASES("index ops", index_ops)
EMBER_GRADCHECK_CASES("reductions", reduction_ops)
EMBER_GRADCHECK_CASES("matmul, linear, softmax", linalg_and_softmax_ops)
EMBER_GRADCHECK_CASES("second derivatives (gradgradcheck)", second_derivatives)
EMBER_GRADCHECK_CASES("conventions at 0^0, NaN operands, ties and clamp bounds", gradient_conventions)

TEST_SUITE("cpu") {

TEST_CASE("gradcheck itself: catches a wrong gradient and names the input, element and values") {
  // A hook that triples the gradient makes the analytical Jacobian wrong by a factor of 3.
  const Fn wrong = [](const std::vector<Tensor>& x) {
    Tensor y = x[1] * 2;
    if (y.requires_grad()) y.register_hook([](const Tensor& g) { return g * 3; });
    return y + x[0];
  };
  Tensor a = uniform_f64({2}, -1, 1, 5), b = uniform_f64({2, 2}, -1, 1, 6);
  try {
    gradcheck(wrong, {a, b});
    FAIL_CHECK("gradcheck accepted a wrong gradient");
  } catch (const AutogradError& e) {
    const std::string msg = e.what();
    CHECK_MESSAGE(msg.find("input 1") != std::string::npos, msg);
    CHECK_MESSAGE(msg.find("element (0, 0)") != std::string::npos, msg);
    CHECK_MESSAGE(msg.find("numerical 2") != std::string::npos, msg);
    CHECK_MESSAGE(msg.find("analytical 6") != std::string::npos, msg);
  }
  // The same function is fine with respect to input 0 alone.
  Tensor b_const = uniform_f64({2, 2}, -1, 1, 6, false);
  CHECK_NOTHROW(gradcheck(wrong, {a, b_const}));
}

TEST_CASE("gradgradcheck itself: catches a wrong second derivative") {
  // A hook adding g * x - detach(g * x) leaves every gradient value unchanged, so gradcheck
  // passes, but gives the recorded first derivative a spurious dependence on x and on the
  // cotangent, which gradgradcheck must catch.
  const Fn bad = [](const std::vector<Tensor>& x) {
    Tensor y = x[0] * x[0];
    if (y.requires_grad())
      y.register_hook([x0 = x[0]](const Tensor& g) { return g + (g * x0 - (g * x0).detach()); });
    return y;
  };
  CHECK_NOTHROW(gradcheck(bad, {u({3})}));
  CHECK_THROWS_AS(gradgradcheck(bad, {u({3})}), AutogradError);
}

TEST_CASE("gradcheck itself: argument errors") {
  Tensor f32 = from_vector<float>({1, 2}, {2}).requires_grad_(true);
  CHECK_THROWS_AS(gradcheck([](const auto& x) { return x[0] * 2; }, {f32}), DTypeError);
  CHECK_THROWS_AS(gradcheck([](const auto& x) { return x[0] * 2; }, {uniform_f64({2}, 0, 1, 3, false)}), ValueError);
  Tensor expanded = uniform_f64({1, 3}, 0, 1, 3).expand({2, 3});
  CHECK_THROWS_AS(gradcheck([](const auto& x) { return x[0] * 2; }, {expanded}), ValueError);
  // Integer inputs (indices) pass through untouched.
  CHECK_NOTHROW(gradcheck([](const auto& x) { return index_select(x[0], 0, x[1]); },
                          {uniform_f64({3}, 0, 1, 4), index({2, 0}, {2})}));
  // Outputs that do not depend on the inputs have a zero Jacobian, which finite differences agree with.
  CHECK_NOTHROW(gradcheck([](const auto& x) { return std::vector<Tensor>{x[0] * 2, ones({2})}; },
                          {uniform_f64({2}, 0, 1, 4)}));
}

}  // TEST_SUITE("cpu")
