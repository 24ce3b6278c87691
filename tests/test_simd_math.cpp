// The vector kernels of cpu/simd_math.h, for each instruction set this CPU has (the others are
// reported as skipped): their error against double-precision references over each function's
// domain and at the special values, the row reductions against plain loops on every tail length,
// and that the ops take them (and leave them in deterministic mode).
#include <doctest/doctest.h>

#include <bit>
#include <cfloat>
#include <cmath>
#include <functional>
#include <limits>
#include <numbers>
#include <string>
#include <vector>

#include "autograd/engine.h"
#include "cpu/simd_math.h"
#include "nn/normalization.h"
#include "nn/pooling.h"
#include "tensor/convert.h"
#include "tensor/deterministic.h"
#include "tensor/math.h"
#include "tensor/ops.h"

namespace {

using ember::cpu::simd::Isa;
using ember::cpu::simd::Kernels;

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// Units in the last place of the float nearest `want`: the gap to the next float away from zero,
// never less than the smallest normal's (below it the kernels may lose the low bits, as the
// C library's functions do).
double ulp_error(float got, double want) {
  const float w = static_cast<float>(std::fabs(want));
  const double ulp = std::nextafter(std::max(w, FLT_MIN), kInf) - std::max(w, FLT_MIN);
  return std::fabs(static_cast<double>(got) - want) / ulp;
}

// Inputs spread over [lo, hi]: evenly, plus every float around zero's neighbourhood when it lies inside.
std::vector<float> sweep(double lo, double hi, int n = 200000) {
  std::vector<float> x;
  for (int i = 0; i <= n; ++i) x.push_back(static_cast<float>(lo + (hi - lo) * i / n));
  for (double m = 1e-30; m < 1; m *= 1.7)
    for (double v : {m, -m})
      if (v >= lo && v <= hi) x.push_back(static_cast<float>(v));
  return x;
}

struct Function {
  std::string name;
  Kernels::Map Kernels::*kernel;
  std::function<double(double)> reference;
  double lo, hi;
  double max_ulp;  // the bound checked; the errors measured are in the test's output
  double max_abs;  // or an absolute error this small passes (erf: A&S 7.1.26's bound plus rounding)
};

double gelu_ref(double x) { return 0.5 * x * std::erfc(-x / std::sqrt(2.0)); }
// (1 + tanh(u)) / 2 written as 1 / (1 + exp(-2u)): in double too, 1 + tanh(u) cancels to 0 below u = -19.
double gelu_tanh_ref(double x) {
  return x / (1 + std::exp(-2 * std::sqrt(2 / std::numbers::pi) * (x + 0.044715 * x * x * x)));
}

// Measured on an AMD EPYC (Zen 5), the same for both instruction sets, max ULP error over these sweeps:
// exp 0.96, log 0.50, log1p 0.50, sin 0.83, cos 0.88, tanh 1.00, sigmoid 2.2, silu 2.3; erf 4.6 (2.8e-7
// absolute: A&S's 1.5e-7 plus rounding); gelu within 4.2e-7 absolute (1.8 ULP where the error is
// larger); gelu_tanh 1.5 ULP where the error passes 1e-7 (its far negative tail, below 1e-30, is
// ill-conditioned: 197 ULP there). The bounds leave room for rounding, not for another algorithm.
const std::vector<Function>& functions() {
  static const std::vector<Function> f = {
      {"exp", &Kernels::exp, [](double x) { return std::exp(x); }, -87, 88, 1.5, 0},
      {"log", &Kernels::log, [](double x) { return std::log(x); }, 1e-30, 1e30, 1.5, 0},
      {"log1p", &Kernels::log1p, [](double x) { return std::log1p(x); }, -0.999, 1e6, 1.5, 0},
      {"sin", &Kernels::sin, [](double x) { return std::sin(x); }, -100, 100, 1.5, 0},
      {"cos", &Kernels::cos, [](double x) { return std::cos(x); }, -100, 100, 1.5, 0},
      {"tanh", &Kernels::tanh, [](double x) { return std::tanh(x); }, -10, 10, 1.5, 0},
      {"sigmoid", &Kernels::sigmoid, [](double x) { return 1 / (1 + std::exp(-x)); }, -80, 80, 3, 0},
      {"silu", &Kernels::silu, [](double x) { return x / (1 + std::exp(-x)); }, -80, 80, 3, 0},
      {"erf", &Kernels::erf, [](double x) { return std::erf(x); }, -6, 6, 6, 2e-7},
      {"gelu", &Kernels::gelu_erf, gelu_ref, -10, 10, 6, 4e-7},
      {"gelu_tanh", &Kernels::gelu_tanh, gelu_tanh_ref, -10, 10, 4, 1e-7},
  };
  return f;
}

// The instruction sets to test; the ones this CPU lacks are skipped with a message.
std::vector<Isa> testable() {
  std::vector<Isa> isas;
  for (Isa isa : {Isa::avx2, Isa::avx512}) {
    if (ember::cpu::simd::cpu_supports(isa)) isas.push_back(isa);
    else MESSAGE("skipped: this CPU has no ", std::string(ember::cpu::simd::isa_name(isa)));
  }
  return isas;
}

}  // namespace

TEST_SUITE("cpu") {

TEST_CASE("simd math: each function within its error bound over its domain") {
  for (Isa isa : testable()) {
    const Kernels& k = *ember::cpu::simd::kernels_for(isa);
    const std::string set = ember::cpu::simd::isa_name(isa);
    for (const Function& f : functions()) {
      const std::vector<float> x = sweep(f.lo, f.hi);
      std::vector<float> y(x.size());
      (k.*f.kernel)(x.data(), y.data(), static_cast<int64_t>(x.size()));
      double max_ulp = 0, max_abs = 0, beyond = 0;  // beyond: the worst ULP error above the absolute bound
      float at = 0;
      for (size_t i = 0; i < x.size(); ++i) {
        const double want = f.reference(x[i]), e = ulp_error(y[i], want), abs_error = std::fabs(y[i] - want);
        max_ulp = std::max(max_ulp, e);
        max_abs = std::max(max_abs, abs_error);
        if (abs_error > f.max_abs && e > beyond) {
          beyond = e;
          at = x[i];
        }
      }
      MESSAGE(set, " ", f.name, ": max ", max_ulp, " ULP, max ", max_abs, " absolute; ", beyond, " ULP beyond ", f.max_abs);
      CHECK_MESSAGE(beyond <= f.max_ulp, set, " ", f.name, ": ", beyond, " ULP at x = ", at);
    }
  }
}

TEST_CASE("simd math: the activations' backward kernels within their error bounds") {
  struct Backward {
    std::string name;
    Kernels::Map2 Kernels::*kernel;
    double (*derivative)(double);
    double max_ulp, max_abs;
  };
  double (*gelu_tanh_slope)(double) = [](double x) {
    const double kk = std::sqrt(2 / std::numbers::pi), u = kk * (x + 0.044715 * x * x * x);
    const double s = 1 / (1 + std::exp(-2 * u));
    return s + 2 * x * s * (1 - s) * kk * (1 + 3 * 0.044715 * x * x);
  };
  // Measured on the EPYC above, both sets, over [-12, 12]: gelu within 1.9e-7 absolute (A&S again);
  // gelu_tanh 2.4 ULP and silu 3.0 ULP where the error passes 1e-7 (near their zeros and small values
  // the absolute error counts: the terms of f' cancel there in any float evaluation).
  const std::vector<Backward> cases = {
      {"gelu_backward", &Kernels::gelu_erf_backward,
       [](double x) { return 0.5 * std::erfc(-x / std::sqrt(2.0)) + x * std::exp(-0.5 * x * x) / std::sqrt(2 * std::numbers::pi); },
       4, 3e-7},
      {"gelu_tanh_backward", &Kernels::gelu_tanh_backward, gelu_tanh_slope, 4, 1e-7},
      {"silu_backward", &Kernels::silu_backward,
       [](double x) {
         const double s = 1 / (1 + std::exp(-x));
         return s * (1 + x * (1 - s));
       },
       4, 1e-7},
  };
  for (Isa isa : testable()) {
    const Kernels& kernels = *ember::cpu::simd::kernels_for(isa);
    const std::string set = ember::cpu::simd::isa_name(isa);
    for (const Backward& b : cases) {
      std::vector<float> x = sweep(-12, 12);
      // Where exp(-x) and exp(-2u) overflow: the gradients tend to 0 there, not NaN.
      x.insert(x.end(), {-1e4f, -500.0f, -100.0f, -89.0f, -88.5f, 88.5f, 100.0f, 1e4f});
      for (float g : {1.0f, -0.375f}) {  // -0.375 is exact: g * f'(x) rounds once, as f'(x) does
        const std::vector<float> gs(x.size(), g);
        std::vector<float> dx(x.size());
        (kernels.*b.kernel)(gs.data(), x.data(), dx.data(), static_cast<int64_t>(x.size()));
        double beyond = 0, max_abs = 0;
        float at = 0;
        for (size_t i = 0; i < x.size(); ++i) {
          const double want = g * b.derivative(x[i]), abs_error = std::fabs(dx[i] - want), e = ulp_error(dx[i], want);
          max_abs = std::max(max_abs, abs_error);
          if (abs_error > b.max_abs && e > beyond) {
            beyond = e;
            at = x[i];
          }
        }
        MESSAGE(set, " ", b.name, " g = ", g, ": max ", max_abs, " absolute; ", beyond, " ULP beyond ", b.max_abs, " (at ", at, ")");
        CHECK_MESSAGE(beyond <= b.max_ulp, set, " ", b.name, ": ", beyond, " ULP at x = ", at);
      }
    }
  }
}

TEST_CASE("simd math: silu's and gelu_tanh's gradients where exp overflows are 0, not NaN, on both paths") {
  const ember::Tensor x = ember::from_vector<float>({-1e4f, -500.0f, -100.0f, -89.0f, -12.0f}, {5});
  for (const bool deterministic : {false, true}) {  // the vector kernels, then the scalar functors
    ember::set_deterministic(deterministic);
    for (const bool tanh_form : {false, true}) {
      const ember::Tensor leaf = x.detach().requires_grad_(true);
      ember::sum(tanh_form ? ember::gelu(leaf, true) : ember::silu(leaf)).backward();
      for (int64_t i = 0; i < 5; ++i)
        CHECK_MESSAGE(std::fabs(leaf.grad().data<float>()[i]) < 1e-4f, (tanh_form ? "gelu_tanh" : "silu"), "'(",
                      x.data<float>()[i], ") = ", leaf.grad().data<float>()[i], deterministic ? " (scalar)" : "");
    }
  }
  ember::set_deterministic(false);
}

TEST_CASE("simd math: special values as the scalar functions give them") {
  const std::vector<float> x = {0.0f, -0.0f, kInf, -kInf, kNaN, 1e-40f, -1e-40f, 100.0f, -100.0f};
  for (Isa isa : testable()) {
    const Kernels& k = *ember::cpu::simd::kernels_for(isa);
    for (const Function& f : functions()) {
      std::vector<float> y(x.size());
      (k.*f.kernel)(x.data(), y.data(), static_cast<int64_t>(x.size()));
      for (size_t i = 0; i < x.size(); ++i) {
        const float want = static_cast<float>(f.reference(x[i]));  // overflows to inf as a float result does
        const std::string what = std::string(ember::cpu::simd::isa_name(isa)) + " " + f.name + "(" + std::to_string(x[i]) +
                                 ") = " + std::to_string(y[i]) + ", expected " + std::to_string(want);
        if (std::isnan(want)) CHECK_MESSAGE(std::isnan(y[i]), what);
        else if (std::isinf(want)) CHECK_MESSAGE(y[i] == want, what);
        else CHECK_MESSAGE(std::fabs(y[i] - want) <= 1e-6 * std::fabs(want) + 1e-30f, what);
      }
    }
  }
}

TEST_CASE("simd math: row reductions equal plain loops at every tail length") {
  for (Isa isa : testable()) {
    const Kernels& k = *ember::cpu::simd::kernels_for(isa);
    for (int64_t n = 0; n <= 70; ++n) {
      std::vector<float> x(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) x[i] = static_cast<float>(std::sin(0.7 * i) * 5 + (i % 3 == 0 ? 2 : 0));
      double sum = 0, exp_sum = 0;
      float max = -kInf;
      for (float v : x) {
        sum += v;
        max = std::fmax(max, v);
      }
      for (float v : x) exp_sum += std::exp(static_cast<double>(v) - max);
      const std::string what = std::string(ember::cpu::simd::isa_name(isa)) + ", n = " + std::to_string(n);
      CHECK_MESSAGE(k.max(x.data(), n) == max, what);
      CHECK_MESSAGE(std::fabs(k.sum(x.data(), n) - sum) <= 1e-12 * (1 + std::fabs(sum)), what);
      double squares = 0, products = 0;
      for (int64_t i = 0; i < n; ++i) {
        squares += (x[i] - 0.25) * (x[i] - 0.25);
        products += std::cos(i) * (x[i] - 0.25);
      }
      std::vector<float> g(x.size());
      for (int64_t i = 0; i < n; ++i) g[i] = static_cast<float>(std::cos(i));
      for (int64_t i = 0; i < n; ++i) products += (g[i] - std::cos(i)) * (x[i] - 0.25);  // g as stored
      CHECK_MESSAGE(std::fabs(k.sum_squared_deviations(x.data(), 0.25, n) - squares) <= 1e-12 * (1 + squares), what);
      CHECK_MESSAGE(std::fabs(k.sum_products_about(g.data(), x.data(), 0.25, n) - products) <= 1e-12 * (1 + std::fabs(products)),
                    what);
      std::vector<float> e(x.size(), -1.0f), scaled(x.size(), -1.0f);
      const double got = k.exp_sum(x.data(), max, e.data(), n);
      CHECK_MESSAGE(std::fabs(got - exp_sum) <= 1e-6 * exp_sum, what);
      CHECK_MESSAGE(k.exp_sum(x.data(), max, nullptr, n) == got, what);
      k.exp_scale(x.data(), max, 0.5f, scaled.data(), n);
      for (int64_t i = 0; i < n; ++i) {
        const double want = std::exp(static_cast<double>(x[i] - max));  // the kernel's argument, rounded
        CHECK_MESSAGE(std::fabs(e[i] - want) <= 2e-7 * want, what, ", element ", i);
        CHECK_MESSAGE(scaled[i] == e[i] * 0.5f, what, ", element ", i);
      }
      if (n > 0) {  // a NaN is skipped by max, as std::fmax skips it
        x[n / 2] = kNaN;
        float want = -kInf;
        for (float v : x) want = std::fmax(want, v);
        CHECK_MESSAGE(k.max(x.data(), n) == want, what, " with a NaN");
      }
    }
  }
}

TEST_CASE("simd math: half conversions give tensor/half.h's bits") {
  std::vector<uint16_t> every(65536);
  for (size_t i = 0; i < every.size(); ++i) every[i] = static_cast<uint16_t>(i);
  // Floats around every half: the halves themselves, the ties between neighbours, and values just off
  // them, beyond the largest, in the subnormals, and NaNs.
  std::vector<float> floats;
  for (uint16_t h : every) {
    const float v = static_cast<float>(std::bit_cast<ember::f16>(h));
    const float next = static_cast<float>(std::bit_cast<ember::f16>(static_cast<uint16_t>(h + 1)));
    floats.push_back(v);
    if (std::isfinite(v) && std::isfinite(next) && (h & 0x7fff) != 0x7bff && (h & 0x7fff) != 0x7fff) {
      const float tie = v + (next - v) / 2;
      floats.insert(floats.end(), {tie, std::nextafter(tie, kInf), std::nextafter(tie, -kInf)});
    }
  }
  floats.insert(floats.end(), {65520.0f, 65519.99f, 1e10f, -1e10f, kInf, -kInf, kNaN, 1e-10f, -3e-8f, 2.98e-8f});
  for (Isa isa : testable()) {
    const Kernels& k = *ember::cpu::simd::kernels_for(isa);
    std::vector<float> widened(every.size());
    k.f16_to_f32(every.data(), widened.data(), static_cast<int64_t>(every.size()));
    int64_t wrong = 0;
    for (size_t i = 0; i < every.size(); ++i) {
      const float want = static_cast<float>(std::bit_cast<ember::f16>(every[i]));
      wrong += std::isnan(want) ? !std::isnan(widened[i]) : std::bit_cast<uint32_t>(widened[i]) != std::bit_cast<uint32_t>(want);
    }
    CHECK_MESSAGE(wrong == 0, std::string(ember::cpu::simd::isa_name(isa)), ": ", wrong, " halves widened differently");
    std::vector<uint16_t> narrowed(floats.size());
    k.f32_to_f16(floats.data(), narrowed.data(), static_cast<int64_t>(floats.size()));
    wrong = 0;
    for (size_t i = 0; i < floats.size(); ++i) {
      const uint16_t want = std::bit_cast<uint16_t>(ember::convert<ember::f16>(floats[i]));
      const bool both_nan = std::isnan(floats[i]) && (narrowed[i] & 0x7c00) == 0x7c00 && (narrowed[i] & 0x3ff) != 0;
      wrong += !both_nan && narrowed[i] != want;
    }
    CHECK_MESSAGE(wrong == 0, std::string(ember::cpu::simd::isa_name(isa)), ": ", wrong, " of ", floats.size(), " floats narrowed differently");
  }
  // The ops take them: a round trip through a tensor cast.
  const ember::Tensor x = ember::randn({1000, 37});
  CHECK(ember::allclose(x.to(ember::DType::f16).to(ember::DType::f32), x, 1e-3, 1e-4));
}

TEST_CASE("simd math: ops take the kernels, and leave them in deterministic mode") {
  const ember::Tensor x = ember::randn({3, 1000});
  const ember::Tensor strided = x.transpose(0, 1);  // a strided run and a 16-bit one go through f32 blocks
  for (const ember::Tensor& in : {x, strided, x.to(ember::DType::bf16)}) {
    const ember::Tensor y = ember::gelu(in), want = ember::gelu(in.to(ember::DType::f64));
    CHECK(ember::allclose(y.to(ember::DType::f64), want, in.dtype() == ember::DType::bf16 ? 1e-2 : 1e-6, 1e-6));
  }
  // The backward kernels too: silu's gradient of a strided f32 and a bf16 input against f64's.
  for (const ember::Tensor& in : {strided, x.to(ember::DType::bf16)}) {
    const ember::Tensor leaf = in.detach().requires_grad_(true), leaf64 = in.to(ember::DType::f64).requires_grad_(true);
    ember::sum(ember::silu(leaf) * 1.5).backward();
    ember::sum(ember::silu(leaf64) * 1.5).backward();
    const bool bf16 = in.dtype() == ember::DType::bf16;
    CHECK(ember::allclose(leaf.grad().to(ember::DType::f64), leaf64.grad(), bf16 ? 2e-2 : 1e-6, bf16 ? 1e-2 : 1e-6));
  }
  // f16 ops without a vector kernel run their functor on f32 blocks converted by F16C: the same bits
  // as the scalar loop of the deterministic mode (NaN payloads aside).
  const ember::Tensor h = (ember::randn({7, 301}) * 300).to(ember::DType::f16), h2 = ember::randn({7, 301}).to(ember::DType::f16);
  const auto f16_ops = [&] {
    return std::vector<ember::Tensor>{ember::relu(h), ember::add(h, h2), ember::mul(h, h2), ember::clamp(h, -2.0, 3.0),
                                      ember::maximum(h, h2), ember::square(h)};  // square overflows to inf
  };
  const std::vector<ember::Tensor> fast16 = f16_ops();
  ember::set_deterministic(true);
  const std::vector<ember::Tensor> scalar16 = f16_ops();
  ember::set_deterministic(false);
  for (size_t i = 0; i < fast16.size(); ++i) {
    const auto* a = static_cast<const uint16_t*>(fast16[i].raw_data());
    const auto* b = static_cast<const uint16_t*>(scalar16[i].raw_data());
    int64_t differ = 0;
    for (int64_t e = 0; e < fast16[i].numel(); ++e) differ += a[e] != b[e] && !((a[e] & 0x7fff) > 0x7c00 && (b[e] & 0x7fff) > 0x7c00);
    CHECK_MESSAGE(differ == 0, "f16 op ", i, ": ", differ, " elements differ from the scalar loop's");
  }
  // In deterministic mode every CPU gives the same bits: the scalar SLEEF functions, not these.
  ember::set_deterministic(true);
  const ember::Tensor det = ember::exp(x);
  ember::set_deterministic(false);
  const std::vector<float> in = std::vector<float>(x.data<float>(), x.data<float>() + x.numel());
  bool all_equal = true;
  for (size_t i = 0; i < in.size(); ++i)
    all_equal = all_equal && det.data<float>()[i] == ember::math::deterministic::exp(in[i]);
  CHECK(all_equal);
  if (const Kernels* k = ember::cpu::simd::active_kernels()) {
    std::vector<float> vec(in.size());
    k->exp(in.data(), vec.data(), static_cast<int64_t>(in.size()));
    const ember::Tensor fast = ember::exp(x);
    bool same = true;
    for (size_t i = 0; i < in.size(); ++i) same = same && fast.data<float>()[i] == vec[i];
    CHECK_MESSAGE(same, "exp on ", std::string(ember::cpu::simd::isa_name(ember::cpu::simd::active_isa())), " is not the kernel's");
  } else {
    MESSAGE("skipped: no vector kernels on this CPU (or EMBER_CPU_ISA=none)");
  }
}

TEST_CASE("simd math: 16-bit batch norm's passes in f32 blocks agree with the scalar loops") {
  // The vector path converts whole runs to f32 and back; the scalar one converts per element. Both
  // compute in f32 from statistics in double, summed in different orders, so a result may round the
  // other way at most once: within one unit in the last place of the 16-bit type.
  for (const ember::DType d : {ember::DType::f16, ember::DType::bf16}) {
    INFO(ember::dtype_name(d));
    const ember::Tensor x = (ember::randn({4, 3, 5, 7}) * 3 + 1).to(d), gy = ember::randn({4, 3, 5, 7}).to(d);
    const ember::Tensor w = ember::randn({3}), b = ember::randn({3});
    const auto run = [&] {
      const ember::Tensor leaf = x.detach().requires_grad_(true);
      const ember::Tensor y = ember::batch_norm(leaf, {}, {}, w, b, true, 0.1, 1e-5);
      return std::vector<ember::Tensor>{y, ember::autograd::grad({y}, {leaf}, {gy})[0]};
    };
    const std::vector<ember::Tensor> fast = run();
    ember::set_deterministic(true);
    const std::vector<ember::Tensor> scalar = run();
    ember::set_deterministic(false);
    for (size_t i = 0; i < fast.size(); ++i) {
      const auto* a = static_cast<const uint16_t*>(fast[i].raw_data());
      const auto* s = static_cast<const uint16_t*>(scalar[i].raw_data());
      // On a line of 16-bit patterns ordered by value (-0 and +0 together), the distance counts units in the last place.
      const auto ordered = [](uint16_t h) { return h & 0x8000 ? -int(h & 0x7fff) : int(h); };
      int worst = 0;
      for (int64_t e = 0; e < fast[i].numel(); ++e) worst = std::max(worst, std::abs(ordered(a[e]) - ordered(s[e])));
      CHECK_MESSAGE(worst <= 1, (i == 0 ? "y" : "dx"), ": ", worst, " units apart");
    }
  }
}

TEST_CASE("simd math: 2x2 max pooling gives the scalar loop's values and indices") {
  // Small integers make ties common (the first tap must win) and NaNs stand in a few windows (the
  // first NaN wins); odd widths leave a column out; a row slice gives rows a stride longer than W.
  const ember::Tensor ints = ember::randint(-4, 5, {3, 5, 9, 37}, ember::DType::f32);
  const ember::Tensor nan_at = ember::lt(ember::rand({3, 5, 9, 37}), 0.02);
  const ember::Tensor base = ember::masked_fill(ints, nan_at, std::numeric_limits<double>::quiet_NaN());
  for (const ember::DType d : {ember::DType::f32, ember::DType::f16, ember::DType::bf16}) {
    for (const ember::Tensor& x : {base.to(d), ember::slice(base.to(d), 3, 1, 34)}) {
      INFO(ember::dtype_name(d), x.is_contiguous() ? "" : ", a row slice");
      const ember::ValuesIndices fast = ember::max_pool2d_with_indices(x, {2, 2});
      ember::set_deterministic(true);
      const ember::ValuesIndices scalar = ember::max_pool2d_with_indices(x, {2, 2});
      ember::set_deterministic(false);
      CHECK(ember::equal(fast.indices, scalar.indices));
      const ember::Tensor a = fast.values.to(ember::DType::f64), b = scalar.values.to(ember::DType::f64);
      int64_t differ = 0;
      for (int64_t e = 0; e < a.numel(); ++e) {
        const double u = a.data<double>()[e], v = b.data<double>()[e];
        differ += !(u == v || (std::isnan(u) && std::isnan(v)));
      }
      CHECK_MESSAGE(differ == 0, differ, " values differ");
    }
  }
}

}  // TEST_SUITE("cpu")
