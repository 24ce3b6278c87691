// Front ends and vjps of the elementwise primitives.
#include <cmath>
#include <limits>

#include "tensor/autocast.h"
#include "tensor/ops.h"
#include "tensor/primitives/elementwise.h"

namespace ember {

namespace {

// Floating ops compute integer and bool inputs in the default float type (exp(int) is float).
Tensor floating_input(const Tensor& x) { return is_floating(x.dtype()) ? x : x.to(kDefaultFloat); }

void require_numeric(const char* op, const Tensor& x) {
  if (x.dtype() == DType::boolean)
    throw DTypeError(std::string(op) + ": not supported for bool tensors; convert with to() first");
}

template <class Op>
Tensor unary(const Tensor& x_in, Op op = {}) {
  const auto [x] = amp::autocast_args(UnaryTraits<Op>::name, x_in);
  if constexpr (UnaryTraits<Op>::kind == UnaryKind::Floating) {
    return run1(Unary<Op>(op), {floating_input(x)});
  } else {
    require_numeric(UnaryTraits<Op>::name, x);
    return run1(Unary<Op>(op), {x});
  }
}

template <class Op>
Tensor& unary_(Tensor& self, Op op = {}) {
  if (UnaryTraits<Op>::kind == UnaryKind::Floating && !is_floating(self.dtype()))
    throw DTypeError(std::string(UnaryTraits<Op>::name) + "_: result type float can't be written into a " +
                     dtype_name(self.dtype()) + " tensor");
  require_numeric(UnaryTraits<Op>::name, self);
  run_inplace(Unary<Op>(op), {self});
  return self;
}

template <class Op>
DType binary_dtype(const Tensor& a, const Tensor& b) {
  DType dt = result_type(a, b);
  if (std::is_same_v<Op, ew::Div> && !is_floating(dt)) dt = kDefaultFloat;  // true division
  if (BinaryTraits<Op>::kind == BinaryKind::Arith && dt == DType::boolean)
    throw DTypeError(std::string(BinaryTraits<Op>::name) + ": not supported for bool tensors; convert with to() first");
  if (BinaryTraits<Op>::kind == BinaryKind::Floating && !is_floating(dt))
    throw DTypeError(std::string(BinaryTraits<Op>::name) + ": expected floating tensors, got " + dtype_name(dt));
  return dt;
}

// Whether the 16-bit dtype dt holds v exactly.
bool holds_exactly(DType dt, double v) {
  const float r = dt == DType::f16 ? static_cast<float>(f16(v)) : static_cast<float>(bf16(v));
  return static_cast<double>(r) == v;
}

// Which operand (0 or 1) Op's kernel gets as an f32 scalar for the 16-bit result dtype dt, -1 for none.
// 16-bit results compute in f32 (PyTorch's opmath), and a scalar operand of a 16-bit op (a C++
// number, or any 0-dim tensor of another dtype) keeps its value as an f32 operand rather than
// being rounded to 16 bits first, where 65520 would be inf, 1e-8 zero and 0.1 off by 2.4e-4. On
// CUDA a scalar dt holds exactly (2, 0.5, -1: most in practice) is converted to dt instead: the
// same result, and the one-dtype kernel's 16-byte vectors of 16-bit values. On the CPU the f32
// scalar is the faster kernel even then, as the one-dtype loop converts the f16 scalar at every
// element (x * 0.5 over 2^24 f16 values: 35 ms, 24 ms with the f32 scalar, on 2 cores). `value` is
// the scalar's value where the front end knows it (reading a 0-dim tensor's would wait for a GPU).
int f32_scalar_operand(const Tensor& a, const Tensor& b, DType dt, std::optional<double> value) {
  if (value && !a.device().is_cpu() && holds_exactly(dt, *value)) return -1;
  if (b.dim() == 0 && b.dtype() != dt) return 1;
  if (a.dim() == 0 && a.dtype() != dt) return 0;
  return -1;
}

template <class Op>
Tensor binary(const Tensor& a_in, const Tensor& b_in, std::optional<double> value = {}) {
  const auto [a, b] = amp::autocast_args(BinaryTraits<Op>::name, a_in, b_in);
  const DType dt = binary_dtype<Op>(a, b);
  const int scalar = is_reduced_float(dt) ? f32_scalar_operand(a, b, dt, value) : -1;
  return run1(Binary<Op>{}, {a.to(scalar == 0 ? DType::f32 : dt), b.to(scalar == 1 ? DType::f32 : dt)});
}

template <class Op>
Tensor binary(const Tensor& a, Scalar b) {
  return binary<Op>(a, wrapped_scalar(b, a.device()), b.to_double());
}

template <class Op>
Tensor binary(Scalar a, const Tensor& b) {
  return binary<Op>(wrapped_scalar(a, b.device()), b, a.to_double());
}

// An operand wider than self (f32 into f16) makes the op compute in that dtype and round once into
// self, as PyTorch does; otherwise the kernel writes self directly.
template <class Op>
Tensor& binary_(Tensor& self, const Tensor& other, std::optional<double> value = {}) {
  const DType dt = binary_dtype<Op>(self, other);
  if (promote_types(dt, self.dtype()) != self.dtype() && !(is_floating(self.dtype()) && is_floating(dt)))
    throw DTypeError(std::string(BinaryTraits<Op>::name) + "_: result type " + dtype_name(dt) +
                     " can't be cast to the in-place output type " + dtype_name(self.dtype()));
  if (dt != self.dtype()) return copy_(self, binary<Op>(self.to(dt), other));
  const bool scalar = is_reduced_float(dt) && f32_scalar_operand(self, other, dt, value) == 1;
  run_inplace(Binary<Op>{}, {self, other.to(scalar ? DType::f32 : dt)});
  return self;
}

template <class Op>
Tensor& binary_(Tensor& self, Scalar other) {
  return binary_<Op>(self, wrapped_scalar(other, self.device()), other.to_double());
}

}  // namespace

// ---- unary front ends
Tensor neg(const Tensor& x) { return unary<ew::Neg>(x); }
Tensor abs(const Tensor& x) { return unary<ew::Abs>(x); }
Tensor sign(const Tensor& x) { return unary<ew::Sign>(x); }
Tensor square(const Tensor& x) { return unary<ew::Square>(x); }
Tensor relu(const Tensor& x) { return unary<ew::Relu>(x); }
Tensor exp(const Tensor& x) { return unary<ew::Exp>(x); }
Tensor log(const Tensor& x) { return unary<ew::Log>(x); }
Tensor log1p(const Tensor& x) { return unary<ew::Log1p>(x); }
Tensor sqrt(const Tensor& x) { return unary<ew::Sqrt>(x); }
Tensor rsqrt(const Tensor& x) { return unary<ew::Rsqrt>(x); }
Tensor sin(const Tensor& x) { return unary<ew::Sin>(x); }
Tensor cos(const Tensor& x) { return unary<ew::Cos>(x); }
Tensor tanh(const Tensor& x) { return unary<ew::Tanh>(x); }
Tensor sigmoid(const Tensor& x) { return unary<ew::Sigmoid>(x); }
Tensor gelu(const Tensor& x, bool tanh_approximation) {
  return tanh_approximation ? unary<ew::GeluTanh>(x) : unary<ew::GeluErf>(x);
}
Tensor silu(const Tensor& x) { return unary<ew::Silu>(x); }
Tensor erf(const Tensor& x) { return unary<ew::Erf>(x); }
Tensor reciprocal(const Tensor& x) { return unary<ew::Reciprocal>(x); }

namespace {
ew::Clamp clamp_op(std::optional<double> min, std::optional<double> max) {
  if (!min && !max) throw ValueError("clamp: at least one of min and max must be given");
  constexpr double inf = std::numeric_limits<double>::infinity();
  return {min.value_or(-inf), max.value_or(inf)};
}
}  // namespace

Tensor clamp(const Tensor& x, std::optional<double> min, std::optional<double> max) {
  return unary<ew::Clamp>(x, clamp_op(min, max));
}
Tensor pow(const Tensor& x, Scalar exponent) {
  // An integer tensor to an integer power stays integral (PyTorch); anything else computes in float.
  if (is_integral(x.dtype(), false) && !exponent.is_floating()) {
    if (exponent.to_int() < 0)
      throw ValueError("pow: integers to negative integer powers are not allowed (exponent " +
                       std::to_string(exponent.to_int()) + ")");
    return binary<ew::Pow>(x, exponent);
  }
  return unary<ew::PowScalar>(x, {exponent.to_double()});
}

Tensor& neg_(Tensor& self) { return unary_<ew::Neg>(self); }
Tensor& exp_(Tensor& self) { return unary_<ew::Exp>(self); }
Tensor& relu_(Tensor& self) { return unary_<ew::Relu>(self); }
Tensor& sigmoid_(Tensor& self) { return unary_<ew::Sigmoid>(self); }
Tensor& tanh_(Tensor& self) { return unary_<ew::Tanh>(self); }
Tensor& sqrt_(Tensor& self) { return unary_<ew::Sqrt>(self); }
Tensor& clamp_(Tensor& self, std::optional<double> min, std::optional<double> max) {
  return unary_<ew::Clamp>(self, clamp_op(min, max));
}

// ---- binary front ends
#define EMBER_BINARY_FRONT(F, fn)                                                 \
  Tensor fn(const Tensor& a, const Tensor& b) { return binary<ew::F>(a, b); } \
  Tensor fn(const Tensor& a, Scalar b) { return binary<ew::F>(a, b); }
EMBER_BINARY_FRONT(Add, add)
EMBER_BINARY_FRONT(Sub, sub)
EMBER_BINARY_FRONT(Mul, mul)
EMBER_BINARY_FRONT(Div, div)
EMBER_BINARY_FRONT(Maximum, maximum)
EMBER_BINARY_FRONT(Minimum, minimum)
EMBER_BINARY_FRONT(Eq, eq)
EMBER_BINARY_FRONT(Ne, ne)
EMBER_BINARY_FRONT(Lt, lt)
EMBER_BINARY_FRONT(Le, le)
EMBER_BINARY_FRONT(Gt, gt)
EMBER_BINARY_FRONT(Ge, ge)
#undef EMBER_BINARY_FRONT
Tensor pow(const Tensor& a, const Tensor& b) {
  // As pow(x, scalar): an integral result has no negative powers. Found by reading the exponents,
  // as PyTorch does, only when both are integral.
  if (is_integral(result_type(a, b), false) && b.numel() > 0 && lt(b, 0).to(DType::i64).sum().item<int64_t>() > 0)
    throw ValueError(std::string("pow: integers to negative integer powers are not allowed (an exponent of the ") +
                     dtype_name(b.dtype()) + " tensor of shape " + to_string(b.shape()) + " is negative)");
  return binary<ew::Pow>(a, b);
}

// Tensor bounds are operands: x and a bound it ties with split the gradient 0.5 / 0.5, and a NaN
// anywhere propagates, as maximum and minimum give (number bounds are no operands: clamp's own rule).
Tensor clamp(const Tensor& x, const Tensor& min, const Tensor& max) {
  if (!min.defined() && !max.defined()) throw ValueError("clamp: at least one of min and max must be given");
  const Tensor above = min.defined() ? maximum(x, min) : x;
  return max.defined() ? minimum(above, max) : above;
}

namespace {
// Integer division by zero is refused (PyTorch raises ZeroDivisionError on the CPU); checking reads a
// flag back from the device, so a captured step cannot divide integers with a rounding mode.
template <class Op>
Tensor rounded_div(const Tensor& a, const Tensor& b, const char* mode) {
  if (is_integral(result_type(a, b), /*include_bool=*/false) && b.numel() > 0) {
    NoGradGuard no_grad;
    if (amax(eq(b, 0).to(DType::u8)).item<int64_t>() != 0)
      throw ValueError(std::string("div: integer division by zero (rounding_mode=\"") + mode + "\")");
  }
  return binary<Op>(a, b);
}
}  // namespace

Tensor div(const Tensor& a, const Tensor& b, RoundingMode mode) {
  return mode == RoundingMode::trunc ? rounded_div<ew::DivTrunc>(a, b, "trunc") : rounded_div<ew::DivFloor>(a, b, "floor");
}
Tensor div(const Tensor& a, Scalar b, RoundingMode mode) { return div(a, wrapped_scalar(b, a.device()), mode); }

namespace {
Scalar negated(Scalar s) { return s.is_floating() ? Scalar(-s.to_double()) : Scalar(-s.to_int()); }

// a + alpha * b, rounded once: 16-bit operands take alpha * b and the sum in f32, as PyTorch's add
// kernel computes a + alpha * b in its opmath type. `op` is the front end that checks alpha.
Tensor add_scaled(const char* op, const Tensor& a, const Tensor& b, Scalar alpha, Scalar given) {
  const DType dt = result_type(a, b);
  check_alpha(op, dt, given);
  if (alpha.to_double() == 1) return add(a, b);
  if (is_reduced_float(dt)) return add(a.to(DType::f32), mul(b.to(DType::f32), alpha)).to(dt);
  return add(a, mul(b, alpha));
}
}  // namespace

Tensor add(const Tensor& a, const Tensor& b, Scalar alpha) { return add_scaled("add", a, b, alpha, alpha); }
Tensor sub(const Tensor& a, const Tensor& b, Scalar alpha) { return add_scaled("sub", a, b, negated(alpha), alpha); }
Tensor rsub(const Tensor& a, const Tensor& b, Scalar alpha) { return add_scaled("rsub", b, a, negated(alpha), alpha); }
Tensor rsub(const Tensor& a, Scalar b, Scalar alpha) { return rsub(a, wrapped_scalar(b, a.device()), alpha); }

Tensor logical_not(const Tensor& x_in) {
  const auto [x] = amp::autocast_args("logical_not", x_in);
  return eq(x.to(DType::boolean), wrapped_scalar(false, x.device()));
}

Tensor& add_(Tensor& self, const Tensor& other) { return binary_<ew::Add>(self, other); }
Tensor& sub_(Tensor& self, const Tensor& other) { return binary_<ew::Sub>(self, other); }
Tensor& mul_(Tensor& self, const Tensor& other) { return binary_<ew::Mul>(self, other); }
Tensor& div_(Tensor& self, const Tensor& other) { return binary_<ew::Div>(self, other); }
Tensor& add_(Tensor& self, Scalar other) { return binary_<ew::Add>(self, other); }
Tensor& sub_(Tensor& self, Scalar other) { return binary_<ew::Sub>(self, other); }
Tensor& mul_(Tensor& self, Scalar other) { return binary_<ew::Mul>(self, other); }
Tensor& div_(Tensor& self, Scalar other) { return binary_<ew::Div>(self, other); }

Tensor operator-(const Tensor& x) { return neg(x); }
Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }
Tensor operator+(const Tensor& a, Scalar b) { return add(a, b); }
Tensor operator-(const Tensor& a, Scalar b) { return sub(a, b); }
Tensor operator*(const Tensor& a, Scalar b) { return mul(a, b); }
Tensor operator/(const Tensor& a, Scalar b) { return div(a, b); }
Tensor operator+(Scalar a, const Tensor& b) { return binary<ew::Add>(a, b); }
Tensor operator-(Scalar a, const Tensor& b) { return binary<ew::Sub>(a, b); }
Tensor operator*(Scalar a, const Tensor& b) { return binary<ew::Mul>(a, b); }
Tensor operator/(Scalar a, const Tensor& b) { return binary<ew::Div>(a, b); }

// ---- where, masks, fills

Tensor where(const Tensor& condition_in, const Tensor& a_in, const Tensor& b_in) {
  const auto [condition, a, b] = amp::autocast_args("where", condition_in, a_in, b_in);
  if (condition.dtype() != DType::boolean)
    throw DTypeError(std::string("where: condition must be bool, got ") + dtype_name(condition.dtype()));
  const DType dt = result_type(a, b);
  return run1(Where{}, {condition, a.to(dt), b.to(dt)});
}

std::vector<OutputSpec> Where::infer(const std::vector<Tensor>& in) const {
  Shape s = broadcast_shapes(broadcast_shapes(in[0].shape(), in[1].shape(), "where"), in[2].shape(), "where");
  return {{s, in[1].dtype(), elementwise_output_layout(in, s)}};
}

Tensor masked_fill(const Tensor& x, const Tensor& mask, Scalar value) {
  check_fits(value, x.dtype(), "masked_fill");
  return masked_fill(x, mask, wrapped_scalar(value, x.device()));
}

// The value as a 0-dim tensor, which may require grad: it receives the sum of the gradient where
// the mask is true. A CPU value fills a tensor on any device, as a number would.
Tensor masked_fill(const Tensor& x_in, const Tensor& mask_in, const Tensor& value) {
  if (value.dim() != 0)
    throw ShapeError("masked_fill: value must be a 0-dim tensor (a number), got shape " + to_string(value.shape()));
  const auto [x, mask] = amp::autocast_args("masked_fill", x_in, mask_in);
  return where(mask, value.to(x.device()).to(x.dtype()), x);
}

Tensor& masked_fill_(Tensor& self, const Tensor& mask, Scalar value) {
  Tensor filled = masked_fill(self, mask, value);
  return copy_(self, filled);
}

Tensor& fill_(Tensor& self, Scalar value) {
  check_fits(value, self.dtype(), "fill_");
  run_inplace(Fill(value), {self});
  return self;
}
Tensor& zero_(Tensor& self) { return fill_(self, 0); }

bool all_finite(const Tensor& x) {
  if (!is_floating(x.dtype()) || x.numel() == 0) return true;
  NoGradGuard no_grad;
  // |x| < inf is false exactly for NaN and ±inf.
  const Tensor finite = lt(abs(x), std::numeric_limits<double>::infinity());
  return amin(finite.to(DType::u8)).item<int64_t>() == 1;
}

bool equal(const Tensor& a, const Tensor& b) {
  if (!(a.shape() == b.shape()) || a.dtype() != b.dtype()) return false;
  if (a.numel() == 0) return true;
  NoGradGuard no_grad;
  return amin(eq(a, b).to(DType::u8)).item<int64_t>() == 1;
}

bool allclose(const Tensor& a, const Tensor& b, double rtol, double atol) {
  NoGradGuard no_grad;
  if (a.numel() == 0 && b.numel() == 0) return true;
  const Tensor ad = a.to(DType::f64), bd = b.to(DType::f64);
  const Tensor ok = le(abs(ad - bd), add(mul(abs(bd), rtol), atol));
  return amin(ok.to(DType::u8)).item<int64_t>() == 1;
}

// ---- vjps. g is the output cotangent, x the input, y the output (where saved).
namespace {

using ew::Abs, ew::Clamp, ew::Cos, ew::Erf, ew::Exp, ew::GeluErf, ew::GeluTanh, ew::Log, ew::Log1p, ew::Neg,
    ew::PowScalar, ew::Reciprocal, ew::Relu, ew::Rsqrt, ew::Sigmoid, ew::Sign, ew::Silu, ew::Sin, ew::Sqrt,
    ew::Square, ew::Tanh;

constexpr double kSqrt2OverPi = 0.79788456080286535588;
constexpr double kInvSqrt2Pi = 0.39894228040143267794;  // 1 / sqrt(2 pi)

// A vjp written as several ops computes them in f32 for float16/bfloat16 operands and rounds once, when
// Primitive::apply casts the result to the input's dtype (PyTorch's "opmath"): in f16, div's b * b
// overflows for |b| >= 256 and zeroed the divisor's gradient, and rsqrt's g * y^3 overflowed before its
// * 0.5. A vjp of one op (g * y, g / x) rounds once in any dtype and stays in it.
Tensor opmath(const Tensor& t) { return t.to(opmath_dtype(t.dtype())); }

// The activations' gradients are fused ops of their own (tensor/elementwise_ops.h's *Backward), recorded
// like any op: their vjps below give the higher orders. The cotangent takes the saved tensor's dtype.
template <class Op>
Tensor activation_backward(const Tensor& g, const Tensor& saved) {
  return run1(Binary<Op>{}, {g.to(saved.dtype()), saved});
}

Tensor d(const Neg&, const Tensor& g, const Tensor&, const Tensor&) { return neg(g); }
Tensor d(const Abs&, const Tensor& g, const Tensor& x, const Tensor&) { return g * sign(x); }
Tensor d(const Sign&, const Tensor& g, const Tensor&, const Tensor&) { return zeros_like(g); }
// (g * x) * 2, not g * (x * 2): in f32, 2x overflows for bfloat16's largest x where g * 2x may not.
Tensor d(const Square&, const Tensor& g, const Tensor& x, const Tensor&) { return opmath(g) * opmath(x) * 2; }
Tensor d(const Relu&, const Tensor& g, const Tensor&, const Tensor& y) { return activation_backward<ew::ReluBackward>(g, y); }
Tensor d(const Clamp& c, const Tensor& g, const Tensor& x, const Tensor&) {
  // The gradient passes where lo < x < hi strictly: 0 at a bound (the minimum-norm subgradient) and at
  // NaN, as PyTorch 2.15's clamp_backward gives.
  const Tensor zero = zeros_like(g);
  return where(gt(x, c.lo), where(lt(x, c.hi), g, zero), zero);
}
Tensor d(const Exp&, const Tensor& g, const Tensor&, const Tensor& y) { return g * y; }
Tensor d(const Log&, const Tensor& g, const Tensor& x, const Tensor&) { return g / x; }
Tensor d(const Log1p&, const Tensor& g, const Tensor& x, const Tensor&) { return opmath(g) / (opmath(x) + 1); }
Tensor d(const Sqrt&, const Tensor& g, const Tensor&, const Tensor& y) { return opmath(g) / (opmath(y) * 2); }
Tensor d(const Rsqrt&, const Tensor& g, const Tensor&, const Tensor& y) {
  const Tensor y32 = opmath(y);
  return opmath(g) * (y32 * y32 * y32) * -0.5;
}
Tensor d(const Sin&, const Tensor& g, const Tensor& x, const Tensor&) { return opmath(g) * cos(opmath(x)); }
Tensor d(const Cos&, const Tensor& g, const Tensor& x, const Tensor&) { return neg(opmath(g) * sin(opmath(x))); }
Tensor d(const Tanh&, const Tensor& g, const Tensor&, const Tensor& y) { return activation_backward<ew::TanhBackward>(g, y); }
Tensor d(const Sigmoid&, const Tensor& g, const Tensor&, const Tensor& y) {
  return activation_backward<ew::SigmoidBackward>(g, y);
}
Tensor d(const GeluErf&, const Tensor& g, const Tensor& x, const Tensor&) { return activation_backward<ew::GeluBackward>(g, x); }
Tensor d(const GeluTanh&, const Tensor& g, const Tensor& x, const Tensor&) {
  return activation_backward<ew::GeluTanhBackward>(g, x);
}
Tensor d(const Silu&, const Tensor& g, const Tensor& x, const Tensor&) { return activation_backward<ew::SiluBackward>(g, x); }
Tensor d(const Erf&, const Tensor& g, const Tensor& x, const Tensor&) {
  const Tensor x32 = opmath(x);
  return opmath(g) * exp(neg(x32 * x32)) * 1.12837916709551257390;  // 2 / sqrt(pi)
}
Tensor d(const Reciprocal&, const Tensor& g, const Tensor&, const Tensor& y) {
  const Tensor y32 = opmath(y);
  return neg(opmath(g) * (y32 * y32));
}
Tensor d(const PowScalar& p, const Tensor& g, const Tensor& x, const Tensor&) {
  if (p.exponent == 0) return zeros_like(g);
  return opmath(g) * (pow(opmath(x), p.exponent - 1) * p.exponent);
}

using ew::Add, ew::Div, ew::Maximum, ew::Minimum, ew::Mul, ew::Pow, ew::Sub;
struct Grads {
  Tensor a, b;
};
// The backward ops' own: a = gg * f'(s) (the op itself on gg), b = gg * g * f''(s), s the saved tensor.
Grads d(const ew::ReluBackward&, const Tensor& gg, const Tensor&, const Tensor& y, const Tensor&) {
  return {activation_backward<ew::ReluBackward>(gg, y), zeros_like(y)};
}
Grads d(const ew::TanhBackward&, const Tensor& gg, const Tensor& g, const Tensor& y, const Tensor&) {
  return {activation_backward<ew::TanhBackward>(gg, y), opmath(gg) * opmath(g) * (opmath(y) * -2)};
}
Grads d(const ew::SigmoidBackward&, const Tensor& gg, const Tensor& g, const Tensor& y, const Tensor&) {
  return {activation_backward<ew::SigmoidBackward>(gg, y), opmath(gg) * opmath(g) * (1 - opmath(y) * 2)};
}
// (Phi + x phi)' = 2 phi + x phi' = phi (2 - x^2)
Grads d(const ew::GeluBackward&, const Tensor& gg, const Tensor& g, const Tensor& x_in, const Tensor&) {
  const Tensor x = opmath(x_in), pdf = exp(x * x * -0.5) * kInvSqrt2Pi;
  return {activation_backward<ew::GeluBackward>(gg, x_in), opmath(gg) * opmath(g) * (pdf * (2 - x * x))};
}
// f = (1 + t) / 2 + x (1 - t^2) u' / 2 with t = tanh(u): f' = (1 - t^2) (u' + x (u'' - 2 t u'^2) / 2)
Grads d(const ew::GeluTanhBackward&, const Tensor& gg, const Tensor& g, const Tensor& x_in, const Tensor&) {
  const Tensor x = opmath(x_in), x2 = x * x;
  const Tensor t = tanh((x + x2 * x * 0.044715) * kSqrt2OverPi);
  const Tensor du = (x2 * (3 * 0.044715) + 1) * kSqrt2OverPi, ddu = x * (6 * 0.044715 * kSqrt2OverPi);
  const Tensor second = (1 - t * t) * (du + x * 0.5 * (ddu - t * du * du * 2));
  return {activation_backward<ew::GeluTanhBackward>(gg, x_in), opmath(gg) * opmath(g) * second};
}
// f = s (1 + x (1 - s)) with s = sigmoid(x): f' = s (1 - s) (2 + x (1 - 2 s))
Grads d(const ew::SiluBackward&, const Tensor& gg, const Tensor& g, const Tensor& x_in, const Tensor&) {
  const Tensor x = opmath(x_in), s = sigmoid(x);
  return {activation_backward<ew::SiluBackward>(gg, x_in), opmath(gg) * opmath(g) * (s * (1 - s) * (x * (1 - s * 2) + 2))};
}
Grads d(const Add&, const Tensor& g, const Tensor&, const Tensor&, const Tensor&) { return {g, g}; }
// Rounded quotients are piecewise constant: a zero gradient, as PyTorch's for a rounding mode.
Grads d(const ew::DivTrunc&, const Tensor& g, const Tensor&, const Tensor&, const Tensor&) {
  return {zeros_like(g), zeros_like(g)};
}
Grads d(const ew::DivFloor&, const Tensor& g, const Tensor&, const Tensor&, const Tensor&) {
  return {zeros_like(g), zeros_like(g)};
}
Grads d(const Sub&, const Tensor& g, const Tensor&, const Tensor&, const Tensor&) { return {g, neg(g)}; }
Grads d(const Mul&, const Tensor& g, const Tensor& a, const Tensor& b, const Tensor&) { return {g * b, g * a}; }
// d/db a / b = -(g / b) (a / b): two quotients of operands, where b * b would leave f32's range for a
// bfloat16 b near its limits (2^-126 squared is 0) while the gradient itself is in range.
Grads d(const Div&, const Tensor& g, const Tensor& a, const Tensor& b, const Tensor&) {
  const Tensor b32 = opmath(b), g_over_b = opmath(g) / b32;  // d/da, rounded once by apply()
  return {g_over_b, neg(g_over_b * (opmath(a) / b32))};
}
// d/da a^b = b a^(b-1), taken as 0 where b == 0 (0 * 0^-1 would be NaN at a == 0); d/db a^b = a^b log a,
// taken as 0 where a == 0 and b >= 0. Both are PyTorch's (pow_backward_self, pow_backward_exponent).
Grads d(const Pow&, const Tensor& g_in, const Tensor& a_in, const Tensor& b_in, const Tensor& y) {
  const Tensor g = opmath(g_in), a = opmath(a_in), b = opmath(b_in);
  // b a^(b-1) first, as PyTorch's pow_backward_self: g * b alone overflows for b near the range's end.
  const Tensor ga = masked_fill(g * (b * pow(a, b - 1)), eq(b_in, 0), 0);
  const Tensor gb = masked_fill(g * opmath(y) * log(a), where(eq(a_in, 0), ge(b_in, 0), eq(a_in, 0)), 0);
  return {ga, gb};
}
// PyTorch's maximum/minimum backward: a tie splits the gradient evenly; where the comparison is
// undecided (a NaN operand) both operands get the whole gradient; the smaller (larger) operand none.
Grads split_extreme(const Tensor& g, const Tensor& a, const Tensor& b, const Tensor& a_loses, const Tensor& b_loses) {
  const Tensor shared = where(eq(a, b), g * 0.5, g);
  const Tensor zero = zeros_like(g);
  return {where(a_loses, zero, shared), where(b_loses, zero, shared)};
}
Grads d(const Maximum&, const Tensor& g, const Tensor& a, const Tensor& b, const Tensor&) {
  return split_extreme(g, a, b, lt(a, b), gt(a, b));
}
Grads d(const Minimum&, const Tensor& g, const Tensor& a, const Tensor& b, const Tensor&) {
  return split_extreme(g, a, b, gt(a, b), lt(a, b));
}
template <class Op>
Grads d(const Op&, const Tensor&, const Tensor&, const Tensor&, const Tensor&) {
  throw AutogradError(std::string(BinaryTraits<Op>::name) + " is not differentiable");
}

}  // namespace

template <class Op>
std::vector<Tensor> Unary<Op>::vjp(const std::vector<Tensor>& g, const std::vector<Tensor>& in,
                                   const std::vector<Tensor>& out) {
  return {d(op_, g[0], in[0], out[0])};
}

namespace {
// The dtype of a binary op's operands a and b of different dtypes: a 16-bit one with a 0-dim f32
// scalar (f32_scalar_operand) computes in f32 and stores the 16-bit dtype.
DType with_f32_scalar(const char* op, const Tensor& a, const Tensor& b) {
  if (a.dtype() == DType::f32 && a.dim() == 0 && is_reduced_float(b.dtype())) return b.dtype();
  if (b.dtype() == DType::f32 && b.dim() == 0 && is_reduced_float(a.dtype())) return a.dtype();
  throw DTypeError(std::string(op) + ": operands of dtypes " + dtype_name(a.dtype()) + " and " + dtype_name(b.dtype()) +
                   "; expected one dtype, or a float16/bfloat16 operand with a 0-dim float32 scalar");
}
}  // namespace

template <class Op>
std::vector<OutputSpec> Binary<Op>::infer(const std::vector<Tensor>& in) const {
  const Shape s = broadcast_shapes(in[0].shape(), in[1].shape(), name());
  DType dt = in[0].dtype();
  if (dt != in[1].dtype()) [[unlikely]] dt = with_f32_scalar(name(), in[0], in[1]);
  return {{s, BinaryTraits<Op>::kind == BinaryKind::Compare ? DType::boolean : dt, elementwise_output_layout(in, s)}};
}

// An f32 scalar operand of a 16-bit op (one that requires grad) sums its 16-bit gradient terms in
// f32: their total may pass 65504.
template <class Op>
std::vector<Tensor> Binary<Op>::vjp(const std::vector<Tensor>& g, const std::vector<Tensor>& in,
                                    const std::vector<Tensor>& out) {
  Grads r = d(Op{}, g[0], in[0], in[1], out[0]);
  auto reduce = [&](const Tensor& grad, size_t i) {
    const autograd::TensorMeta& m = input_meta(i);
    return sum_to(grad.to(m.dtype), m.shape);
  };
  return {input_needs_grad(0) ? reduce(r.a, 0) : Tensor(), input_needs_grad(1) ? reduce(r.b, 1) : Tensor()};
}

std::vector<Tensor> Where::vjp(const std::vector<Tensor>& g, const std::vector<Tensor>& in,
                               const std::vector<Tensor>&) {
  const Tensor zero = zeros_like(g[0]);
  return {Tensor(), sum_to(where(in[0], g[0], zero), input_meta(1).shape),
          sum_to(where(in[0], zero, g[0]), input_meta(2).shape)};
}

#define EMBER_INSTANTIATE_UNARY(F, ...)                                                                      \
  template std::vector<Tensor> Unary<ew::F>::vjp(const std::vector<Tensor>&, const std::vector<Tensor>&, \
                                                 const std::vector<Tensor>&);
EMBER_UNARY_OPS(EMBER_INSTANTIATE_UNARY)
#undef EMBER_INSTANTIATE_UNARY
#define EMBER_INSTANTIATE_BINARY(F, ...)                                                                      \
  template std::vector<OutputSpec> Binary<ew::F>::infer(const std::vector<Tensor>&) const;                \
  template std::vector<Tensor> Binary<ew::F>::vjp(const std::vector<Tensor>&, const std::vector<Tensor>&, \
                                                  const std::vector<Tensor>&);
EMBER_BINARY_OPS(EMBER_INSTANTIATE_BINARY)
#undef EMBER_INSTANTIATE_BINARY

}  // namespace ember
