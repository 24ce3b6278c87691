// The elementwise functors, compiled for host and device. Adding an elementwise op is one line in
// a list below, one functor here, one vjp in tensor/elementwise.cpp and one test row.
// Functors take and return the compute type (float for f16/bf16).
#pragma once

#include <cmath>
#include <type_traits>

#include "tensor/half.h"  // EMBER_HD
#include "tensor/math.h"  // transcendentals: the same bits on every CPU in deterministic mode

namespace ember::ew {

// X(Functor, "name", kind, saves). kind: Numeric ops run on every non-bool dtype; Floating ops
// turn integer inputs into f32 first. saves: what the vjp needs (see SaveMask in primitive.h).
#define EMBER_UNARY_OPS(X)                  \
  X(Neg, "neg", Numeric, 0)                 \
  X(Abs, "abs", Numeric, 1)                 \
  X(Sign, "sign", Numeric, 0)               \
  X(Square, "square", Numeric, 1)           \
  X(Relu, "relu", Numeric, 2)               \
  X(Clamp, "clamp", Numeric, 1)             \
  X(Exp, "exp", Floating, 2)                \
  X(Log, "log", Floating, 1)                \
  X(Log1p, "log1p", Floating, 1)            \
  X(Sqrt, "sqrt", Floating, 2)              \
  X(Rsqrt, "rsqrt", Floating, 2)            \
  X(Sin, "sin", Floating, 1)                \
  X(Cos, "cos", Floating, 1)                \
  X(Tanh, "tanh", Floating, 2)              \
  X(Sigmoid, "sigmoid", Floating, 2)        \
  X(GeluErf, "gelu", Floating, 1)           \
  X(GeluTanh, "gelu_tanh", Floating, 1)     \
  X(Silu, "silu", Floating, 1)              \
  X(Erf, "erf", Floating, 1)                \
  X(Reciprocal, "reciprocal", Floating, 2)  \
  X(PowScalar, "pow_scalar", Floating, 1)

// X(Functor, "name", kind, saves). kind: Arith keeps the promoted dtype; Compare returns bool;
// Floating takes floating dtypes only. The *Backward ops are the activations' gradients, called by their vjps.
#define EMBER_BINARY_OPS(X)         \
  X(Add, "add", Arith, 0)           \
  X(Sub, "sub", Arith, 0)           \
  X(Mul, "mul", Arith, 1)           \
  X(Div, "div", Arith, 1)           \
  X(DivTrunc, "div_trunc", Arith, 0) \
  X(DivFloor, "div_floor", Arith, 0) \
  X(Pow, "pow", Arith, 3)           \
  X(Maximum, "maximum", Arith, 1)   \
  X(Minimum, "minimum", Arith, 1)   \
  X(Eq, "eq", Compare, 0)           \
  X(Ne, "ne", Compare, 0)           \
  X(Lt, "lt", Compare, 0)           \
  X(Le, "le", Compare, 0)           \
  X(Gt, "gt", Compare, 0)           \
  X(Ge, "ge", Compare, 0)           \
  X(ReluBackward, "relu_backward", Arith, 1)              \
  X(TanhBackward, "tanh_backward", Floating, 1)           \
  X(SigmoidBackward, "sigmoid_backward", Floating, 1)     \
  X(GeluBackward, "gelu_backward", Floating, 1)           \
  X(GeluTanhBackward, "gelu_tanh_backward", Floating, 1)  \
  X(SiluBackward, "silu_backward", Floating, 1)

// The activations' backward: the input's gradient from the output's gradient g and the saved
// output y (tanh, sigmoid) or input x, in one pass instead of the several ops of its formula.
// g where y > 0, else 0 (where y is NaN too).
// Zero where y <= 0, else g: a NaN output passes the gradient, as PyTorch's threshold_backward does.
struct ReluBackward { template <class T> EMBER_HD T operator()(T g, T y) const { return y <= T(0) ? T(0) : g; } };
struct TanhBackward { template <class T> EMBER_HD T operator()(T g, T y) const { return g * (T(1) - y * y); } };
struct SigmoidBackward { template <class T> EMBER_HD T operator()(T g, T y) const { return g * (y * (T(1) - y)); } };
// d/dx x Phi(x) = Phi(x) + x phi(x)
struct GeluBackward {
  template <class T> EMBER_HD T operator()(T g, T x) const {
    // pdf first: in this order ptxas (CUDA 13, sm_90) keeps the f64 kernel in registers, in the other
    // it spills 8 bytes (tools/kernel_resources.py). The arithmetic is the same.
    const T pdf = math::exp(T(-0.5) * x * x) * T(0.39894228040143267794);  // 1 / sqrt(2 pi)
    const T cdf = T(0.5) * (T(1) + math::erf(x * T(0.70710678118654752440)));
    return g * (cdf + x * pdf);
  }
};
// d/dx x (1 + tanh(u)) / 2 with u = k (x + c x^3): (1 + t) / 2 + x (1 - t^2) u' / 2
struct GeluTanhBackward {
  template <class T> EMBER_HD T operator()(T g, T x) const {
    const T k = T(0.79788456080286535588), c = T(0.044715);  // sqrt(2/pi)
    const T t = math::tanh(k * (x + c * x * x * x));
    const T du = k * (T(1) + T(3) * c * x * x), w = T(1) - t * t;
    // Where tanh saturates (w = 0) the slope is 0, whatever x * du overflowed to.
    return g * (T(0.5) * (T(1) + t) + (w == T(0) ? T(0) : T(0.5) * x * w * du));
  }
};
// d/dx x s(x) = s (1 + x (1 - s)), s = sigmoid(x) = 1 / (1 + e) with e = exp(-x); 1 - s = e s does not
// cancel where s is near 1. Where e overflows (s = 0) the product is 0, not inf * 0 = NaN.
struct SiluBackward {
  template <class T> EMBER_HD T operator()(T g, T x) const {
    const T e = math::exp(-x), s = T(1) / (T(1) + e);
    return g * (s == T(0) ? T(0) : s * (x * (e * s) + T(1)));
  }
};

template <class T>
EMBER_HD inline bool is_nan(T x) {
  return x != x;
}

struct Neg { template <class T> EMBER_HD T operator()(T x) const { return -x; } };
struct Abs { template <class T> EMBER_HD T operator()(T x) const { return x < T(0) ? T(-x) : x; } };
struct Sign {
  template <class T> EMBER_HD T operator()(T x) const { return T((T(0) < x) - (x < T(0))); }
};
struct Square { template <class T> EMBER_HD T operator()(T x) const { return x * x; } };
struct Relu { template <class T> EMBER_HD T operator()(T x) const { return x < T(0) ? T(0) : x; } };  // NaN passes
struct Clamp {
  double lo, hi;  // ±infinity when a bound is absent
  template <class T> EMBER_HD T operator()(T x) const {
    if (x < lo) return T(lo);
    if (x > hi) return T(hi);
    return x;
  }
};
struct Exp { template <class T> EMBER_HD T operator()(T x) const { return math::exp(x); } };
struct Log { template <class T> EMBER_HD T operator()(T x) const { return math::log(x); } };
struct Log1p { template <class T> EMBER_HD T operator()(T x) const { return math::log1p(x); } };
struct Sqrt { template <class T> EMBER_HD T operator()(T x) const { return std::sqrt(x); } };
struct Rsqrt { template <class T> EMBER_HD T operator()(T x) const { return T(1) / std::sqrt(x); } };
struct Sin { template <class T> EMBER_HD T operator()(T x) const { return math::sin(x); } };
struct Cos { template <class T> EMBER_HD T operator()(T x) const { return math::cos(x); } };
struct Tanh { template <class T> EMBER_HD T operator()(T x) const { return math::tanh(x); } };
struct Sigmoid { template <class T> EMBER_HD T operator()(T x) const { return T(1) / (T(1) + math::exp(-x)); } };
// gelu(x) = x * Phi(x) (Hendrycks & Gimpel 2016); the tanh form is their approximation.
struct GeluErf {
  template <class T> EMBER_HD T operator()(T x) const {
    return T(0.5) * x * (T(1) + math::erf(x * T(0.70710678118654752440)));
  }
};
struct GeluTanh {
  template <class T> EMBER_HD T operator()(T x) const {
    const T inner = T(0.79788456080286535588) * (x + T(0.044715) * x * x * x);  // sqrt(2/pi)
    return T(0.5) * x * (T(1) + math::tanh(inner));
  }
};
struct Silu { template <class T> EMBER_HD T operator()(T x) const { return x / (T(1) + math::exp(-x)); } };
struct Erf { template <class T> EMBER_HD T operator()(T x) const { return math::erf(x); } };
struct Reciprocal { template <class T> EMBER_HD T operator()(T x) const { return T(1) / x; } };
struct PowScalar {
  double exponent;
  template <class T> EMBER_HD T operator()(T x) const {
    if (exponent == 2.0) return x * x;
    return math::pow(x, T(exponent));
  }
};

template <class T>
EMBER_HD inline T int_pow(T base, T e) {
  if (e < T(0)) return base == T(1) ? T(1) : (base == T(-1) ? ((e & T(1)) ? T(-1) : T(1)) : T(0));
  T r = 1;
  while (e) {
    if (e & T(1)) r *= base;
    base *= base;
    e >>= 1;
  }
  return r;
}

struct Add { template <class T> EMBER_HD T operator()(T a, T b) const { return a + b; } };
struct Sub { template <class T> EMBER_HD T operator()(T a, T b) const { return a - b; } };
struct Mul { template <class T> EMBER_HD T operator()(T a, T b) const { return a * b; } };
struct Div { template <class T> EMBER_HD T operator()(T a, T b) const { return a / b; } };
// a / b rounded toward zero, PyTorch's div(rounding_mode="trunc"). Integers divide as integers; their
// front end refuses a zero divisor before any kernel runs, and -1 negates in unsigned arithmetic, so
// that neither can trap (x86's idiv faults on x / 0 and on INT_MIN / -1).
template <class T>
EMBER_HD T int_div_trunc(T a, T b) {
  if (b == T(0)) return T(0);
  if constexpr (std::is_signed_v<T>)
    if (b == T(-1)) return static_cast<T>(std::make_unsigned_t<T>(0) - static_cast<std::make_unsigned_t<T>>(a));
  return static_cast<T>(a / b);
}
struct DivTrunc {
  template <class T> EMBER_HD T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T>) return int_div_trunc(a, b);
    else return std::trunc(a / b);
  }
};
// a / b rounded down, PyTorch's div(rounding_mode="floor"). Floats follow PyTorch's div_floor_floating:
// the quotient of a - fmod(a, b), which is exact where floor(a / b) would round a / b first (-0.0 where
// the quotient is 0 and negative, inf and NaN as a / b gives them).
struct DivFloor {
  template <class T> EMBER_HD T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T>) {
      const T q = int_div_trunc(a, b);
      // Exact for 0 (refused before) and -1, where a % b could trap like the division.
      if (b == T(0) || (std::is_signed_v<T> && b == T(-1))) return q;
      return (a % b != T(0) && ((a < T(0)) != (b < T(0)))) ? static_cast<T>(q - 1) : q;
    } else {
      if (b == T(0)) return a / b;
      const T mod = std::fmod(a, b);
      T div = (a - mod) / b;
      if (mod != T(0) && (b < T(0)) != (mod < T(0))) div -= T(1);
      if (div == T(0)) return std::copysign(T(0), a / b);
      T floor_div = std::floor(div);
      if (div - floor_div > T(0.5)) floor_div += T(1);
      return floor_div;
    }
  }
};
struct Pow {
  template <class T> EMBER_HD T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T>) return int_pow(a, b);
    else return math::pow(a, b);
  }
};
// maximum/minimum propagate NaN, as PyTorch's do.
struct Maximum {
  template <class T> EMBER_HD T operator()(T a, T b) const {
    return is_nan(a) ? a : (is_nan(b) ? b : (a > b ? a : b));
  }
};
struct Minimum {
  template <class T> EMBER_HD T operator()(T a, T b) const {
    return is_nan(a) ? a : (is_nan(b) ? b : (a < b ? a : b));
  }
};
struct Eq { template <class T> EMBER_HD bool operator()(T a, T b) const { return a == b; } };
struct Ne { template <class T> EMBER_HD bool operator()(T a, T b) const { return a != b; } };
struct Lt { template <class T> EMBER_HD bool operator()(T a, T b) const { return a < b; } };
struct Le { template <class T> EMBER_HD bool operator()(T a, T b) const { return a <= b; } };
struct Gt { template <class T> EMBER_HD bool operator()(T a, T b) const { return a > b; } };
struct Ge { template <class T> EMBER_HD bool operator()(T a, T b) const { return a >= b; } };

}  // namespace ember::ew

namespace ember {

// Each op's name, kind and saves from the lists, for the primitives and the CUDA kernels alike.
enum class UnaryKind { Numeric, Floating };
enum class BinaryKind { Arith, Compare, Floating };

template <class Op> struct UnaryTraits;
template <class Op> struct BinaryTraits;
#define EMBER_UNARY_TRAITS(F, NAME, KIND, SAVES)  \
  template <> struct UnaryTraits<ew::F> {         \
    static constexpr const char* name = NAME;     \
    static constexpr UnaryKind kind = UnaryKind::KIND; \
    static constexpr int saves = SAVES;           \
  };
EMBER_UNARY_OPS(EMBER_UNARY_TRAITS)
#undef EMBER_UNARY_TRAITS
#define EMBER_BINARY_TRAITS(F, NAME, KIND, SAVES)  \
  template <> struct BinaryTraits<ew::F> {         \
    static constexpr const char* name = NAME;      \
    static constexpr BinaryKind kind = BinaryKind::KIND; \
    static constexpr int saves = SAVES;            \
  };
EMBER_BINARY_OPS(EMBER_BINARY_TRAITS)
#undef EMBER_BINARY_TRAITS

}  // namespace ember
