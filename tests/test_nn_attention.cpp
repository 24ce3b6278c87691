// scaled_dot_product_attention: the fused CPU primitive against its composition
// (scaled_dot_product_attention_math, run in f64 as the reference) forward and in all three
// gradients, over shapes that do not fill the kernel's tiles, masks, causal, dropout and dtypes;
// gradcheck and gradgradcheck in f64; the memory the fused path holds; argument errors. The 'cuda'
// suite: the CUDA kernels against the CPU kernel on the same values, in the same situations.
#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>

#include "autograd/gradcheck.h"
#include "nn/attention.h"
#include "nn/primitives/attention.h"
#include "tensor/deterministic.h"
#include "tensor/storage.h"
#include "tests/helpers.h"

using namespace ember;
using namespace ember_test;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

enum class MaskKind { none, boolean, additive, causal };

struct Config {
  std::string name;
  Shape q, k, v;
  MaskKind mask;
  Shape mask_shape;  // for boolean / additive
};

// Attention inputs: values in [-2, 2], a bool mask with about a third of its entries false, or an
// additive mask with values in [-1, 1] and about a tenth -inf.
struct Inputs {
  Tensor q, k, v, mask;
  bool causal = false;
};
Inputs make_inputs(const Config& c, uint64_t seed) {
  Inputs in;
  in.q = from_vector(random_values(numel(c.q), DType::f64, -2, 2, false, seed), c.q);
  in.k = from_vector(random_values(numel(c.k), DType::f64, -2, 2, false, seed + 1), c.k);
  in.v = from_vector(random_values(numel(c.v), DType::f64, -2, 2, false, seed + 2), c.v);
  in.causal = c.mask == MaskKind::causal;
  if (c.mask == MaskKind::boolean || c.mask == MaskKind::additive) {
    std::vector<double> m = random_values(numel(c.mask_shape), DType::f64, 0, 1, false, seed + 3);
    for (double& x : m)
      x = c.mask == MaskKind::boolean ? (x > 0.33 ? 1.0 : 0.0) : (x < 0.1 ? -kInf : 2 * x - 1);
    in.mask = from_vector(m, c.mask_shape);
    if (c.mask == MaskKind::boolean) in.mask = in.mask.to(DType::boolean);
  }
  return in;
}

struct Result {
  Tensor out, dq, dk, dv;
};

// Output and gradients of sum(attention(q, k, v) * r) with q, k, v (and a floating mask) in dtype d
// on `device`, returned on the CPU.
template <class F>
Result run(F attention, const Inputs& x, DType d, const Tensor& r, Device device = kCPU) {
  auto leaf = [d, device](const Tensor& t) { return t.to(d).to(device).detach().requires_grad_(true); };
  const Tensor q = leaf(x.q), k = leaf(x.k), v = leaf(x.v);
  Tensor mask = x.mask.defined() && x.mask.dtype() != DType::boolean ? x.mask.to(d) : x.mask;
  if (mask.defined()) mask = mask.to(device);
  const Tensor out = attention(q, k, v, mask, x.causal);
  sum(out.to(DType::f64) * r.to(device)).backward();
  return {out.detach().to(kCPU), q.grad().to(kCPU), k.grad().to(kCPU), v.grad().to(kCPU)};
}

Tensor fused(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask, bool causal) {
  return scaled_dot_product_attention(q, k, v, mask, 0.0, causal);
}
Tensor composed(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask, bool causal) {
  return scaled_dot_product_attention_math(q, k, v, mask, 0.0, causal).output;
}

// Largest |got - want| / (1 + |want|) over the elements (0 when both are the same NaN pattern).
double max_error(const Tensor& got, const Tensor& want) {
  const std::vector<double> g = values(got), w = values(want);
  REQUIRE(g.size() == w.size());
  double e = 0;
  for (size_t i = 0; i < g.size(); ++i) {
    if (std::isnan(w[i]) && std::isnan(g[i])) continue;
    const double d = std::fabs(g[i] - w[i]) / (1 + std::fabs(w[i]));
    e = std::isnan(d) ? kInf : std::max(e, d);
  }
  return e;
}

// The most memory sum(attention(q, k, v)).backward() takes beyond what was allocated before, with
// L = S = 1024, E = Ev = e: under half of one f32 (L, S) matrix (4 MB) on the fused path, where q, k,
// v, out and their gradients take 1024 e bytes per byte of the dtype each; more than one (L, S) matrix
// of the dtype through the composition, so that the bound can fail.
void check_peak_memory(DType d, int64_t e, Device device) {
  const int64_t n = 1024;
  const TensorOptions opts = TensorOptions(d).with_device(device);
  const Tensor q = randn({1, n, e}, opts).requires_grad_(true), k = randn({1, n, e}, opts).requires_grad_(true),
               v = randn({1, n, e}, opts).requires_grad_(true);
  auto peak_of = [&](auto attention) {
    q.set_grad({});
    k.set_grad({});
    v.set_grad({});
    const size_t before = backend::memory_stats(device).allocated;
    backend::reset_peak_memory_stats(device);
    sum(attention()).backward();
    return backend::memory_stats(device).peak - before;
  };
  const size_t scores = static_cast<size_t>(n * n) * sizeof(float);
  CHECK(peak_of([&] { return scaled_dot_product_attention(q, k, v, {}, 0.0, true); }) < scores / 2);
  CHECK(peak_of([&] { return scaled_dot_product_attention(q, k, v, {}, 0.1); }) < scores / 2);
  CHECK(peak_of([&] { return scaled_dot_product_attention_math(q, k, v).output; }) >
        static_cast<size_t>(n * n) * dtype_size(d));
}

// Shapes that do not fill the 64 x 64 tiles (L != S, E != Ev, odd sizes), batch dims of none, 1, 2
// and broadcast ones, causal with L < S and L > S, bool and additive masks broadcast from smaller shapes.
const std::vector<Config> kConfigs = {
    {"no batch dims", {5, 8}, {7, 8}, {7, 3}, MaskKind::none, {}},
    {"one batch dim of 1, L = S = 65", {1, 65, 16}, {1, 65, 16}, {1, 65, 16}, MaskKind::none, {}},
    {"(2, 3) batch, L 70, S 133, E 24, Ev 40", {2, 3, 70, 24}, {2, 3, 133, 24}, {2, 3, 133, 40}, MaskKind::none, {}},
    {"broadcast batch dims", {2, 1, 9, 8}, {1, 3, 11, 8}, {1, 3, 11, 5}, MaskKind::none, {}},
    {"causal, L 130 > S 70", {2, 130, 16}, {2, 70, 16}, {2, 70, 12}, MaskKind::causal, {}},
    {"causal, L 33 < S 150", {2, 33, 16}, {2, 150, 16}, {2, 150, 12}, MaskKind::causal, {}},
    {"bool mask (L, S)", {2, 2, 67, 16}, {2, 2, 90, 16}, {2, 2, 90, 8}, MaskKind::boolean, {67, 90}},
    {"bool mask (B, 1, L, S)", {2, 2, 20, 16}, {2, 2, 30, 16}, {2, 2, 30, 8}, MaskKind::boolean, {2, 1, 20, 30}},
    {"additive key padding mask (B, 1, 1, S)", {2, 3, 40, 16}, {2, 3, 100, 16}, {2, 3, 100, 8}, MaskKind::additive,
     {2, 1, 1, 100}},
    {"additive mask (L, S)", {3, 70, 16}, {3, 65, 16}, {3, 65, 16}, MaskKind::additive, {70, 65}},
    {"a mask that adds a batch dim", {5, 8}, {7, 8}, {7, 3}, MaskKind::boolean, {2, 5, 7}},
};

// Scores of magnitude ~100 (inputs in [-12, 12], as PyTorch's sample inputs reach): the backward's
// weights must not inherit an error that grows with the scores. Recomputed as e^(s - lse) from one
// f32 logsumexp they did (its rounding is |lse| 2^-24): dv's error was up to 34x the f32
// composition's, which subtracts the row max first. With the row max and sum saved apart, dv's
// measured ratio (fused / composition, each against f64) is at most 1.0 over these configs.
// dq and dk stay up to 2.9x: ds = P (dP - D) with D = rowsum(g * out) from the rounded output (as
// FlashAttention-2's backward), where the composition's rowsum(dP * P) cancels exactly on one-hot
// rows; taking that one would cost a second pass over the keys.
void check_large_scores(Device device) {
  for (size_t i = 0; i < 4; ++i) {
    const Config& c = kConfigs[i];
    INFO(c.name);
    Inputs x = make_inputs(c, 500 + 10 * i);
    for (Tensor* in : {&x.q, &x.k, &x.v}) *in = (*in * 6.0).to(DType::f32).to(DType::f64);
    const Shape out_shape = fused(x.q, x.k, x.v, x.mask, x.causal).shape();
    const Tensor r = from_vector(random_values(numel(out_shape), DType::f64, -1, 1, false, 27 + i), out_shape);
    const Result want = run(composed, x, DType::f64, r);
    const Result got = run(fused, x, DType::f32, r, device), baseline = run(composed, x, DType::f32, r, device);
    for (const auto& [what, g, b, w, ratio] : {std::tuple{std::string("dq"), got.dq, baseline.dq, want.dq, 4.0},
                                               std::tuple{std::string("dk"), got.dk, baseline.dk, want.dk, 4.0},
                                               std::tuple{std::string("dv"), got.dv, baseline.dv, want.dv, 1.5}}) {
      const double fused_error = max_error(g, w), composition_error = max_error(b, w);
      INFO(what, ": fused ", fused_error, ", composition ", composition_error);
      CHECK(fused_error <= ratio * composition_error + 1e-8);
    }
  }
}

}  // namespace

TEST_SUITE("cpu") {

// Largest errors measured against the f64 composition (|got - want| / (1 + |want|)) over these
// configs, inputs rounded to the dtype first: f64 1.0e-15 (forward and gradients); f32 4.4e-7
// forward, 3.7e-7 gradients (the f32 composition: 4.4e-7, 3.6e-7); bf16 1.9e-3 and 3.0e-3, as it
// computes in f32 and rounds once (the bf16 composition rounds the scores and weights too: 1.2e-2,
// 8.4e-3). The tolerances leave about 3x room.
TEST_CASE("scaled_dot_product_attention: fused forward and gradients match the composition") {
  struct Tolerance {
    DType d;
    double forward, gradient;
  };
  for (const Tolerance t : {Tolerance{DType::f64, 3e-15, 3e-15}, Tolerance{DType::f32, 1.5e-6, 1.5e-6},
                            Tolerance{DType::bf16, 6e-3, 1e-2}}) {
    for (size_t i = 0; i < kConfigs.size(); ++i) {
      const Config& c = kConfigs[i];
      INFO(c.name, ", ", name(t.d));
      Inputs x = make_inputs(c, 100 + 10 * i);
      // Inputs rounded to the dtype, so the reference sees what the fused op sees.
      x.q = x.q.to(t.d).to(DType::f64);
      x.k = x.k.to(t.d).to(DType::f64);
      x.v = x.v.to(t.d).to(DType::f64);
      if (x.mask.defined() && x.mask.dtype() != DType::boolean) x.mask = x.mask.to(t.d).to(DType::f64);
      const Tensor q64 = x.q, k64 = x.k, v64 = x.v;
      const Shape out_shape = fused(q64, k64, v64, x.mask, x.causal).shape();
      const Tensor r = from_vector(random_values(numel(out_shape), DType::f64, -1, 1, false, 7 + i), out_shape);
      const Result want = run(composed, x, DType::f64, r);
      const Result got = run(fused, x, t.d, r);
      CHECK(name(got.out.dtype()) == name(t.d));
      CHECK(to_string(got.out.shape()) == to_string(want.out.shape()));
      CHECK(max_error(got.out, want.out) <= t.forward);
      CHECK(max_error(got.dq, want.dq) <= t.gradient);
      CHECK(max_error(got.dk, want.dk) <= t.gradient);
      CHECK(max_error(got.dv, want.dv) <= t.gradient);
    }
  }
}

TEST_CASE("scaled_dot_product_attention: f32 gradients at large scores as exact as the composition's") {
  check_large_scores(kCPU);
}

// A floating mask that requires grad takes the composition (the fused backward gives a mask no
// gradient), which keeps 16-bit inputs' scores and weights in f32 as the fused kernels do. Largest
// errors measured against f64 over the additive configs (out; q, k, v and mask gradients): bf16
// 1.7e-3 and 2.7e-3, f16 2.2e-4 and 3.5e-4; with scores and weights rounded to 16 bits they were bf16
// 1.3e-2 and 1.3e-2, f16 1.2e-3 and 1.1e-3. The tolerances leave about 3x room.
TEST_CASE("scaled_dot_product_attention: a mask that requires grad keeps 16-bit scores and weights in f32") {
  struct Tolerance {
    DType d;
    double forward, gradient;
  };
  for (const Tolerance t : {Tolerance{DType::bf16, 6e-3, 9e-3}, Tolerance{DType::f16, 7e-4, 1e-3}}) {
    for (size_t i = 0; i < kConfigs.size(); ++i) {
      const Config& c = kConfigs[i];
      if (c.mask != MaskKind::additive) continue;
      INFO(c.name, ", ", name(t.d));
      Inputs x = make_inputs(c, 300 + 10 * i);
      for (Tensor* in : {&x.q, &x.k, &x.v, &x.mask}) *in = in->to(t.d).to(DType::f64);
      const Shape out_shape = fused(x.q, x.k, x.v, x.mask, false).shape();
      const Tensor r = from_vector(random_values(numel(out_shape), DType::f64, -1, 1, false, 17 + i), out_shape);
      auto mask_grad_run = [&](DType d, auto attention) {
        Tensor mask = x.mask.to(d).detach().requires_grad_(true);
        Inputs xd = x;
        xd.mask = mask;
        const Result res = run([&](const Tensor& q, const Tensor& k, const Tensor& v, const Tensor&, bool causal) {
          return attention(q, k, v, mask, causal);
        }, xd, d, r);
        return std::pair{res, mask.grad().to(DType::f64)};
      };
      const auto [want, want_dmask] = mask_grad_run(DType::f64, composed);
      const auto [got, got_dmask] = mask_grad_run(t.d, fused);
      CHECK(name(got.out.dtype()) == name(t.d));
      CHECK(max_error(got.out, want.out) <= t.forward);
      CHECK(max_error(got.dq, want.dq) <= t.gradient);
      CHECK(max_error(got.dk, want.dk) <= t.gradient);
      CHECK(max_error(got.dv, want.dv) <= t.gradient);
      CHECK(max_error(got_dmask, want_dmask) <= t.gradient);
    }
  }
}

TEST_CASE("scaled_dot_product_attention: a query whose keys are all masked gets zeros, as PyTorch's SDPA") {
  // ember's softmax of a row of -inf is NaN (as torch.softmax); SDPA (and its composition here, with
  // PyTorch's _safe_softmax rule) gives that query a zero output row and zero gradients instead.
  CHECK(std::isnan(values(softmax(full({3}, -kInf, DType::f64), 0))[0]));
  Inputs x = make_inputs({"", {2, 6, 8}, {2, 70, 8}, {2, 70, 4}, MaskKind::boolean, {6, 70}}, 5);
  Tensor mask = x.mask.to(DType::f64);
  Tensor dead_row = narrow(mask, 0, 2, 1);  // query 2 sees no key
  zero_(dead_row);
  x.mask = mask.to(DType::boolean);
  const Tensor r = full({2, 6, 4}, 1.0, DType::f64);
  for (auto attention : {fused, composed}) {
    const Result got = run(attention, x, DType::f32, r);
    CHECK(values(narrow(got.out, 1, 2, 1)) == std::vector<double>(8, 0.0));
    CHECK(values(narrow(got.dq, 1, 2, 1)) == std::vector<double>(16, 0.0));
    CHECK(all_finite(got.dk));
    CHECK(all_finite(got.dv));
  }
  // An additive mask of -inf does the same.
  x.mask = where(x.mask, zeros({6, 70}, DType::f64), full({6, 70}, -kInf, DType::f64));
  const Result got = run(fused, x, DType::f32, r);
  CHECK(values(narrow(got.out, 1, 2, 1)) == std::vector<double>(8, 0.0));
}

TEST_CASE("scaled_dot_product_attention: dropout draws the composition's mask, and the backward redraws it") {
  const Config c{"", {2, 2, 37, 8}, {2, 2, 70, 8}, {2, 2, 70, 6}, MaskKind::boolean, {37, 70}};
  const Inputs x = make_inputs(c, 9);
  const Tensor r = from_vector(random_values(2 * 2 * 37 * 6, DType::f64, -1, 1, false, 3), {2, 2, 37, 6});
  auto with_dropout = [](bool fuse) {
    return [fuse](const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask, bool causal) {
      Generator gen(42);
      return fuse ? scaled_dot_product_attention(q, k, v, mask, 0.3, causal, std::nullopt, &gen)
                  : scaled_dot_product_attention_math(q, k, v, mask, 0.3, causal, std::nullopt, &gen).output;
    };
  };
  const Result got = run(with_dropout(true), x, DType::f64, r), want = run(with_dropout(false), x, DType::f64, r);
  CHECK(max_error(got.out, want.out) <= 1e-12);
  CHECK(max_error(got.dq, want.dq) <= 1e-12);
  CHECK(max_error(got.dk, want.dk) <= 1e-12);
  CHECK(max_error(got.dv, want.dv) <= 1e-12);
  // Some weights were dropped: the result differs from attention without dropout.
  CHECK(max_error(got.out, run(fused, x, DType::f64, r).out) > 1e-3);
  // Both advance the generator by the same rand() draw of the (2, 2, 37, 70) weights.
  Generator a(1), b(1);
  scaled_dot_product_attention(x.q, x.k, x.v, {}, 0.5, false, std::nullopt, &a);
  rand({2, 2, 37, 70}, DType::f32, &b);
  CHECK(a.state().offset == b.state().offset);
}

TEST_CASE("scaled_dot_product_attention: gradcheck and gradgradcheck in f64") {
  const Tensor bool_mask = from_vector<double>({1, 1, 0, 1, 0, 1, 1, 0, 1, 1, 1, 0, 1, 0, 0, 1, 1, 1, 1, 0}, {4, 5})
                               .to(DType::boolean);
  const Tensor add_mask = uniform_f64({1, 5}, -1, 1, 4, false);
  auto qkv = [](uint64_t seed) {
    return std::vector<Tensor>{uniform_f64({2, 4, 3}, -1, 1, seed), uniform_f64({2, 5, 3}, -1, 1, seed + 1),
                               uniform_f64({2, 5, 2}, -1, 1, seed + 2)};
  };
  auto check = [&](const std::string& what, const std::function<Tensor(const std::vector<Tensor>&)>& f, bool second) {
    INFO(what);
    CHECK(gradcheck(f, qkv(11)).entries > 0);
    if (second) CHECK(gradgradcheck(f, qkv(21)).entries > 0);
  };
  check("plain", [](const auto& x) { return scaled_dot_product_attention(x[0], x[1], x[2]); }, true);
  check("causal, scale 0.7", [](const auto& x) {
    return scaled_dot_product_attention(x[0], x[1], x[2], {}, 0.0, true, 0.7);
  }, true);
  check("bool mask", [&](const auto& x) { return scaled_dot_product_attention(x[0], x[1], x[2], bool_mask); }, true);
  check("additive mask", [&](const auto& x) { return scaled_dot_product_attention(x[0], x[1], x[2], add_mask); }, false);
  check("dropout 0.4 (one generator state per call)", [](const auto& x) {
    Generator gen(5);
    return scaled_dot_product_attention(x[0], x[1], x[2], {}, 0.4, false, std::nullopt, &gen);
  }, true);
  // The composition gives the additive mask its gradient (the fused vjp has none).
  const Tensor m = uniform_f64({4, 5}, -1, 1, 8);
  CHECK(gradcheck([](const auto& x) { return scaled_dot_product_attention(x[0], x[1], x[2], x[3]); },
                  {uniform_f64({2, 4, 3}, -1, 1, 1), uniform_f64({2, 5, 3}, -1, 1, 2), uniform_f64({2, 5, 2}, -1, 1, 3), m})
            .entries > 0);
}

TEST_CASE("scaled_dot_product_attention: the fused path never holds an (L, S) tensor") {
  check_peak_memory(DType::f32, 32, kCPU);
}

TEST_CASE("scaled_dot_product_attention: errors name the shapes, dtypes and devices") {
  const Tensor q = zeros({2, 4, 8}), k = zeros({2, 5, 8}), v = zeros({2, 5, 3});
  expect_error<ShapeError>("embedding sizes", [&] { scaled_dot_product_attention(q, zeros({2, 5, 7}), v); },
                           {"scaled_dot_product_attention", "(2, 4, 8)", "(2, 5, 7)"});
  expect_error<ShapeError>("key count", [&] { scaled_dot_product_attention(q, k, zeros({2, 6, 3})); },
                           {"(2, 5, 8)", "(2, 6, 3)"});
  expect_error<ShapeError>("batch dims", [&] { scaled_dot_product_attention(zeros({3, 4, 8}), k, v); },
                           {"(3, 4, 8)", "broadcast"});
  expect_error<ShapeError>("rank", [&] { scaled_dot_product_attention(zeros({8}), k, v); }, {"(8,)"});
  expect_error<DTypeError>("dtypes", [&] { scaled_dot_product_attention(q, k.to(DType::f64), v); },
                           {"float32", "float64"});
  expect_error<DTypeError>("integer inputs", [&] {
    scaled_dot_product_attention(q.to(DType::i64), k.to(DType::i64), v.to(DType::i64));
  }, {"int64"});
  expect_error<DTypeError>("mask dtype", [&] { scaled_dot_product_attention(q, k, v, zeros({4, 5}, DType::f64)); },
                           {"attn_mask", "float64", "float32"});
  expect_error<ShapeError>("mask shape", [&] { scaled_dot_product_attention(q, k, v, zeros({4, 6}, DType::boolean)); },
                           {"attn_mask (4, 6)", "(2, 4, 5)"});
  expect_error<ValueError>("mask and causal", [&] {
    scaled_dot_product_attention(q, k, v, zeros({4, 5}, DType::boolean), 0.0, true);
  }, {"is_causal"});
  expect_error<ValueError>("dropout_p", [&] { scaled_dot_product_attention(q, k, v, {}, 1.5); }, {"1.5"});
}

}  // TEST_SUITE("cpu")

// ---- CUDA: the fused kernels (cuda/attention.cu) against the fused CPU kernel on the same values, which
// the cases above check against the composition.

namespace {

const Device kCuda{DeviceType::cuda, 0};

// Largest |got - want| over the tensor's scale max(1, max |want|): the bound below is a multiple of
// the dtype's epsilon times that scale.
double scaled_error(const Tensor& got, const Tensor& want) {
  const std::vector<double> g = values(got), w = values(want);
  REQUIRE(g.size() == w.size());
  double scale = 1, e = 0;
  for (double x : w) scale = std::max(scale, std::fabs(x));
  for (size_t i = 0; i < g.size(); ++i) {
    if (std::isnan(w[i]) && std::isnan(g[i])) continue;
    const double d = std::fabs(g[i] - w[i]);
    e = std::isnan(d) ? kInf : std::max(e, d);
  }
  return e / scale;
}

// Bounds chosen from the arithmetic, not measured (no GPU where these were written). The CPU kernel
// keeps the weights P and dS in f32 and rounds only its results. The CUDA kernels round each weight
// to the 16-bit type (relative error eps / 2) before the tensor-core product P v, and P Z and dS
// before the dv, dk and dq products, accumulating in f32: out = sum_j p_j v_j / l moves by at most
// eps / 2 * max |v| from the weights, plus eps / 2 of |out| from each side's final rounding, so
// 1.5 eps of the output's scale; forward bound 4 eps. Gradients sum terms that cancel (dS = P (dP - D)),
// whose magnitudes add up to a few times the result's scale: bound 8 eps. eps = 2^-10 (f16), 2^-7
// (bf16). A numpy model of both sides' roundings on these shapes reached at most a fifth of the
// bounds (0.8 eps forward, 1 eps in the gradients). f32 and f64 compute as the CPU does in other orders (exp2 for exp in f32): 1e-4 (as the
// other CUDA-against-CPU tests of float kernels) and 1e-10.
double cuda_bound(DType d, bool gradient) {
  switch (d) {
    case DType::f16: return (gradient ? 8 : 4) * std::ldexp(1.0, -10);
    case DType::bf16: return (gradient ? 8 : 4) * std::ldexp(1.0, -7);
    case DType::f32: return 1e-4;
    default: return 1e-10;
  }
}

using Attention = std::function<Tensor(const Tensor&, const Tensor&, const Tensor&, const Tensor&, bool)>;

// The CUDA result against the CPU one on inputs rounded to d.
void check_cuda_against_cpu(const Attention& attention, Inputs x, DType d, uint64_t seed) {
  x.q = x.q.to(d).to(DType::f64);
  x.k = x.k.to(d).to(DType::f64);
  x.v = x.v.to(d).to(DType::f64);
  if (x.mask.defined() && x.mask.dtype() != DType::boolean) x.mask = x.mask.to(d).to(DType::f64);
  const Shape out_shape = attention(x.q, x.k, x.v, x.mask, x.causal).shape();
  const Tensor r = from_vector(random_values(numel(out_shape), DType::f64, -1, 1, false, seed), out_shape);
  const Result want = run(attention, x, d, r, kCPU), got = run(attention, x, d, r, kCuda);
  CHECK(name(got.out.dtype()) == name(d));
  CHECK(to_string(got.out.shape()) == to_string(want.out.shape()));
  CHECK(scaled_error(got.out, want.out) <= cuda_bound(d, false));
  CHECK(scaled_error(got.dq, want.dq) <= cuda_bound(d, true));
  CHECK(scaled_error(got.dk, want.dk) <= cuda_bound(d, true));
  CHECK(scaled_error(got.dv, want.dv) <= cuda_bound(d, true));
}

// Head dims 64 (ViT-B/16's), 128 (the largest the kernels take) and ones that fill no 16-column
// tile (40, 24, 8, 3); L and S off the 64-row tiles; causal with L > S and L < S; bool and additive
// masks broadcast from (L, S), (B, 1, L, S) and (B, 1, 1, S).
const std::vector<Config> kCudaConfigs = {
    {"E 64, L = S = 65", {2, 3, 65, 64}, {2, 3, 65, 64}, {2, 3, 65, 64}, MaskKind::none, {}},
    {"E 128, L 130, S 70", {2, 130, 128}, {2, 70, 128}, {2, 70, 128}, MaskKind::none, {}},
    {"E 40, Ev 24, L 70, S 133", {2, 2, 70, 40}, {2, 2, 133, 40}, {2, 2, 133, 24}, MaskKind::none, {}},
    {"E 8, Ev 3, no batch dims", {5, 8}, {7, 8}, {7, 3}, MaskKind::none, {}},
    {"causal, L 130 > S 70, E 64", {2, 130, 64}, {2, 70, 64}, {2, 70, 64}, MaskKind::causal, {}},
    {"causal, L 33 < S 150, E 40", {2, 33, 40}, {2, 150, 40}, {2, 150, 40}, MaskKind::causal, {}},
    {"bool mask (L, S), E 64", {2, 2, 67, 64}, {2, 2, 90, 64}, {2, 2, 90, 64}, MaskKind::boolean, {67, 90}},
    {"bool mask (B, 1, L, S), E 16", {2, 2, 20, 16}, {2, 2, 30, 16}, {2, 2, 30, 8}, MaskKind::boolean, {2, 1, 20, 30}},
    {"additive key padding mask (B, 1, 1, S), E 64", {2, 3, 40, 64}, {2, 3, 100, 64}, {2, 3, 100, 64},
     MaskKind::additive, {2, 1, 1, 100}},
    {"additive mask (L, S), E 128", {3, 70, 128}, {3, 65, 128}, {3, 65, 128}, MaskKind::additive, {70, 65}},
};

}  // namespace

EMBER_CUDA_TEST_CASE("cuda scaled_dot_product_attention: fused forward and gradients match the CPU kernel") {
  for (DType d : {DType::f16, DType::bf16, DType::f32, DType::f64})
    for (size_t i = 0; i < kCudaConfigs.size(); ++i) {
      const Config& c = kCudaConfigs[i];
      INFO(c.name, ", ", name(d));
      check_cuda_against_cpu(fused, make_inputs(c, 300 + 10 * i), d, 17 + i);
    }
}

EMBER_CUDA_TEST_CASE("cuda scaled_dot_product_attention: f32 gradients at large scores as exact as the composition's") {
  check_large_scores(kCuda);
}

EMBER_CUDA_TEST_CASE("cuda scaled_dot_product_attention: the fused path takes 16-bit inputs and never holds (L, S)") {
  for (DType d : {DType::f16, DType::bf16}) {
    INFO(name(d));
    check_peak_memory(d, 64, kCuda);
  }
}

EMBER_CUDA_TEST_CASE("cuda scaled_dot_product_attention: a mask view read through any strides") {
  // The same mask values as a view on the inputs' device: a bool (L, S) mask through strides (1, L),
  // the transpose of an (S, L) copy; an additive (B, 1, 1, S) one through stride 2 along S, every other
  // element of rows twice as long (and stride 0 along heads and L, as the front end broadcasts it).
  auto transposed = [](const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask, bool causal) {
    return scaled_dot_product_attention(q, k, v, mask.transpose(-2, -1).contiguous().transpose(-2, -1), 0.0, causal);
  };
  auto every_other = [](const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask, bool causal) {
    Shape pairs = mask.shape(), wide = mask.shape();
    pairs.push_back(2);
    wide[wide.size() - 1] *= 2;
    const Tensor rows = reshape(mask.unsqueeze(-1).expand(pairs).contiguous(), wide);
    return scaled_dot_product_attention(q, k, v, slice(rows, rows.dim() - 1, 0, rows.size(-1), 2), 0.0, causal);
  };
  const Config bool_mask{"", {2, 2, 45, 64}, {2, 2, 80, 64}, {2, 2, 80, 64}, MaskKind::boolean, {45, 80}};
  const Config add_mask{"", {2, 2, 45, 64}, {2, 2, 80, 64}, {2, 2, 80, 64}, MaskKind::additive, {2, 1, 1, 80}};
  for (DType d : {DType::f16, DType::f32}) {
    INFO(name(d));
    check_cuda_against_cpu(transposed, make_inputs(bool_mask, 41), d, 42);
    check_cuda_against_cpu(every_other, make_inputs(add_mask, 43), d, 44);
  }
}

EMBER_CUDA_TEST_CASE("cuda scaled_dot_product_attention: a query whose keys are all masked gets zeros, max +inf") {
  for (DType d : {DType::f16, DType::bf16, DType::f32}) {
    INFO(name(d));
    Inputs x = make_inputs({"", {2, 6, 64}, {2, 70, 64}, {2, 70, 32}, MaskKind::boolean, {6, 70}}, 5);
    Tensor mask = x.mask.to(DType::f64);
    Tensor dead_row = narrow(mask, 0, 2, 1);  // query 2 sees no key
    zero_(dead_row);
    x.mask = mask.to(DType::boolean);
    // The primitive itself, for its row stats: max +inf and sum 0 on the dead rows, finite and > 0 elsewhere.
    const AttentionParams p{0.125, false, true, 0, {}};
    const std::vector<Tensor> outs = ember::run(
        ScaledDotProductAttention(p),
        {x.q.to(d).to(kCuda), x.k.to(d).to(kCuda), x.v.to(d).to(kCuda), x.mask.to(kCuda).expand({2, 6, 70})});
    const std::vector<double> stats = values(outs[1].to(kCPU));
    for (int64_t row = 0; row < 12; ++row) {
      const double max = stats[2 * row], sum = stats[2 * row + 1];
      CHECK_MESSAGE((row % 6 == 2 ? max == kInf && sum == 0 : std::isfinite(max) && sum > 0), "row ", row, ": ", max,
                    ", ", sum);
    }
    CHECK(values(narrow(outs[0].to(kCPU), 1, 2, 1)) == std::vector<double>(64, 0.0));
    // Through autograd: zero gradients for the dead query, finite everywhere.
    const Tensor r = full({2, 6, 32}, 1.0, DType::f64);
    const Result got = run(fused, x, d, r, kCuda);
    CHECK(values(narrow(got.out, 1, 2, 1)) == std::vector<double>(64, 0.0));
    CHECK(values(narrow(got.dq, 1, 2, 1)) == std::vector<double>(128, 0.0));
    CHECK(all_finite(got.dk));
    CHECK(all_finite(got.dv));
    // An additive mask of -inf does the same.
    x.mask = where(x.mask, zeros({6, 70}, DType::f64), full({6, 70}, -kInf, DType::f64));
    CHECK(values(narrow(run(fused, x, d, r, kCuda).out, 1, 2, 1)) == std::vector<double>(64, 0.0));
  }
}

EMBER_CUDA_TEST_CASE("cuda scaled_dot_product_attention: dropout drops what the CPU kernel drops") {
  // Rows of 70 keys start at flat indices that are not multiples of 4 (the Philox block boundary).
  const std::vector<Config> configs = {
      {"bool mask", {2, 2, 37, 64}, {2, 2, 70, 64}, {2, 2, 70, 48}, MaskKind::boolean, {37, 70}},
      {"causal", {2, 2, 70, 64}, {2, 2, 70, 64}, {2, 2, 70, 64}, MaskKind::causal, {}},
  };
  auto with_dropout = [](const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask, bool causal) {
    Generator gen(42);
    return scaled_dot_product_attention(q, k, v, mask, 0.3, causal, std::nullopt, &gen);
  };
  for (DType d : {DType::f32, DType::f16, DType::f64})
    for (size_t i = 0; i < configs.size(); ++i) {
      INFO(configs[i].name, ", ", name(d));
      const Inputs x = make_inputs(configs[i], 60 + i);
      check_cuda_against_cpu(with_dropout, x, d, 70 + i);
      // Some weights were dropped: the result differs from attention without dropout.
      const Tensor r = full({2, 2, x.q.size(2), x.v.size(3)}, 1.0, DType::f64);
      CHECK(scaled_error(run(with_dropout, x, d, r, kCuda).out, run(fused, x, d, r, kCuda).out) > 0.05);
    }
}

EMBER_CUDA_TEST_CASE("cuda scaled_dot_product_attention: head dims the kernels do not take go to the composition") {
  // E = 160 > 128: the composition on CUDA, the fused kernel on the CPU.
  CHECK_FALSE(cuda_attention_fused(DType::f16, 160, 64, kCuda));
  CHECK_FALSE(cuda_attention_fused(DType::f16, 64, 129, kCuda));
  CHECK(cuda_attention_fused(DType::bf16, 64, 64, kCuda));  // 90 KB of shared memory: any sm_80 or later
  const Config c{"", {2, 40, 160}, {2, 50, 160}, {2, 50, 16}, MaskKind::causal, {}};
  check_cuda_against_cpu(fused, make_inputs(c, 80), DType::f32, 81);
}

EMBER_CUDA_TEST_CASE("cuda scaled_dot_product_attention: the deterministic mode's backward takes the composition") {
  const Config c{"", {2, 2, 50, 64}, {2, 2, 70, 64}, {2, 2, 70, 64}, MaskKind::causal, {}};
  const Inputs x = make_inputs(c, 90);
  set_deterministic(true);
  try {
    check_cuda_against_cpu(fused, x, DType::f32, 91);  // through the composition: no NotDeterministicError
    // The fused backward itself refuses: its dq is summed with atomics.
    const TensorOptions opts = TensorOptions(DType::f32).with_device(kCuda);
    const Tensor q = zeros({1, 8, 64}, opts), g = zeros({1, 8, 64}, opts);
    const Tensor stats = zeros({1, 8, 2}, opts);
    expect_error<NotDeterministicError>("fused backward", [&] {
      ember::run(ScaledDotProductAttentionBackward(AttentionParams{0.125, false, false, 0, {}}), {q, q, q, q, g, stats});
    }, {"scaled_dot_product_attention_backward"});
  } catch (...) {
    set_deterministic(false);
    throw;
  }
  set_deterministic(false);
}
