// conv2d, conv_transpose2d and pooling: forward against the naive f64 loops of tests/nn_reference.h over
// many configurations (strides, padding, dilation, groups, channels-last, dtypes), gradcheck of every
// backward, argument errors; on CUDA, forward and gradients against the CPU kernels, and cuDNN's
// benchmark mode and algorithm cache.
#include <algorithm>
#include <cmath>
#include <limits>

#include "autograd/gradcheck.h"
#include "nn/conv.h"
#include "nn/layers/conv.h"
#include "nn/primitives/conv.h"
#include "tensor/cuda_settings.h"
#include "nn/pooling.h"
#include "tensor/deterministic.h"
#include "tests/helpers.h"
#include "tests/nn_reference.h"

using namespace ember;
using namespace ember_test;

namespace {

using P2 = std::array<int64_t, 2>;

uint64_t next_seed() {
  static uint64_t s = 100;
  return s++;
}

struct ConvCase {
  Shape x, w;
  P2 stride, padding, dilation;
  int64_t groups;
  bool bias;
};

const std::vector<ConvCase> kConvCases = {
    {{1, 3, 7, 7}, {4, 3, 3, 3}, {1, 1}, {0, 0}, {1, 1}, 1, false},
    {{3, 3, 8, 6}, {5, 3, 3, 2}, {2, 1}, {1, 0}, {1, 1}, 1, true},
    {{2, 4, 9, 9}, {6, 2, 3, 3}, {1, 2}, {2, 1}, {2, 1}, 2, true},     // groups, dilation
    {{3, 6, 5, 7}, {6, 1, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 6, false},    // depthwise
    {{1, 4, 6, 5}, {8, 1, 2, 3}, {2, 2}, {1, 1}, {2, 2}, 4, true},     // depthwise multiplier 2
    {{3, 8, 5, 5}, {4, 8, 1, 1}, {1, 1}, {0, 0}, {1, 1}, 1, true},     // 1x1
    {{2, 3, 11, 4}, {2, 3, 5, 1}, {3, 1}, {2, 0}, {1, 1}, 1, false},   // non-square kernel
    {{3, 16, 12, 12}, {32, 16, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 1, true},  // large enough for BLAS threading
};

// conv_transpose2d cases: w is (C_in, C_out/groups, kh, kw).
struct TransposedCase {
  Shape x, w;
  P2 stride, padding, output_padding, dilation;
  int64_t groups;
  bool bias;
};

const std::vector<TransposedCase> kTransposedCases = {
    {{2, 3, 4, 5}, {3, 2, 3, 3}, {1, 1}, {0, 0}, {0, 0}, {1, 1}, 1, true},
    {{1, 4, 5, 3}, {4, 3, 3, 2}, {2, 3}, {1, 0}, {1, 2}, {1, 1}, 2, true},   // groups, output_padding
    {{2, 2, 3, 4}, {2, 2, 3, 3}, {1, 1}, {1, 1}, {1, 1}, {2, 2}, 1, false},  // output_padding >= stride (dilation 2)
    {{1, 6, 3, 3}, {6, 1, 4, 4}, {2, 2}, {1, 1}, {0, 0}, {1, 1}, 6, true},   // depthwise, the usual 2x upsampler
    {{3, 8, 2, 2}, {8, 16, 2, 2}, {2, 2}, {0, 0}, {0, 0}, {1, 1}, 1, true},  // large enough for BLAS threading
};

std::string describe(const TransposedCase& c) {
  return "x " + to_string(c.x) + " w " + to_string(c.w) + " stride " + std::to_string(c.stride[0]) + "," +
         std::to_string(c.stride[1]) + " groups " + std::to_string(c.groups);
}

std::string describe(const ConvCase& c) {
  return "x " + to_string(c.x) + " w " + to_string(c.w) + " groups " + std::to_string(c.groups);
}

// x with NHWC memory and NCHW shape.
// Whether t's elements lie in NHWC order (is_channels_last, but also true for a tensor that is both).
bool laid_out_nhwc(const Tensor& t) {
  int64_t expected = 1;
  for (int d : {1, 3, 2, 0}) {
    if (t.size(d) != 1 && t.stride(d) != expected) return false;
    expected *= t.size(d);
  }
  return true;
}

}  // namespace

TEST_CASE("conv2d forward matches the naive loop" * doctest::test_suite("cpu")) {
  for (const ConvCase& c : kConvCases)
    for (DType dt : {DType::f64, DType::f32, DType::bf16, DType::f16})
      for (bool channels_last : {false, true}) {
        INFO(describe(c), " ", name(dt), channels_last ? " channels-last" : "");
        const Host xh{c.x, random_values(numel(c.x), DType::f64, -1, 1, false, next_seed())};
        const Host wh{c.w, random_values(numel(c.w), DType::f64, -1, 1, false, next_seed())};
        const std::vector<double> bv = random_values(c.w[0], DType::f64, -1, 1, false, next_seed());
        Tensor x = make_tensor(xh.v, c.x, dt), w = make_tensor(wh.v, c.w, dt), b = make_tensor(bv, {c.w[0]}, dt);
        // The reference uses the values as rounded to dt.
        const Host xr = to_host(x), wr = to_host(w);
        const std::vector<double> br = values(b);
        if (channels_last) x = to_channels_last(x);
        const Tensor y = conv2d(x, w, c.bias ? b : Tensor(), c.stride, c.padding, c.dilation, c.groups);
        const int64_t fan_in = c.w[1] * c.w[2] * c.w[3];
        Tol tol = tolerance(dt);
        tol.atol *= fan_in;
        check_values(y, ref::conv2d(xr, wr, c.bias ? &br : nullptr, c.stride, c.padding, c.dilation, c.groups), tol,
                     "conv2d");
        if (channels_last && c.x[1] > 1 && c.w[0] > 1) CHECK(is_channels_last(y));
        if (!channels_last) CHECK(y.is_contiguous());
      }
}

TEST_CASE("conv2d channels-last gradients equal the NCHW ones" * doctest::test_suite("cpu")) {
  const Tensor x0 = uniform_f64({2, 4, 6, 6}, -1, 1, next_seed(), false);
  const Tensor w0 = uniform_f64({6, 2, 3, 3}, -1, 1, next_seed(), false);
  Tensor xa = clone(x0).requires_grad_(true), wa = clone(w0).requires_grad_(true);
  Tensor xb = to_channels_last(x0).detach().requires_grad_(true), wb = clone(w0).requires_grad_(true);
  CHECK(is_channels_last(xb));
  const Tensor ga = uniform_f64({2, 6, 3, 3}, -1, 1, next_seed(), false);
  conv2d(xa, wa, {}, {2, 2}, {1, 1}, {1, 1}, 2).backward(ga);
  conv2d(xb, wb, {}, {2, 2}, {1, 1}, {1, 1}, 2).backward(ga);
  CHECK(allclose(xa.grad(), xb.grad(), 1e-12, 1e-12));
  CHECK(allclose(wa.grad(), wb.grad(), 1e-12, 1e-12));
  CHECK(is_channels_last(xb.grad()));
}

TEST_CASE("conv2d gradcheck" * doctest::test_suite("cpu")) {
  struct G {
    Shape x, w;
    P2 s, p, d;
    int64_t groups;
    bool bias, channels_last;
  };
  const std::vector<G> cases = {
      {{2, 2, 5, 4}, {3, 2, 3, 2}, {1, 1}, {0, 0}, {1, 1}, 1, true, false},
      {{1, 4, 6, 6}, {4, 2, 2, 2}, {2, 1}, {1, 1}, {2, 2}, 2, true, false},
      {{2, 3, 5, 5}, {3, 1, 3, 3}, {1, 2}, {1, 1}, {1, 1}, 3, false, true},  // depthwise, channels-last
  };
  for (const G& c : cases) {
    INFO("x ", to_string(c.x), " w ", to_string(c.w));
    Tensor x = uniform_f64(c.x, -1, 1, next_seed(), false);
    if (c.channels_last) x = to_channels_last(x);
    x.requires_grad_(true);
    const Tensor w = uniform_f64(c.w, -1, 1, next_seed()), b = uniform_f64({c.w[0]}, -1, 1, next_seed());
    auto fn = [&](const std::vector<Tensor>& in) {
      return conv2d(in[0], in[1], c.bias ? in[2] : Tensor(), c.s, c.p, c.d, c.groups);
    };
    try {
      CHECK(gradcheck(fn, {x, w, b}).entries > 0);
    } catch (const std::exception& e) {
      FAIL_CHECK(std::string(e.what()));
    }
  }
}

TEST_CASE("conv2d double backward (gradgradcheck)" * doctest::test_suite("cpu")) {
  const Tensor x = uniform_f64({1, 2, 4, 4}, -1, 1, next_seed()), w = uniform_f64({2, 1, 2, 2}, -1, 1, next_seed());
  auto fn = [](const std::vector<Tensor>& in) { return conv2d(in[0], in[1], {}, {1, 1}, {1, 1}, {1, 1}, 2); };
  try {
    CHECK(gradgradcheck(fn, {x, w}).entries > 0);
  } catch (const std::exception& e) {
    FAIL_CHECK(std::string(e.what()));
  }
}

// ---- oneDNN (cpu/conv_dnnl.cpp) against ember's own kernel, which the tests above check; skipped in a
// build without oneDNN.

namespace {

// Chooses the CPU conv kernel for a scope: oneDNN (on) or ember's own.
struct DnnlChoice {
  explicit DnnlChoice(bool on) { set_cpu_conv_dnnl(on); }
  ~DnnlChoice() { set_cpu_conv_dnnl(true); }
};

struct ConvPasses {
  Tensor y, gx, gw;
};

// Forward, backward-input and backward-weight of one geometry, through the primitives as nn/conv.cpp runs them.
ConvPasses conv_passes(const Tensor& x, const Tensor& w, const Tensor& gy, const Conv2dParams& p, bool channels_last) {
  return {run1(Conv2d{p, channels_last}, {x, w}), run1(Conv2dBackwardInput{p, x.shape(), channels_last}, {gy, w}),
          run1(Conv2dBackwardWeight{p, w.shape()}, {gy, x})};
}

// max |got - want| / max |want|: GEMM-like sums are compared normwise, not element by element.
double relative_error(const Tensor& got, const Tensor& want) {
  const std::vector<double> g = values(got), r = values(want);
  REQUIRE(g.size() == r.size());
  double err = 0, scale = 0;
  for (size_t i = 0; i < g.size(); ++i) {
    err = std::max(err, std::fabs(g[i] - r[i]));
    scale = std::max(scale, std::fabs(r[i]));
  }
  return err / scale;
}

// Geometries beyond kConvCases (the forward test above runs those on oneDNN too, caching their
// primitives): ResNet's, odd sizes, batch 1.
const std::vector<ConvCase> kDnnlCases = {
    {{1, 3, 9, 9}, {4, 3, 3, 3}, {1, 1}, {0, 0}, {1, 1}, 1, false},          // batch 1, no padding
    {{2, 4, 9, 11}, {6, 2, 3, 3}, {1, 2}, {2, 1}, {2, 1}, 2, false},         // groups, dilation
    {{3, 6, 5, 7}, {12, 1, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 6, false},         // depthwise multiplier 2
    {{2, 16, 13, 11}, {32, 16, 3, 3}, {2, 2}, {1, 1}, {1, 1}, 1, false},     // stride 2, odd sizes
    {{2, 32, 8, 8}, {64, 32, 1, 1}, {1, 1}, {0, 0}, {1, 1}, 1, false},       // 1x1
    {{2, 64, 8, 8}, {128, 64, 1, 1}, {2, 2}, {0, 0}, {1, 1}, 1, false},      // 1x1 stride 2: negative right padding
    {{1, 3, 32, 30}, {16, 3, 7, 7}, {2, 2}, {3, 3}, {1, 1}, 1, false},       // ResNet's 7x7 stem
    {{2, 3, 11, 5}, {2, 3, 5, 2}, {3, 1}, {2, 0}, {1, 1}, 1, false},         // non-square kernel
    {{2, 64, 14, 14}, {64, 64, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 1, false},     // ResNet's 3x3
};

// (x, w, gy) of case c in dtype dt, channels-last (x, w and gy) or NCHW.
std::array<Tensor, 3> conv_operands(const ConvCase& c, DType dt, bool channels_last) {
  const Conv2dParams p{c.stride, c.padding, c.dilation, c.groups};
  const Shape y = Conv2d{p, false}.infer({empty(c.x, dt), empty(c.w, dt)})[0].shape;
  std::array<Tensor, 3> t{make_tensor(random_values(numel(c.x), DType::f64, -1, 1, false, next_seed()), c.x, dt),
                          make_tensor(random_values(numel(c.w), DType::f64, -1, 1, false, next_seed()), c.w, dt),
                          make_tensor(random_values(numel(y), DType::f64, -1, 1, false, next_seed()), y, dt)};
  if (channels_last)
    for (Tensor& v : t) v = to_channels_last(v);
  return t;
}

}  // namespace

// Runs kDnnlCases in both layouts through oneDNN in dtype dt and checks each pass against
// reference(x, w, gy, p, channels_last) within bound (relative_error); returns the largest error met.
template <class Reference>
double check_dnnl_passes(DType dt, double bound, Reference reference) {
  double worst = 0;
  for (const ConvCase& c : kDnnlCases)
    for (bool channels_last : {false, true}) {
      INFO(describe(c), std::string(channels_last ? " channels-last" : ""));
      const Conv2dParams p{c.stride, c.padding, c.dilation, c.groups};
      const auto [x, w, gy] = conv_operands(c, dt, channels_last);
      const size_t cached = cpu_conv_dnnl_cache_size();
      const ConvPasses got = conv_passes(x, w, gy, p, channels_last);
      // oneDNN ran all three, except channels-last with few channels, where its layouts would pad
      // the channels to a block (16) and ember's kernel runs the passes it declines.
      const bool few_channels = std::min(c.x[1], c.w[0]) / c.groups < 8;
      if (!(channels_last && few_channels)) CHECK(cpu_conv_dnnl_cache_size() == cached + 3);
      const ConvPasses want = reference(x, w, gy, p, channels_last);
      CHECK(got.y.strides() == want.y.strides());
      CHECK(got.gx.strides() == want.gx.strides());
      const std::pair<Tensor, Tensor> results[] = {{got.y, want.y}, {got.gx, want.gx}, {got.gw, want.gw}};
      for (const auto& [a, b] : results) {
        CHECK(a.dtype() == dt);
        const double err = relative_error(a, b);
        worst = std::max(worst, err);
        CHECK(err < bound);
      }
    }
  return worst;
}

TEST_CASE("oneDNN conv2d passes match ember's kernel" * doctest::test_suite("cpu") * doctest::skip(!cpu_conv_dnnl())) {
  // Measured: at most 8.2e-7 (f32 sums in another order); 1e-5 leaves room for other CPUs' kernels.
  const double worst = check_dnnl_passes(DType::f32, 1e-5, [](const Tensor& x, const Tensor& w, const Tensor& gy,
                                                              const Conv2dParams& p, bool channels_last) {
    const DnnlChoice ember(false);
    return conv_passes(x, w, gy, p, channels_last);
  });
  MESSAGE("oneDNN vs ember f32: max relative error ", worst);
}

TEST_CASE("oneDNN bf16 conv2d passes match f32 on the same values" * doctest::test_suite("cpu") *
          doctest::skip(!cpu_conv_dnnl() || !__builtin_cpu_supports("avx512bf16"))) {
  // Measured: at most 3.5e-3, the rounding of the bf16 results (2^-8 relative) and f32 sums in another order.
  const double worst = check_dnnl_passes(DType::bf16, 8e-3, [](const Tensor& x, const Tensor& w, const Tensor& gy,
                                                               const Conv2dParams& p, bool channels_last) {
    return conv_passes(to(x, DType::f32), to(w, DType::f32), to(gy, DType::f32), p, channels_last);
  });
  MESSAGE("oneDNN bf16 vs f32: max relative error ", worst);
}

TEST_CASE("the deterministic mode runs ember's conv kernel, not oneDNN" * doctest::test_suite("cpu") *
          doctest::skip(!cpu_conv_dnnl())) {
  const ConvCase c{{2, 8, 10, 10}, {8, 8, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 1, false};
  const Conv2dParams p{c.stride, c.padding, c.dilation, c.groups};
  const auto [x, w, gy] = conv_operands(c, DType::f32, false);
  const size_t cached = cpu_conv_dnnl_cache_size();
  set_deterministic(true);
  const ConvPasses got = conv_passes(x, w, gy, p, false);
  ConvPasses want;
  {
    const DnnlChoice ember(false);
    want = conv_passes(x, w, gy, p, false);
  }
  set_deterministic(false);
  CHECK(cpu_conv_dnnl_cache_size() == cached);
  CHECK(equal(got.y, want.y));
  CHECK(equal(got.gx, want.gx));
  CHECK(equal(got.gw, want.gw));
}

namespace {

// Distinct values (no ties), shuffled.
Tensor distinct_values(const Shape& s, DType dt = DType::f64) {
  std::vector<double> v(static_cast<size_t>(numel(s)));
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<double>((i * 37) % v.size()) * 0.125 - 3;
  return make_tensor(v, s, dt);
}

struct PoolCase {
  Shape x;
  P2 k, s, p, d;
  bool ceil_mode;
};
const std::vector<PoolCase> kPoolCases = {
    {{2, 3, 8, 8}, {2, 2}, {2, 2}, {0, 0}, {1, 1}, false},
    {{1, 2, 7, 9}, {3, 3}, {2, 2}, {1, 1}, {1, 1}, false},
    {{1, 2, 7, 9}, {3, 2}, {2, 3}, {1, 1}, {1, 1}, true},
    {{3, 1, 10, 6}, {3, 3}, {1, 2}, {1, 0}, {2, 1}, false},
    {{1, 1, 5, 5}, {2, 2}, {2, 2}, {1, 1}, {1, 1}, true},
};

}  // namespace

TEST_CASE("max_pool2d matches the naive loop" * doctest::test_suite("cpu")) {
  for (const PoolCase& c : kPoolCases)
    for (DType dt : {DType::f64, DType::f32, DType::bf16})
      for (bool channels_last : {false, true}) {
        INFO("x ", to_string(c.x), " k ", c.k[0], "x", c.k[1], " ", name(dt));
        Tensor x = distinct_values(c.x, dt);
        const ref::Pool r = ref::pool2d(to_host(x), c.k, c.s, c.p, c.d, c.ceil_mode, true, true);
        if (channels_last) x = to_channels_last(x);
        const ValuesIndices y = max_pool2d_with_indices(x, c.k, c.s, c.p, c.d, c.ceil_mode);
        check_values(y.values, r.values, tolerance(dt), "values");
        if (channels_last) CHECK(laid_out_nhwc(y.values));
        CHECK(y.indices.dtype() == DType::i64);
        CHECK(values(y.indices) == r.indices);
      }
  // stride defaults to the kernel
  const Tensor x = distinct_values({1, 1, 4, 4});
  CHECK(max_pool2d(x, {2, 2}).shape() == Shape{1, 1, 2, 2});
}

TEST_CASE("avg_pool2d matches the naive loop" * doctest::test_suite("cpu")) {
  for (const PoolCase& c : kPoolCases) {
    if (c.d[0] != 1 || c.d[1] != 1) continue;
    for (DType dt : {DType::f64, DType::f32, DType::bf16})
      for (bool include : {true, false}) {
        INFO("x ", to_string(c.x), " k ", c.k[0], "x", c.k[1], " ", name(dt), " count_include_pad ", include);
        const Tensor x = make_tensor(random_values(numel(c.x), DType::f64, -1, 1, false, next_seed()), c.x, dt);
        const ref::Pool r = ref::pool2d(to_host(x), c.k, c.s, c.p, {1, 1}, c.ceil_mode, false, include);
        check_values(avg_pool2d(to_channels_last(x), c.k, c.s, c.p, c.ceil_mode, include), r.values, tolerance(dt), "avg");
        check_values(avg_pool2d(x, c.k, c.s, c.p, c.ceil_mode, include), r.values, tolerance(dt), "avg");
      }
  }
}

TEST_CASE("adaptive_avg_pool2d uses PyTorch's windows" * doctest::test_suite("cpu")) {
  for (const auto& [xs, os] : std::vector<std::pair<Shape, P2>>{{{2, 3, 7, 5}, {3, 2}}, {{1, 2, 4, 4}, {1, 1}},
                                                                  {{1, 1, 5, 3}, {7, 4}}, {{2, 2, 8, 8}, {4, 4}}}) {
    INFO("x ", to_string(xs), " out ", os[0], "x", os[1]);
    const Host x{xs, random_values(numel(xs), DType::f64, -1, 1, false, next_seed())};
    const Host want = ref::adaptive_avg_pool2d(x, os);
    check_values(adaptive_avg_pool2d(from_vector(x.v, xs), os), want, tolerance(DType::f64), "adaptive");
  }
}

TEST_CASE("pooling keeps a channels-last input's layout, in its output and its gradient" * doctest::test_suite("cpu")) {
  const Tensor x = to_channels_last(distinct_values({2, 3, 6, 5})).detach().requires_grad_(true);
  const std::vector<std::pair<const char*, Tensor>> outputs = {
      {"max_pool2d", max_pool2d(x, {2, 2})},
      {"avg_pool2d", avg_pool2d(x, {3, 3}, P2{2, 2}, {1, 1})},
      {"adaptive_avg_pool2d", adaptive_avg_pool2d(x, {2, 2})},
  };
  for (const auto& [what, y] : outputs) {
    CAPTURE(what);
    CHECK(is_channels_last(y));
    const Tensor gx = autograd::grad({y}, {x}, {ones_like(y)})[0];
    CHECK(is_channels_last(gx));
  }
}

TEST_CASE("pooling gradcheck" * doctest::test_suite("cpu")) {
  auto check = [](const std::string& what, const std::function<Tensor(const std::vector<Tensor>&)>& fn, const Tensor& x) {
    INFO(what);
    try {
      CHECK(gradcheck(fn, {x}).entries > 0);
      CHECK(gradgradcheck(fn, {x}).entries > 0);
    } catch (const std::exception& e) {
      FAIL_CHECK(std::string(e.what()));
    }
  };
  const Tensor xm = distinct_values({2, 2, 5, 6}).requires_grad_(true);
  check("max_pool2d", [](const std::vector<Tensor>& in) { return max_pool2d(in[0], {3, 2}, P2{2, 2}, {1, 1}, {1, 1}, true); }, xm);
  check("max_pool2d dilated", [](const std::vector<Tensor>& in) { return max_pool2d(in[0], {2, 2}, P2{1, 2}, {1, 0}, {2, 2}); }, xm);
  const Tensor xa = uniform_f64({2, 2, 5, 6}, -1, 1, next_seed());
  check("avg_pool2d", [](const std::vector<Tensor>& in) { return avg_pool2d(in[0], {3, 3}, P2{2, 2}, {1, 1}, true, false); }, xa);
  check("avg_pool2d pad", [](const std::vector<Tensor>& in) { return avg_pool2d(in[0], {2, 3}, P2{1, 2}, {1, 1}); }, xa);
  check("adaptive_avg_pool2d", [](const std::vector<Tensor>& in) { return adaptive_avg_pool2d(in[0], {3, 4}); }, xa);
}

TEST_CASE("conv2d and pooling argument errors" * doctest::test_suite("cpu")) {
  const Tensor x = zeros({8, 3, 32, 32}), w = zeros({16, 4, 3, 3});
  CHECK_THROWS_WITH_AS(conv2d(x, w), "conv2d: input (8, 3, 32, 32) and weight (16, 4, 3, 3) disagree on channels (3 vs 4*1)",
                       ShapeError);
  CHECK_THROWS_WITH_AS(conv2d(zeros({8, 4, 32, 32}), zeros({6, 2, 3, 3}), {}, {1, 1}, {0, 0}, {1, 1}, 4),
                       "conv2d: input (8, 4, 32, 32) and weight (6, 2, 3, 3) disagree on channels (4 vs 2*4)", ShapeError);
  CHECK_THROWS_AS(conv2d(zeros({3, 32, 32}), w), ShapeError);
  CHECK_THROWS_AS(conv2d(zeros({1, 4, 2, 2}), w), ShapeError);  // kernel larger than the input
  CHECK_THROWS_AS(conv2d(zeros({1, 4, 5, 5}), w, zeros({15})), ShapeError);
  CHECK_THROWS_AS(conv2d(zeros({1, 4, 5, 5}), w.to(DType::f64)), DTypeError);
  CHECK_THROWS_AS(conv2d(zeros({1, 4, 5, 5}), w, {}, {0, 1}), ValueError);
  CHECK_THROWS_AS(max_pool2d(x, {2, 2}, {}, {2, 2}), ValueError);  // padding above kernel / 2
  CHECK_THROWS_AS(max_pool2d(zeros({32, 32}), {2, 2}), ShapeError);
  CHECK_THROWS_AS(avg_pool2d(zeros({1, 1, 2, 2}), {3, 3}), ShapeError);
  CHECK_THROWS_AS(adaptive_avg_pool2d(x, {0, 2}), ValueError);
}

// ---- conv_transpose2d: conv2d's input gradient as an op of its own

TEST_CASE("conv_transpose2d forward matches the naive loop" * doctest::test_suite("cpu")) {
  for (const TransposedCase& c : kTransposedCases)
    for (DType dt : {DType::f64, DType::f32, DType::bf16})
      for (bool channels_last : {false, true}) {
        INFO(describe(c), " ", name(dt), channels_last ? " channels-last" : "");
        const int64_t out_channels = c.w[1] * c.groups;
        Tensor x = make_tensor(random_values(numel(c.x), DType::f64, -1, 1, false, next_seed()), c.x, dt);
        const Tensor w = make_tensor(random_values(numel(c.w), DType::f64, -1, 1, false, next_seed()), c.w, dt);
        const Tensor b = make_tensor(random_values(out_channels, DType::f64, -1, 1, false, next_seed()), {out_channels}, dt);
        const Host xr = to_host(x), wr = to_host(w);
        const std::vector<double> br = values(b);
        if (channels_last) x = to_channels_last(x);
        const Tensor y = conv_transpose2d(x, w, c.bias ? b : Tensor(), c.stride, c.padding, c.output_padding, c.groups,
                                          c.dilation);
        Tol tol = tolerance(dt);
        tol.atol *= static_cast<double>(c.x[1] * c.w[2] * c.w[3]);  // at most this many products per output
        check_values(y, ref::conv_transpose2d(xr, wr, c.bias ? &br : nullptr, c.stride, c.padding, c.output_padding,
                                              c.dilation, c.groups),
                     tol, "conv_transpose2d");
        if (channels_last && out_channels > 1) CHECK(is_channels_last(y));
      }
}

TEST_CASE("conv_transpose2d gradcheck and double backward" * doctest::test_suite("cpu")) {
  for (const TransposedCase& c : {kTransposedCases[1], kTransposedCases[2], kTransposedCases[3]}) {
    INFO(describe(c));
    const Tensor x = uniform_f64(c.x, -1, 1, next_seed()), w = uniform_f64(c.w, -1, 1, next_seed());
    const Tensor b = uniform_f64({c.w[1] * c.groups}, -1, 1, next_seed());
    auto fn = [&](const std::vector<Tensor>& in) {
      return conv_transpose2d(in[0], in[1], in.size() > 2 ? in[2] : Tensor(), c.stride, c.padding, c.output_padding,
                              c.groups, c.dilation);
    };
    try {
      CHECK(gradcheck(fn, {x, w, b}).entries > 0);
      CHECK(gradgradcheck(fn, {x, w}).entries > 0);
    } catch (const std::exception& e) {
      FAIL_CHECK(std::string(e.what()));
    }
  }
}

TEST_CASE("conv_transpose2d undoes conv2d's shape" * doctest::test_suite("cpu")) {
  // A stride-2 conv maps 7x8 and 8x7 inputs to the same 4x4; output_padding chooses which comes back.
  const Tensor w = ones({3, 2, 3, 3});
  for (const P2 size : {P2{7, 8}, P2{8, 7}}) {
    const Tensor y = conv2d(zeros({1, 2, size[0], size[1]}), w, {}, {2, 2}, {1, 1});
    CHECK(y.shape() == Shape{1, 3, 4, 4});
    const P2 output_padding{size[0] - 7, size[1] - 7};
    CHECK(conv_transpose2d(y, w, {}, {2, 2}, {1, 1}, output_padding).shape() == Shape{1, 2, size[0], size[1]});
  }
}

TEST_CASE("conv_transpose2d argument errors name the values" * doctest::test_suite("cpu")) {
  const Tensor x = zeros({1, 2, 3, 3}), w = zeros({2, 4, 2, 2});
  CHECK_THROWS_WITH_AS(conv_transpose2d(x, zeros({3, 4, 2, 2})),
                       "conv_transpose2d: input (1, 2, 3, 3) has 2 channels but weight (3, 4, 2, 2) takes 3", ShapeError);
  CHECK_THROWS_WITH_AS(conv_transpose2d(x, w, {}, {1, 1}, {0, 0}, {1, 0}),
                       "conv_transpose2d: output_padding (1, 0) must be non-negative and smaller than either stride "
                       "(1, 1) or dilation (1, 1)",
                       ValueError);
  CHECK_THROWS_WITH_AS(conv_transpose2d(x, w, {}, {1, 1}, {3, 3}),
                       "conv_transpose2d: input (1, 2, 3, 3), weight (2, 4, 2, 2), stride (1, 1), padding (3, 3) and "
                       "dilation (1, 1) give no output (or one too large to count)",
                       ShapeError);
  CHECK_THROWS_WITH_AS(conv_transpose2d(x, w, {}, {1, 1}, {0, 0}, {0, 0}, 4),
                       "conv_transpose2d: the input channels 2 of weight (2, 4, 2, 2) are not divisible by groups 4",
                       ShapeError);
  CHECK_THROWS_WITH_AS(conv_transpose2d(x, w, zeros({3})),
                       "conv_transpose2d: bias (3,) must have shape (4,) for weight (2, 4, 2, 2)", ShapeError);
  CHECK_THROWS_AS(conv_transpose2d(x, w, {}, {0, 1}), ValueError);
  CHECK_THROWS_AS(conv_transpose2d(x, w, {}, {int64_t{1} << 40, 1}), ValueError);
  CHECK_THROWS_AS(conv_transpose2d(zeros({2, 3, 3}), w), ShapeError);
  CHECK_THROWS_AS(conv_transpose2d(x, w.to(DType::f64)), DTypeError);
  CHECK_THROWS_AS(conv_transpose2d(x.to(DType::i64), w.to(DType::i64)), DTypeError);
  // An output beyond int64 is refused before anything is computed.
  CHECK_THROWS_AS(conv_transpose2d(zeros({0, 2, int64_t{1} << 40, 1}), w, {}, {(int64_t{1} << 31) - 1, 1}), ShapeError);
}

TEST_CASE("nn::ConvTranspose2d: PyTorch's weight layout, init and repr, the functional op's forward" *
          doctest::test_suite("cpu")) {
  nn::ConvTranspose2d layer(4, 6, 3, 2, 1, 1, 2);
  CHECK(layer.weight.shape() == Shape{4, 3, 3, 3});
  CHECK(layer.bias.shape() == Shape{6});
  // kaiming_uniform_(a = sqrt(5)) and the bias bound are both 1 / sqrt(fan_in), fan_in = 3 * 3 * 3.
  const double bound = 1.0 / std::sqrt(27.0);
  CHECK(max(abs(layer.weight)).item<double>() <= bound);
  CHECK(max(abs(layer.weight)).item<double>() > 0.8 * bound);  // 108 draws reach near the bound
  CHECK(max(abs(layer.bias)).item<double>() <= bound);
  CHECK(layer.extra_repr() == "4, 6, kernel_size=(3, 3), stride=(2, 2), padding=(1, 1), output_padding=(1, 1), groups=2");
  const Tensor x = uniform_f64({2, 4, 5, 5}, -1, 1, next_seed(), false).to(DType::f32);
  const Tensor y = layer(x);
  CHECK(y.shape() == Shape{2, 6, 10, 10});
  CHECK(allclose(y, conv_transpose2d(x, layer.weight, layer.bias, {2, 2}, {1, 1}, {1, 1}, 2), 0, 0));
  CHECK_THROWS_AS(nn::ConvTranspose2d(4, 6, 3, 1, 0, 1), ValueError);  // output_padding not below stride
  CHECK_THROWS_AS(nn::ConvTranspose2d(4, 6, 3, 1, 0, 0, 4), ValueError);  // groups does not divide 6
}

// ---- cuDNN's switches (every build) and the CUDA kernels against the CPU ones

namespace {

const Device kCuda{DeviceType::cuda, 0};

// Puts the cuDNN switches back as they were at scope exit.
struct CudnnSettingsGuard {
  bool benchmark = cuda::benchmark(), tf32 = cuda::conv_allow_tf32();
  ~CudnnSettingsGuard() {
    cuda::set_benchmark(benchmark);
    cuda::set_conv_allow_tf32(tf32);
  }
};

// x as a fresh leaf requiring grad on `device`, channels-last if asked.
Tensor leaf_on(const Tensor& x, Device device, bool channels_last = false) {
  Tensor t = x.to(device);
  if (channels_last) t = to_channels_last(t);
  return t.detach().requires_grad_(true);
}

// conv2d of c on `device` from inputs {x, w, b, gy}, then backward with gy: {y, x.grad, w.grad, b.grad}.
std::vector<Tensor> conv_and_grads(const ConvCase& c, const std::vector<Tensor>& in, bool channels_last, Device device) {
  const Tensor x = leaf_on(in[0], device, channels_last), w = leaf_on(in[1], device), b = leaf_on(in[2], device);
  const Tensor y = conv2d(x, w, c.bias ? b : Tensor(), c.stride, c.padding, c.dilation, c.groups);
  y.backward(in[3].to(device));
  return {y, x.grad(), w.grad(), c.bias ? b.grad() : Tensor()};
}

}  // namespace

TEST_CASE("cuDNN settings are process-wide switches, off by default" * doctest::test_suite("cpu")) {
  const CudnnSettingsGuard restore;
  CHECK_FALSE(cuda::benchmark());
  CHECK_FALSE(cuda::conv_allow_tf32());
  cuda::set_benchmark(true);
  cuda::set_conv_allow_tf32(true);
  CHECK(cuda::benchmark());
  CHECK(cuda::conv_allow_tf32());
  cuda::clear_conv_algorithm_cache();
  conv2d(ones({1, 2, 4, 4}), ones({2, 2, 3, 3}));
  CHECK(cuda::conv_algorithm_cache_size() == 0);  // the CPU kernels choose no algorithm
}

EMBER_CUDA_TEST_CASE("cuda conv2d: forward and gradients match the CPU kernels") {
  for (const ConvCase& c : kConvCases)
    for (DType dt : kFloats)
      for (bool channels_last : {false, true}) {
        INFO(describe(c), " ", name(dt), channels_last ? " channels-last" : "");
        Shape y_shape{c.x[0], c.w[0], 0, 0};
        for (int i = 0; i < 2; ++i)
          y_shape[2 + i] = (c.x[2 + i] + 2 * c.padding[i] - c.dilation[i] * (c.w[2 + i] - 1) - 1) / c.stride[i] + 1;
        std::vector<Tensor> in;
        for (const Shape& s : {c.x, c.w, Shape{c.w[0]}, y_shape})
          in.push_back(make_tensor(random_values(numel(s), DType::f64, -1, 1, false, next_seed()), s, dt));
        const std::vector<Tensor> want = conv_and_grads(c, in, channels_last, kCPU);
        const std::vector<Tensor> got = conv_and_grads(c, in, channels_last, kCuda);
        // Each result is a sum of at most this many products, in another order on each device.
        const int64_t terms = std::max({c.w[1] * c.w[2] * c.w[3], c.w[0] / c.groups * c.w[2] * c.w[3],
                                        y_shape[0] * y_shape[2] * y_shape[3]});
        Tol tol = tolerance(dt);
        tol.atol *= static_cast<double>(terms);
        const char* what[] = {"y", "x.grad", "w.grad", "b.grad"};
        for (size_t i = 0; i < want.size(); ++i) {
          if (!want[i].defined()) continue;
          CHECK(got[i].device() == kCuda);
          check_values(got[i], to_host(want[i]), tol, what[i]);
        }
        if (channels_last && c.x[1] > 1 && c.w[0] > 1) {
          CHECK(is_channels_last(got[0]));
          CHECK(is_channels_last(got[1]));
        }
      }
}

EMBER_CUDA_TEST_CASE("cuda conv_transpose2d: forward and gradients match the CPU kernels") {
  for (const TransposedCase& c : kTransposedCases)
    for (DType dt : kFloats)
      for (bool channels_last : {false, true}) {
        INFO(describe(c), " ", name(dt), channels_last ? " channels-last" : "");
        const Tensor x0 = make_tensor(random_values(numel(c.x), DType::f64, -1, 1, false, next_seed()), c.x, dt);
        const Tensor w0 = make_tensor(random_values(numel(c.w), DType::f64, -1, 1, false, next_seed()), c.w, dt);
        const auto run = [&](Device device) {
          const Tensor x = leaf_on(x0, device, channels_last), w = leaf_on(w0, device);
          const Tensor y = conv_transpose2d(x, w, {}, c.stride, c.padding, c.output_padding, c.groups, c.dilation);
          sum(mul(y, y)).backward();
          return std::vector<Tensor>{y, x.grad(), w.grad()};
        };
        const std::vector<Tensor> want = run(kCPU), got = run(kCuda);
        Tol tol = tolerance(dt);
        tol.atol *= static_cast<double>(numel(c.x) * c.w[1] * c.w[2] * c.w[3]);  // w.grad sums over every pair
        const char* what[] = {"y", "x.grad", "w.grad"};
        for (size_t i = 0; i < want.size(); ++i) {
          CHECK(got[i].device() == kCuda);
          check_values(got[i], to_host(want[i]), tol, what[i]);
        }
        if (channels_last && c.w[1] * c.groups > 1) CHECK(is_channels_last(got[0]));
      }
}

EMBER_CUDA_TEST_CASE("cuda pooling: forward and gradients match the CPU kernels") {
  for (const PoolCase& c : kPoolCases)
    for (DType dt : kFloats)
      for (bool channels_last : {false, true}) {
        INFO("x ", to_string(c.x), " k ", c.k[0], "x", c.k[1], " ", name(dt), channels_last ? " channels-last" : "");
        const Tensor x0 = distinct_values(c.x, dt);
        // max, average (without dilation) and adaptive pooling of one input, then the gradient of
        // all of them, each with its own values as cotangent.
        auto run = [&](Device device) {
          const Tensor x = leaf_on(x0, device, channels_last);
          const ValuesIndices m = max_pool2d_with_indices(x, c.k, c.s, c.p, c.d, c.ceil_mode);
          std::vector<Tensor> r = {m.values, m.indices, adaptive_avg_pool2d(x, {3, 4})};
          if (c.d == P2{1, 1}) r.push_back(avg_pool2d(x, c.k, c.s, c.p, c.ceil_mode, false));
          std::vector<Tensor> roots, cotangents;
          for (size_t i = 0; i < r.size(); ++i)
            if (i != 1) {
              roots.push_back(r[i]);
              cotangents.push_back(r[i].detach());
            }
          autograd::backward(roots, cotangents);
          r.push_back(x.grad());
          return r;
        };
        const std::vector<Tensor> want = run(kCPU), got = run(kCuda);
        Tol tol = tolerance(dt);
        tol.atol *= static_cast<double>(c.k[0] * c.k[1]);
        for (size_t i = 0; i < want.size(); ++i) {
          CHECK(got[i].device() == kCuda);
          CHECK(got[i].dtype() == want[i].dtype());
          check_values(got[i], to_host(want[i]), i == 1 ? Tol{0, 0} : tol, "output " + std::to_string(i));
        }
      }
}

EMBER_CUDA_TEST_CASE("cuda conv2d: benchmark mode agrees with the heuristics, and every choice is cached") {
  const CudnnSettingsGuard restore;
  auto random = [](const Shape& s) {
    return make_tensor(random_values(numel(s), DType::f64, -1, 1, false, next_seed()), s, DType::f32, kCuda);
  };
  const Tensor x0 = random({4, 8, 16, 16}), w0 = random({16, 8, 3, 3}), gy = random({4, 16, 16, 16});
  // y, x.grad and w.grad: three cuDNN problems (forward, backward data, backward filter).
  auto run = [&] {
    const Tensor x = leaf_on(x0, kCuda), w = leaf_on(w0, kCuda);
    const Tensor y = conv2d(x, w, {}, {1, 1}, {1, 1});
    y.backward(gy);
    return std::vector<Tensor>{y, x.grad(), w.grad()};
  };
  cuda::clear_conv_algorithm_cache();
  cuda::set_conv_allow_tf32(false);
  cuda::set_benchmark(false);
  const std::vector<Tensor> heuristic = run();
  CHECK(cuda::conv_algorithm_cache_size() == 3);
  const std::vector<Tensor> heuristic_again = run();
  CHECK(cuda::conv_algorithm_cache_size() == 3);  // found its three choices in the cache
  cuda::set_benchmark(true);
  const std::vector<Tensor> measured = run();
  CHECK(cuda::conv_algorithm_cache_size() == 6);  // benchmark mode chooses, and caches, apart
  const std::vector<Tensor> measured_again = run();
  CHECK(cuda::conv_algorithm_cache_size() == 6);

  Tol tol = tolerance(DType::f32);
  tol.atol *= 4 * 16 * 16;  // the most products in one sum (w.grad's)
  const char* what[] = {"y", "x.grad", "w.grad"};
  for (size_t i = 0; i < 3; ++i) {
    check_values(heuristic_again[i], to_host(heuristic[i]), tol, std::string("again: ") + what[i]);
    check_values(measured[i], to_host(heuristic[i]), tol, std::string("benchmark: ") + what[i]);
    check_values(measured_again[i], to_host(measured[i]), tol, std::string("benchmark again: ") + what[i]);
  }

  // TF32 is part of the problem too.
  cuda::set_benchmark(false);
  cuda::set_conv_allow_tf32(true);
  const std::vector<Tensor> tf32 = run();
  CHECK(cuda::conv_algorithm_cache_size() == 9);
  check_values(tf32[0], to_host(heuristic[0]), Tol{1e-2, 1e-2}, "TF32: y");
}
