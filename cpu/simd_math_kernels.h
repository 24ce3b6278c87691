// The bodies of cpu/simd_math.h's kernels, written once over an instruction set's traits S and
// compiled once per set (cpu/simd_math_avx2.cpp, cpu/simd_math_avx512.cpp) with it enabled. S gives
// the vector type V of `width` floats, loads and stores (whole, of even or odd lanes), arithmetic,
// lane masks (less, greater_unless_nan, select),
// SLEEF's functions and a double-precision Sum.
//
// Neither this header nor those files may use a standard-library template or inline function: the
// copy of one compiled there, with AVX-512 enabled, could be the one the linker keeps for the whole
// program, which would then fault on a CPU without it. Hence the plain loops and __builtin_inff.
//
// Most formulas keep the operation order of the scalar functors (tensor/elementwise_ops.h), so the two
// paths differ only by the transcendental functions' rounding; erf, gelu and gelu_tanh take cheaper
// forms, said where they are.
#pragma once

#include <cstdint>

#include "cpu/simd_math.h"

namespace ember::cpu::simd {

// x[0, n) for n < width, padded with `pad`.
template <class S>
inline typename S::V load_tail(const float* x, int64_t n, float pad) {
  alignas(64) float block[S::width];
  for (int64_t k = 0; k < S::width; ++k) block[k] = k < n ? x[k] : pad;
  return S::load(block);
}

// The first n < width lanes of v into y.
template <class S>
inline void store_tail(float* y, typename S::V v, int64_t n) {
  alignas(64) float block[S::width];
  S::store(block, v);
  for (int64_t k = 0; k < n; ++k) y[k] = block[k];
}

// y[i] = f(x[i]) a vector at a time; the last partial vector is padded with zeros.
template <class S, class F>
inline void map(const float* x, float* y, int64_t n, F f) {
  int64_t i = 0;
  for (; i + S::width <= n; i += S::width) S::store(y + i, f(S::load(x + i)));
  if (i < n) store_tail<S>(y + i, f(load_tail<S>(x + i, n - i, 0.0f)), n - i);
}

// y[i] = f(a[i], b[i]) a vector at a time; the last partial vector is padded with zeros.
template <class S, class F>
inline void map2(const float* a, const float* b, float* y, int64_t n, F f) {
  int64_t i = 0;
  for (; i + S::width <= n; i += S::width) S::store(y + i, f(S::load(a + i), S::load(b + i)));
  if (i < n) store_tail<S>(y + i, f(load_tail<S>(a + i, n - i, 0.0f), load_tail<S>(b + i, n - i, 0.0f)), n - i);
}

// Calls f(v) for each vector of x[0, n); the last partial one is padded with `pad`, a value that
// leaves the reduction unchanged.
template <class S, class F>
inline void for_each_vector(const float* x, int64_t n, float pad, F f) {
  int64_t i = 0;
  for (; i + S::width <= n; i += S::width) f(S::load(x + i), i, S::width);
  if (i < n) f(load_tail<S>(x + i, n - i, pad), i, n - i);
}

// 1 - s for s = 1 / (1 + e): e s, which does not cancel where s is near 1. Where e overflowed to inf
// (s is 0 there) it is taken as 1, so that the terms it multiplies with s vanish instead of making
// inf * 0 = NaN (silu's gradient below x = -88 was NaN).
template <class S>
inline typename S::V one_minus_sigmoid(typename S::V e, typename S::V s) {
  const typename S::V one = S::broadcast(1.0f);
  return S::select(S::less(e, S::broadcast(__builtin_inff())), S::mul(e, s), one);
}

// The two halves of erf for the vector kernels (SLEEF's 1-ULP erff costs about 8 of its exps, and
// gelu is mostly erf): `series`, erf(z) by its Maclaurin series to z^13 (2/sqrt(pi) sum of
// (-1)^n z^(2n+1) / (n! (2n+1)); truncation below 1e-10 relative for |z| < 0.5), and `tail`, erfc(|z|)
// by Abramowitz and Stegun's 7.1.26, t (a1 + a2 t + ... + a5 t^4) exp(-z^2) with t = 1 / (1 + p |z|),
// within 1.5e-7 of it (A&S's bound), used where |z| >= 0.5. Neither is cancelled: erf and 1 + erf are
// taken from whichever half keeps them accurate.
template <class S>
struct ErfParts {
  using V = typename S::V;
  V series, tail;
  typename S::Mask small;  // the lanes where |z| < 0.5

  explicit ErfParts(V z) {
    const V z2 = S::mul(z, z);
    constexpr float kSeries[] = {1.0f / 9360, -1.0f / 1320, 1.0f / 216, -1.0f / 42, 1.0f / 10, -1.0f / 3, 1.0f};
    V poly = S::broadcast(kSeries[0]);
    for (int i = 1; i < 7; ++i) poly = S::mul_add(poly, z2, S::broadcast(kSeries[i]));
    series = S::mul(S::mul(S::broadcast(1.12837916709551257390f), z), poly);  // 2 / sqrt(pi)
    const V az = S::abs(z), one = S::broadcast(1.0f);
    const V t = S::div(one, S::mul_add(S::broadcast(0.3275911f), az, one));
    constexpr float kA[] = {1.061405429f, -1.453152027f, 1.421413741f, -0.284496736f, 0.254829592f};
    V r = S::broadcast(kA[0]);
    for (int i = 1; i < 5; ++i) r = S::mul_add(r, t, S::broadcast(kA[i]));
    tail = S::mul(S::mul(r, t), S::exp(S::neg(z2)));
    small = S::less(az, S::broadcast(0.5f));
  }
  V erf(V z) const { return S::select(small, series, S::copy_sign(S::sub(S::broadcast(1.0f), tail), z)); }
  // 1 + erf(z): 2 - erfc(|z|) above, erfc(|z|) itself below (where 1 + erf would cancel).
  V one_plus_erf(V z) const {
    const V two_minus = S::sub(S::broadcast(2.0f), tail);
    return S::select(small, S::add(S::broadcast(1.0f), series), S::select(S::less(z, S::broadcast(0.0f)), tail, two_minus));
  }
};

// constexpr, so that the tables are filled at compile time: code run at load time in the AVX-512 file
// would fault on a CPU without it.
template <class S>
constexpr Kernels make_kernels() {
  using V = typename S::V;
  constexpr float kInf = __builtin_inff();
  Kernels k{};
  k.exp = [](const float* x, float* y, int64_t n) { map<S>(x, y, n, [](V v) { return S::exp(v); }); };
  k.log = [](const float* x, float* y, int64_t n) { map<S>(x, y, n, [](V v) { return S::log(v); }); };
  // SLEEF's log1pf returns inf above 1e38 (its bound); log(x) there is log1p(x) rounded to float.
  k.log1p = [](const float* x, float* y, int64_t n) {
    map<S>(x, y, n, [](V v) { return S::select(S::less(v, S::broadcast(1e38f)), S::log1p(v), S::log(v)); });
  };
  k.sin = [](const float* x, float* y, int64_t n) { map<S>(x, y, n, [](V v) { return S::sin(v); }); };
  k.cos = [](const float* x, float* y, int64_t n) { map<S>(x, y, n, [](V v) { return S::cos(v); }); };
  k.tanh = [](const float* x, float* y, int64_t n) { map<S>(x, y, n, [](V v) { return S::tanh(v); }); };
  k.erf = [](const float* x, float* y, int64_t n) { map<S>(x, y, n, [](V v) { return ErfParts<S>(v).erf(v); }); };
  k.sigmoid = [](const float* x, float* y, int64_t n) {
    map<S>(x, y, n, [](V v) {
      const V one = S::broadcast(1.0f);
      return S::div(one, S::add(one, S::exp(S::neg(v))));
    });
  };
  k.silu = [](const float* x, float* y, int64_t n) {
    map<S>(x, y, n, [](V v) { return S::div(v, S::add(S::broadcast(1.0f), S::exp(S::neg(v)))); });
  };
  k.gelu_erf = [](const float* x, float* y, int64_t n) {
    map<S>(x, y, n, [](V v) {
      const V z = S::mul(v, S::broadcast(0.70710678118654752440f));
      return S::mul(S::mul(S::broadcast(0.5f), v), ErfParts<S>(z).one_plus_erf(z));
    });
  };
  k.gelu_tanh = [](const float* x, float* y, int64_t n) {
    // (1 + tanh(u)) / 2 = 1 / (1 + exp(-2u)): one exp instead of SLEEF's tanh, and no cancellation
    // where tanh(u) is near -1.
    map<S>(x, y, n, [](V v) {
      const V cube = S::mul(S::mul(S::mul(S::broadcast(0.044715f), v), v), v);
      const V inner = S::mul(S::broadcast(-2 * 0.79788456080286535588f), S::add(v, cube));  // -2 sqrt(2/pi)
      return S::div(v, S::add(S::broadcast(1.0f), S::exp(inner)));
    });
  };
  k.gelu_erf_backward = [](const float* g, const float* x, float* dx, int64_t n) {
    map2<S>(g, x, dx, n, [](V gv, V v) {  // g (Phi(x) + x phi(x))
      const V z = S::mul(v, S::broadcast(0.70710678118654752440f));
      const V cdf = S::mul(S::broadcast(0.5f), ErfParts<S>(z).one_plus_erf(z));
      const V pdf = S::mul(S::exp(S::mul(S::broadcast(-0.5f), S::mul(v, v))), S::broadcast(0.39894228040143267794f));
      return S::mul(gv, S::add(cdf, S::mul(v, pdf)));
    });
  };
  // With s = (1 + tanh(u)) / 2 = 1 / (1 + e), e = exp(-2u): 1 - tanh(u)^2 = 4 s (1 - s), one exp as in the
  // forward; 1 - s is taken as e s, which does not cancel where s is near 1.
  k.gelu_tanh_backward = [](const float* g, const float* x, float* dx, int64_t n) {
    map2<S>(g, x, dx, n, [](V gv, V v) {
      const V k = S::broadcast(0.79788456080286535588f), c = S::broadcast(0.044715f), one = S::broadcast(1.0f);
      const V x2 = S::mul(v, v);
      const V u = S::mul(k, S::add(v, S::mul(S::mul(c, x2), v)));
      const V e = S::exp(S::mul(S::broadcast(-2.0f), u));
      const V s = S::div(one, S::add(one, e));
      const V du = S::mul(k, S::add(one, S::mul(S::broadcast(3 * 0.044715f), x2)));
      // w = s (1 - s) is 0 where tanh saturates, and so is the slope, whatever 2 x du overflowed to.
      const V w = S::mul(s, one_minus_sigmoid<S>(e, s)), zero = S::broadcast(0.0f);
      const V slope = S::select(S::greater_unless_nan(w, zero), S::mul(S::mul(S::mul(S::broadcast(2.0f), v), w), du), zero);
      return S::mul(gv, S::add(s, slope));
    });
  };
  k.silu_backward = [](const float* g, const float* x, float* dx, int64_t n) {
    map2<S>(g, x, dx, n, [](V gv, V v) {  // g s (1 + x (1 - s)), 1 - s = e s with e = exp(-x)
      const V one = S::broadcast(1.0f);
      const V e = S::exp(S::neg(v));
      const V s = S::div(one, S::add(one, e)), zero = S::broadcast(0.0f);
      // 0 where s is 0 (x near -inf, where x (1 - s) would be -inf), as the scalar functor gives.
      const V r = S::mul(gv, S::mul(s, S::add(S::mul(v, one_minus_sigmoid<S>(e, s)), one)));
      return S::select(S::greater_unless_nan(s, zero), r, zero);
    });
  };
  k.f16_to_f32 = [](const uint16_t* x, float* y, int64_t n) {
    int64_t i = 0;
    for (; i + S::width <= n; i += S::width) S::store(y + i, S::load_half(x + i));
    for (; i < n; ++i) y[i] = S::half_to_float(x[i]);
  };
  k.f32_to_f16 = [](const float* x, uint16_t* y, int64_t n) {
    int64_t i = 0;
    for (; i + S::width <= n; i += S::width) S::store_half(y + i, S::load(x + i));
    for (; i < n; ++i) y[i] = S::float_to_half(x[i]);
  };
  k.max = [](const float* x, int64_t n) {
    V m = S::broadcast(-kInf);
    for_each_vector<S>(x, n, -kInf, [&](V v, int64_t, int64_t) { m = S::max_skip_nan(v, m); });
    return S::lane_max(m);
  };
  k.sum = [](const float* x, int64_t n) {
    typename S::Sum s = S::zero_sum();
    for_each_vector<S>(x, n, 0.0f, [&](V v, int64_t, int64_t) { S::accumulate(s, v); });
    return S::total(s);
  };
  k.sum_squared_deviations = [](const float* x, double center, int64_t n) {
    typename S::Sum s = S::zero_sum();
    int64_t i = 0;
    for (; i + S::width <= n; i += S::width) S::accumulate_squared_deviations(s, S::load(x + i), center);
    double tail = 0;  // no padding value adds 0 here
    for (; i < n; ++i) {
      const double d = static_cast<double>(x[i]) - center;
      tail += d * d;
    }
    return S::total(s) + tail;
  };
  k.sum_products_about = [](const float* g, const float* x, double center, int64_t n) {
    typename S::Sum s = S::zero_sum();
    int64_t i = 0;
    for (; i + S::width <= n; i += S::width) S::accumulate_products_about(s, S::load(g + i), S::load(x + i), center);
    double tail = 0;
    for (; i < n; ++i) tail += static_cast<double>(g[i]) * (static_cast<double>(x[i]) - center);
    return S::total(s) + tail;
  };
  // Padding with -inf adds exp(-inf) = 0 (or NaN when shift is -inf, as every real lane is then).
  k.exp_sum = [](const float* x, float shift, float* y, int64_t n) {
    const V s = S::broadcast(shift);
    typename S::Sum total = S::zero_sum();
    for_each_vector<S>(x, n, -kInf, [&](V v, int64_t i, int64_t lanes) {
      const V e = S::exp(S::sub(v, s));
      if (y != nullptr) {
        if (lanes == S::width) S::store(y + i, e);
        else store_tail<S>(y + i, e, lanes);
      }
      S::accumulate(total, e);
    });
    return S::total(total);
  };
  k.exp_scale = [](const float* x, float shift, float scale, float* y, int64_t n) {
    const V s = S::broadcast(shift), c = S::broadcast(scale);
    map<S>(x, y, n, [&](V v) { return S::mul(S::exp(S::sub(v, s)), c); });
  };
  k.max_pool_2x2 = [](const float* a, const float* b, float* y, float* tap, int64_t n) {
    int64_t j = 0;
    for (; j + S::width <= n; j += S::width) {
      V best = S::even_lanes(a + 2 * j), which = S::broadcast(0.0f);
      const V taps[3] = {S::odd_lanes(a + 2 * j), S::even_lanes(b + 2 * j), S::odd_lanes(b + 2 * j)};
      for (int t = 0; t < 3; ++t) {
        const typename S::Mask take = S::greater_unless_nan(taps[t], best);
        best = S::select(take, taps[t], best);
        which = S::select(take, S::broadcast(static_cast<float>(t + 1)), which);
      }
      S::store(y + j, best);
      S::store(tap + j, which);
    }
    for (; j < n; ++j) {
      const float v[4] = {a[2 * j], a[2 * j + 1], b[2 * j], b[2 * j + 1]};
      float best = v[0];
      int which = 0;
      for (int t = 1; t < 4; ++t)
        if (!(v[t] <= best) && best == best) best = v[t], which = t;
      y[j] = best;
      tap[j] = static_cast<float>(which);
    }
  };
  return k;
}

}  // namespace ember::cpu::simd
