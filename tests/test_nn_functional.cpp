// nn functional ops: batch_norm, layer_norm, dropout, embedding, cross_entropy, nll_loss, mse_loss
// against the naive f64 references of tests/nn_reference.h, gradcheck of their backward, and errors;
// on a GPU, the CUDA kernels of the norms and cross_entropy against the CPU's, gradients included.
#include <cmath>

#include "autograd/gradcheck.h"
#include "nn/dropout.h"
#include "nn/embedding.h"
#include "nn/loss.h"
#include "nn/normalization.h"
#include "nn/primitives/normalization.h"
#include "tests/helpers.h"
#include "tests/nn_reference.h"

using namespace ember;
using namespace ember_test;

namespace {

uint64_t next_seed() {
  static uint64_t s = 100;
  return s++;
}
std::vector<double> rv(int64_t n, double lo = -2, double hi = 2) {
  return random_values(n, DType::f64, lo, hi, false, next_seed());
}
Tensor f64(const std::vector<double>& v, const Shape& s, bool grad = false) {
  Tensor t = from_vector(v, s);
  if (grad) t.requires_grad_(true);
  return t;
}

void check_grad(const std::string& what, const std::function<Tensor(const std::vector<Tensor>&)>& fn,
                const std::vector<Tensor>& inputs, bool second_order = false) {
  try {
    CHECK_MESSAGE(gradcheck(fn, inputs).entries > 0, what);
    if (second_order) CHECK_MESSAGE(gradgradcheck(fn, inputs).entries > 0, what);
  } catch (const std::exception& e) {
    FAIL_CHECK(what, ": ", std::string(e.what()));
  }
}

template <class E>
void check_error(const std::function<void()>& f, const std::string& fragment) {
  try {
    f();
    FAIL_CHECK("expected an error containing '", fragment, "'");
  } catch (const E& e) {
    const std::string msg = e.what();
    CHECK_MESSAGE(msg.find(fragment) != std::string::npos, msg);
  }
}

using ref::channel_stats;
using ref::Stats;

}  // namespace

TEST_SUITE("cpu") {

TEST_CASE("batch_norm: training, running statistics after two steps, eval") {
  const int64_t N = 4, C = 3, H = 2, W = 3, S = H * W;
  const Shape shape{N, C, H, W};
  const std::vector<double> w = {1.5, -0.5, 2.0}, b = {0.1, 0.2, -0.3};
  for (DType d : {DType::f32, DType::f64, DType::f16, DType::bf16}) {
    INFO(name(d));
    const DType sd = d == DType::f64 ? DType::f64 : DType::f32;  // params / stats dtype
    Tensor rm = zeros({C}, sd), rvar = ones({C}, sd);
    const Tensor wt = make_tensor(w, {C}, sd), bt = make_tensor(b, {C}, sd);
    std::vector<double> want_m(C, 0.0), want_v(C, 1.0);
    for (int step = 0; step < 2; ++step) {
      const Tensor x = make_tensor(rv(N * C * S, -3, 3), shape, d);
      const std::vector<double> xv = values(x);  // as rounded to d
      const Stats st = channel_stats(xv, N, C, S);
      const Tensor y = batch_norm(x, rm, rvar, wt, bt, /*training=*/true, 0.1, 1e-5);
      check_values(y, {shape, ref::batch_norm(xv, N, C, S, st.mean, st.var, w, b)}, tolerance(d), "train output");
      ref::update_running(want_m, want_v, st, N * S, 0.1);  // unbiased batch variance
      check_values(rm, {{C}, want_m}, tolerance(sd), "running_mean");
      check_values(rvar, {{C}, want_v}, tolerance(sd), "running_var");
    }
    const Tensor x = make_tensor(rv(N * C * S), shape, d);
    const Tensor y = batch_norm(x, rm, rvar, wt, bt, /*training=*/false);
    check_values(y, {shape, ref::batch_norm(values(x), N, C, S, want_m, want_v, w, b)}, tolerance(d), "eval output");
  }
}

TEST_CASE("batch_norm: ranks 2 and 3, no affine, channels-last input") {
  for (const Shape& shape : {Shape{5, 3}, Shape{2, 3, 4}}) {
    const int64_t N = shape[0], C = shape[1], S = numel(shape) / (N * C);
    const std::vector<double> xv = rv(numel(shape));
    const Stats st = channel_stats(xv, N, C, S);
    const Tensor y = batch_norm(f64(xv, shape), {}, {}, {}, {}, true);
    check_values(y, {shape, ref::batch_norm(xv, N, C, S, st.mean, st.var, std::vector<double>(C, 1), std::vector<double>(C, 0))},
                 tolerance(DType::f64), to_string(shape));
  }
  // NCHW-shaped, NHWC-strided: the same result as the contiguous input, in both modes.
  const Tensor nhwc = f64(rv(2 * 3 * 4 * 3), {2, 3, 4, 3});  // (N, H, W, C)
  const Tensor x = nhwc.permute({0, 3, 1, 2});                // (N, C, H, W), channels-last strides
  REQUIRE(!x.is_contiguous());
  const Tensor w = f64({0.5, 1.0, 2.0}, {3}), b = f64({0.0, 1.0, -1.0}, {3});
  Tensor rm1 = zeros({3}, DType::f64), rv1 = ones({3}, DType::f64);
  Tensor rm2 = zeros({3}, DType::f64), rv2 = ones({3}, DType::f64);
  CHECK(allclose(batch_norm(x, rm1, rv1, w, b, true), batch_norm(x.contiguous(), rm2, rv2, w, b, true), 1e-12, 1e-12));
  CHECK(allclose(rm1, rm2, 1e-12, 1e-12));
  CHECK(allclose(rv1, rv2, 1e-12, 1e-12));
  CHECK(allclose(batch_norm(x, rm1, rv1, w, b, false), batch_norm(x.contiguous(), rm1, rv1, w, b, false), 1e-12, 1e-12));
  // the memory format is kept: channels-last in, channels-last out, and so for the gradient
  const Tensor xl = x.detach().requires_grad_(true);
  const Tensor y = batch_norm(xl, {}, {}, w, b, true);
  CHECK(y.strides() == x.strides());
  CHECK(batch_norm(x, rm1, rv1, w, b, false).strides() == x.strides());
  const Tensor gy = f64(rv(y.numel()), {2, 3, 4, 3}).permute({0, 3, 1, 2});  // channels-last cotangent
  const Tensor dx = autograd::grad({y}, {xl}, {gy})[0];
  CHECK(dx.strides() == x.strides());
  const Tensor dx_ref = autograd::grad({batch_norm(xl, {}, {}, w, b, true)}, {xl}, {gy.contiguous()}, false, true)[0];
  CHECK(allclose(dx, dx_ref, 1e-10, 1e-10));
  CHECK(batch_norm(x.contiguous(), {}, {}, w, b, true).is_contiguous());
  // other layouts (transposed spatial dims, strided slices) are read through a copy or strides
  const Tensor odd = slice(f64(rv(2 * 3 * 4 * 8), {2, 3, 4, 8}).transpose(2, 3), 2, 0, 8, 2);
  CHECK(allclose(batch_norm(odd, {}, {}, w, b, true), batch_norm(odd.contiguous(), {}, {}, w, b, true), 1e-12, 1e-12));
}

TEST_CASE("layer_norm: forward against a reference") {
  const Shape shape{3, 4, 5};
  for (DType d : {DType::f32, DType::f64, DType::bf16}) {
    for (int k : {1, 2}) {
      INFO(name(d), " normalized dims ", k);
      const int64_t D = k == 1 ? 5 : 20;
      const Shape ns = k == 1 ? Shape{5} : Shape{4, 5};
      const Tensor x = make_tensor(rv(60, -3, 3), shape, d);
      const std::vector<double> xv = values(x), wv = rv(D), bv = rv(D);
      const std::vector<double> want = ref::layer_norm(xv, D, wv, bv);
      const DType pd = d == DType::f64 ? DType::f64 : DType::f32;
      check_values(layer_norm(x, ns, make_tensor(wv, ns, pd), make_tensor(bv, ns, pd)), {shape, want}, tolerance(d),
                   "layer_norm");
    }
  }
}

TEST_CASE("dropout: Philox mask, reproducibility, keep rate, special cases") {
  const int64_t n = 20000;
  const Tensor x = ones({n});
  Generator g1(123), g2(123), g3(123);
  const Tensor a = dropout(x, 0.3, true, &g1);
  const Tensor b = dropout(x, 0.3, true, &g2);
  CHECK(equal(a, b));
  CHECK(g1.state().offset == g2.state().offset);
  const std::vector<double> u = values(rand({n}, DType::f32, &g3));  // the same draws
  CHECK(g3.state().offset == g1.state().offset);
  const std::vector<double> av = values(a);
  int64_t kept = 0, wrong = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double want = u[i] >= 0.3 ? 1 / 0.7 : 0.0;
    wrong += std::fabs(av[i] - want) > 1e-6;
    kept += av[i] != 0;
  }
  CHECK(wrong == 0);
  CHECK(std::fabs(static_cast<double>(kept) / n - 0.7) < 0.02);
  const Tensor c = dropout(x, 0.3, true, &g1);  // the generator moved on: another mask
  CHECK(!equal(a, c));
  CHECK(dropout(x, 0.0, true).is_same(x));
  CHECK(dropout(x, 0.5, false).is_same(x));
  CHECK(equal(dropout(x, 1.0, true), zeros({n})));
  // the gradient is the mask scaled
  const Tensor xg = uniform_f64({50}, -1, 1, 7);
  Generator g4(9);
  const Tensor y = dropout(xg, 0.5, true, &g4);
  sum(y).backward();
  const std::vector<double> gv = values(xg.grad()), yv = values(y), xv = values(xg);
  for (size_t i = 0; i < gv.size(); ++i) CHECK(gv[i] == doctest::Approx(yv[i] == 0 ? 0.0 : 2.0));
  (void)xv;
}

TEST_CASE("embedding: lookup of any index shape, padding_idx") {
  const std::vector<double> wv = rv(5 * 3);
  const Tensor w = f64(wv, {5, 3});
  const std::vector<int64_t> iv = {4, 0, 2, 2, 1, 3};
  for (DType id : {DType::i64, DType::i32}) {
    const Tensor idx = from_vector(iv, {2, 3}).to(id);
    const Host want = ref::embedding({{5, 3}, wv}, {{2, 3}, std::vector<double>(iv.begin(), iv.end())});
    check_values(embedding(w, idx), want, tolerance(DType::f64), "embedding " + name(id));
  }
  const Tensor wg = f64(wv, {5, 3}, true);
  const Tensor out = embedding(wg, from_vector(iv, {2, 3}), 2);
  sum(out).backward();
  const std::vector<double> g = values(wg.grad());  // row counts, row 2 masked out
  const double counts[5] = {1, 1, 0, 1, 1};
  for (int64_t r = 0; r < 5; ++r)
    for (int64_t j = 0; j < 3; ++j) CHECK(g[r * 3 + j] == counts[r]);
}

TEST_CASE("cross_entropy: reductions, smoothing, ignore_index, 4-D input, dtypes") {
  const int64_t N = 6, C = 5;
  const std::vector<double> xv = rv(N * C, -3, 3);
  const std::vector<int64_t> tv = {1, 0, 4, -100, 2, 3};
  for (DType d : {DType::f64, DType::f32, DType::bf16}) {
    const Tensor x = make_tensor(xv, {N, C}, d);
    const std::vector<double> xr = values(x);
    const Tensor t = from_vector(tv, {N});
    for (double eps : {0.0, 0.1}) {
      INFO(name(d), " label_smoothing ", eps);
      const std::vector<double> loss = ref::cross_entropy(xr, tv, N, C, 1, -100, eps);
      const Tol tol = d == DType::bf16 ? Tol{2e-2, 2e-2} : tolerance(d);
      check_values(cross_entropy(x, t, "none", -100, eps), {{N}, loss}, tol, "none");
      check_values(cross_entropy(x, t, "sum", -100, eps), {{}, {ref::reduce_targets(loss, tv, -100, false)}}, tol, "sum");
      check_values(cross_entropy(x, t, "mean", -100, eps), {{}, {ref::reduce_targets(loss, tv, -100, true)}}, tol, "mean");
    }
  }
  // ignore_index naming a real class; i32 targets
  const std::vector<int64_t> t2 = {1, 0, 4, 4, 2, 3};
  const std::vector<double> l2 = ref::cross_entropy(xv, t2, N, C, 1, 4, 0.2);
  check_values(cross_entropy(f64(xv, {N, C}), from_vector(t2, {N}).to(DType::i32), "mean", 4, 0.2),
               {{}, {ref::reduce_targets(l2, t2, 4, true)}}, tolerance(DType::f64), "ignore_index=4");
  // (N, C, d1, d2)
  const std::vector<double> x4 = rv(2 * 3 * 2 * 2);
  const std::vector<int64_t> t4 = {0, 2, 1, -100, 2, 2, 0, 1};
  const std::vector<double> l4 = ref::cross_entropy(x4, t4, 2, 3, 4, -100, 0.1);
  check_values(cross_entropy(f64(x4, {2, 3, 2, 2}), from_vector(t4, {2, 2, 2}), "none", -100, 0.1), {{2, 2, 2}, l4},
               tolerance(DType::f64), "4-D none");
  check_values(cross_entropy(f64(x4, {2, 3, 2, 2}), from_vector(t4, {2, 2, 2}), "mean", -100, 0.1),
               {{}, {ref::reduce_targets(l4, t4, -100, true)}}, tolerance(DType::f64), "4-D mean");
  // unbatched (C) logits with a 0-dim target
  check_values(cross_entropy(f64(xv, {N, C}).select(0, 0), scalar_tensor(1, DType::i64), "none"),
               {{}, {ref::cross_entropy(xv, tv, 1, C, 1, -100, 0)[0]}}, tolerance(DType::f64), "unbatched");
  // agrees with nll_loss(log_softmax)
  const Tensor x = f64(xv, {N, C});
  const Tensor t = from_vector(tv, {N});
  for (const char* r : {"none", "sum", "mean"})
    CHECK(allclose(cross_entropy(x, t, r), nll_loss(log_softmax(x, 1), t, r), 1e-12, 1e-12));
}

TEST_CASE("nll_loss and mse_loss: forward against references") {
  const int64_t N = 4, C = 3;
  const std::vector<double> lp = rv(N * C, -3, 0);
  const std::vector<int64_t> tv = {2, -100, 0, 1};
  const std::vector<double> none = ref::nll_loss(lp, tv, N, C, 1, -100);
  const double s = ref::reduce_targets(none, tv, -100, false);
  const Tensor x = f64(lp, {N, C});
  const Tensor t = from_vector(tv, {N});
  check_values(nll_loss(x, t, "none"), {{N}, none}, tolerance(DType::f64), "nll none");
  check_values(nll_loss(x, t, "sum"), {{}, {s}}, tolerance(DType::f64), "nll sum");
  check_values(nll_loss(x, t), {{}, {s / 3}}, tolerance(DType::f64), "nll mean");

  const std::vector<double> a = rv(6), b = rv(3);
  const Host sq = ref::squared_error({{2, 3}, a}, {{3}, b});
  double total = 0;
  for (double e : sq.v) total += e;
  check_values(mse_loss(f64(a, {2, 3}), f64(b, {3}), "none"), sq, tolerance(DType::f64), "mse none");
  check_values(mse_loss(f64(a, {2, 3}), f64(b, {3}), "sum"), {{}, {total}}, tolerance(DType::f64), "mse sum");
  check_values(mse_loss(f64(a, {2, 3}), f64(b, {3})), {{}, {total / 6}}, tolerance(DType::f64), "mse mean");
}

TEST_CASE("gradcheck: batch_norm, layer_norm, losses, embedding") {
  const Tensor rm = f64({0.1, -0.2}, {2}), rvar = f64({0.5, 1.5}, {2});
  check_grad("batch_norm train", [](const auto& in) { return batch_norm(in[0], {}, {}, in[1], in[2], true); },
             {f64(rv(12), {3, 2, 2}, true), f64(rv(2), {2}, true), f64(rv(2), {2}, true)}, true);
  check_grad("batch_norm train, running stats, no affine",
             [](const auto& in) {
               Tensor m = zeros({2}, DType::f64), v = ones({2}, DType::f64);
               return batch_norm(in[0], m, v, {}, {}, true);
             },
             {f64(rv(16), {2, 2, 2, 2}, true)});
  check_grad("batch_norm eval",
             [&](const auto& in) { return batch_norm(in[0], rm, rvar, in[1], in[2], false); },
             {f64(rv(12), {3, 2, 2}, true), f64(rv(2), {2}, true), f64(rv(2), {2}, true)}, true);
  check_grad("batch_norm channels-last",
             [](const auto& in) { return batch_norm(in[0].permute({0, 3, 1, 2}), {}, {}, in[1], {}, true); },
             {f64(rv(24), {2, 2, 3, 2}, true), f64(rv(2), {2}, true)});
  check_grad("layer_norm", [](const auto& in) { return layer_norm(in[0], {2, 3}, in[1], in[2]); },
             {f64(rv(12), {2, 2, 3}, true), f64(rv(6), {2, 3}, true), f64(rv(6), {2, 3}, true)}, true);
  check_grad("layer_norm (no affine)", [](const auto& in) { return layer_norm(in[0], {4}); },
             {f64(rv(8), {2, 4}, true)});
  const Tensor t = from_vector<int64_t>({1, -100, 3, 0}, {4});
  for (const char* r : {"mean", "sum", "none"})
    check_grad(std::string("cross_entropy ") + r,
               [&](const auto& in) { return cross_entropy(in[0], t, r, -100, 0.15); }, {f64(rv(16), {4, 4}, true)},
               true);
  const Tensor t4 = from_vector<int64_t>({0, 2, 1, 1}, {2, 2});
  check_grad("cross_entropy 3-D, ignore_index=1",
             [&](const auto& in) { return cross_entropy(in[0], t4, "mean", 1, 0.1); }, {f64(rv(12), {2, 3, 2}, true)});
  check_grad("nll_loss", [&](const auto& in) { return nll_loss(in[0], t); }, {f64(rv(16), {4, 4}, true)});
  check_grad("mse_loss", [](const auto& in) { return mse_loss(in[0], in[1]); },
             {f64(rv(6), {2, 3}, true), f64(rv(3), {3}, true)}, true);
  const Tensor idx = from_vector<int64_t>({0, 3, 3, 1}, {2, 2});
  check_grad("embedding", [&](const auto& in) { return embedding(in[0], idx); }, {f64(rv(8), {4, 2}, true)});
  // padding_idx: the padding row's gradient is zero by definition, so the check masks that row out
  check_grad("embedding padding_idx",
             [&](const auto& in) { return embedding(in[0], idx, 3) * ne(idx, 3).unsqueeze(-1).to(DType::f64); },
             {f64(rv(8), {4, 2}, true)});
}

TEST_CASE("batch_norm: the fused backward kernel agrees with the composite backward") {
  // create_graph = false runs BatchNormBackward; create_graph = true the public-op formula.
  for (DType d : {DType::f64, DType::f32, DType::bf16}) {
    for (bool training : {true, false}) {
      for (bool channels_last : {false, true}) {
        INFO(name(d), training ? " train" : " eval", channels_last ? " channels-last" : "");
        const DType sd = d == DType::f64 ? DType::f64 : DType::f32;
        Tensor x = make_tensor(rv(2 * 3 * 3 * 4), {2, 3, 4, 3}, d).requires_grad_(true);  // (N, H, W, C)
        const Tensor w = make_tensor(rv(3), {3}, sd).requires_grad_(true);
        const Tensor b = make_tensor(rv(3), {3}, sd).requires_grad_(true);
        const Tensor rm = make_tensor(rv(3), {3}, sd), rvar = make_tensor(rv(3, 0.5, 2), {3}, sd);
        const Tensor xin = channels_last ? x.permute({0, 3, 1, 2}) : x.reshape({2, 3, 4, 3});
        const Tensor y = batch_norm(xin, rm, rvar, w, b, training);
        const Tensor v = make_tensor(rv(y.numel()), y.shape(), d);
        const auto fused = autograd::grad({y}, {x, w, b}, {v}, true, false);
        const auto composite = autograd::grad({y}, {x, w, b}, {v}, true, true);
        const Tol tol = d == DType::bf16 ? Tol{3e-2, 3e-2} : tolerance(d == DType::f32 ? DType::f32 : d);
        for (int i = 0; i < 3; ++i) {
          CHECK(fused[i].dtype() == (i == 0 ? d : sd));
          check_values(fused[i], to_host(composite[i].detach()), i == 0 ? tol : Tol{tol.atol * 10, tol.rtol * 10},
                       "input " + std::to_string(i));
        }
      }
    }
  }
}

TEST_CASE("layer_norm: the fused backward kernel agrees with the composite backward") {
  for (DType d : {DType::f64, DType::f32, DType::bf16}) {
    for (bool affine : {true, false}) {
      INFO(name(d), affine ? " affine" : "");
      const DType sd = d == DType::f64 ? DType::f64 : DType::f32;
      const Tensor x = make_tensor(rv(5 * 4 * 6), {5, 4, 6}, d).requires_grad_(true);
      const Tensor w = make_tensor(rv(24), {4, 6}, sd).requires_grad_(true);
      const Tensor b = make_tensor(rv(24), {4, 6}, sd).requires_grad_(true);
      const Tensor y = affine ? layer_norm(x, {4, 6}, w, b) : layer_norm(x, {4, 6});
      const Tensor v = make_tensor(rv(y.numel()), y.shape(), d);
      const std::vector<Tensor> wrt = affine ? std::vector<Tensor>{x, w, b} : std::vector<Tensor>{x};
      const auto fused = autograd::grad({y}, wrt, {v}, true, false);
      const auto composite = autograd::grad({y}, wrt, {v}, true, true);
      const Tol tol = d == DType::bf16 ? Tol{3e-2, 3e-2} : tolerance(d);
      for (size_t i = 0; i < wrt.size(); ++i) {
        CHECK(fused[i].dtype() == (i == 0 ? d : sd));
        check_values(fused[i], to_host(composite[i].detach()), i == 0 ? tol : Tol{tol.atol * 10, tol.rtol * 10},
                     "input " + std::to_string(i));
      }
    }
  }
}

TEST_CASE("cross_entropy: the fused backward kernel agrees with the composite backward") {
  const std::vector<int64_t> tv = {0, 2, 1, -100, 2, 2, 0, 1, 3, 3, -100, 0};
  for (DType d : {DType::f64, DType::f32, DType::bf16})
    for (const char* r : {"mean", "sum", "none"})
      for (double eps : {0.0, 0.2}) {
        INFO(name(d), " ", r, " label_smoothing ", eps);
        const Tensor x = make_tensor(rv(2 * 4 * 6, -3, 3), {2, 4, 6}, d).requires_grad_(true);
        const Tensor t = from_vector(tv, {2, 6});
        const Tensor y = cross_entropy(x, t, r, -100, eps);
        const Tensor v = make_tensor(rv(y.numel()), y.shape(), d);
        const Tensor fused = autograd::grad({y}, {x}, {v}, true, false)[0];
        const Tensor composite = autograd::grad({y}, {x}, {v}, true, true)[0];
        check_values(fused, to_host(composite.detach()), d == DType::bf16 ? Tol{2e-2, 2e-2} : tolerance(d), "dlogits");
      }
}

TEST_CASE("errors name the values") {
  const Tensor x = zeros({4, 3});
  check_error<ValueError>([&] { batch_norm(x, {}, {}, {}, {}, false); }, "running_mean");
  check_error<ShapeError>([&] { batch_norm(x, {}, {}, zeros({4}), {}, true); }, "(4,)");
  check_error<ShapeError>([&] { batch_norm(zeros({3}), {}, {}, {}, {}, true); }, "(3,)");
  check_error<ValueError>([&] { batch_norm(zeros({1, 3}), {}, {}, {}, {}, true); }, "more than 1 value per channel");
  check_error<DTypeError>([&] { batch_norm(zeros({2, 3}, DType::f16), {}, {}, zeros({3}, DType::f64), {}, true); },
                          "weight is float64");
  check_error<ShapeError>([&] { layer_norm(x, {4}); }, "(4,)");
  check_error<ValueError>([&] { dropout(x, 1.5); }, "1.5");
  check_error<ValueError>([&] { dropout(x, -0.1); }, "-0.1");
  check_error<DTypeError>([&] { dropout(zeros({3}, DType::i64), 0.5); }, "int64");
  check_error<DTypeError>([&] { embedding(x, zeros({2})); }, "float32");
  check_error<IndexError>([&] { embedding(x, zeros({2}, DType::i64), 7); }, "7");
  const Tensor t = from_vector<int64_t>({0, 7, 1, 2}, {4});
  check_error<IndexError>([&] { cross_entropy(x, t); }, "target 7");
  check_error<IndexError>([&] { nll_loss(x, t); }, "target 7");
  check_error<ValueError>([&] { cross_entropy(x, zeros({4}, DType::i64), "avg"); }, "'avg'");
  check_error<ValueError>([&] { cross_entropy(x, zeros({4}, DType::i64), "mean", -100, 1.5); }, "label_smoothing");
  check_error<ShapeError>([&] { cross_entropy(x, zeros({3}, DType::i64)); }, "(3,)");
  check_error<DTypeError>([&] { cross_entropy(x, zeros({4})); }, "float32");
  check_error<ValueError>([&] { mse_loss(x, x, "max"); }, "'max'");
}

}  // TEST_SUITE

namespace {

const Device kCuda{DeviceType::cuda, 0};

// A CUDA result against the CPU kernel's: the two accumulate in another order and width (f32 on the
// GPU for all but f64), and 16-bit results may round to neighbouring values.
Tol device_tol(DType d) {
  switch (d) {
    case DType::f64: return {1e-10, 1e-10};
    case DType::f32: return {1e-4, 1e-4};
    case DType::f16: return {4e-3, 4e-3};
    default: return {3e-2, 3e-2};
  }
}
// For per-channel sums over m elements (dweight, dbias) of values of dtype d.
Tol sum_tol(DType d, int64_t m) {
  const Tol t = device_tol(d);
  return {t.atol * std::sqrt(static_cast<double>(m)), t.rtol};
}

void check_same(const Tensor& got, const Tensor& want, Tol tol, const std::string& what) {
  CHECK_MESSAGE(got.device() == kCuda, what);
  CHECK_MESSAGE(got.dtype() == want.dtype(), what);
  check_values(got, to_host(want), tol, what);
}

// t on `device` as a fresh leaf that requires grad.
Tensor leaf(const Tensor& t, Device device) { return t.to(device).detach().requires_grad_(true); }

// x (N, C, ...) on `device` in one of the layouts batch norm reads in place or through a copy; the
// same seed gives the same values on every device.
enum class BnLayout { contiguous, channels_last, strided, transposed_spatial };
Tensor bn_input(const Shape& s, DType d, BnLayout layout, Device device, uint64_t seed) {
  Shape stored = s;
  if (layout == BnLayout::channels_last) {  // (N, spatial..., C)
    for (int i = 1; i + 1 < s.size(); ++i) stored[i] = s[i + 1];
    stored[s.size() - 1] = s[1];
  }
  if (layout == BnLayout::strided) stored[0] = 2 * s[0];  // every other sample
  if (layout == BnLayout::transposed_spatial) std::swap(stored[s.size() - 1], stored[s.size() - 2]);
  const Tensor t = make_tensor(random_values(numel(stored), DType::f64, -3, 3, false, seed), stored, d, device);
  switch (layout) {
    case BnLayout::contiguous: return t;
    case BnLayout::channels_last: {
      Shape back{0, s.size() - 1};
      for (int i = 2; i < s.size(); ++i) back.push_back(i - 1);
      return t.permute(back);
    }
    case BnLayout::strided: return slice(t, 0, 0, stored[0], 2);
    case BnLayout::transposed_spatial: return t.transpose(-1, -2);  // read through a copy
  }
  return t;
}

}  // namespace

EMBER_CUDA_TEST_CASE("cuda batch_norm: outputs, running statistics and gradients match the CPU kernels") {
  struct Config {
    Shape x;
    BnLayout layout;
  };
  // Small shapes in every layout, then sizes whose statistics are split over many blocks
  // (a block per channel and split for NCHW, warps across channels for channels-last).
  const std::vector<Config> configs = {
      {{4, 3, 5, 6}, BnLayout::contiguous}, {{4, 3, 5, 6}, BnLayout::channels_last},
      {{3, 3, 2, 5}, BnLayout::strided},    {{2, 3, 4, 5}, BnLayout::transposed_spatial},
      {{6, 5}, BnLayout::contiguous},       {{3, 4, 7}, BnLayout::channels_last},
      {{16, 6, 40, 40}, BnLayout::contiguous}, {{16, 40, 24, 24}, BnLayout::channels_last},
  };
  for (const Config& cfg : configs)
    for (DType d : kFloats)
      for (bool training : {true, false})
        for (bool affine : {true, false}) {
          INFO(to_string(cfg.x), " layout ", static_cast<int>(cfg.layout), " ", name(d), training ? " train" : " eval",
               affine ? " affine" : "");
          const int64_t C = cfg.x[1], M = numel(cfg.x) / C;
          const DType sd = d == DType::f64 ? DType::f64 : DType::f32;
          const uint64_t seed = next_seed();
          const Tensor w0 = make_tensor(rv(C), {C}, sd), b0 = make_tensor(rv(C), {C}, sd);
          const Tensor rm0 = make_tensor(rv(C), {C}, sd), rv0 = make_tensor(rv(C, 0.5, 2), {C}, sd);
          const Tensor gy = make_tensor(rv(numel(cfg.x)), cfg.x, d);
          auto run = [&](Device device) {
            const Tensor x = bn_input(cfg.x, d, cfg.layout, device, seed).detach().requires_grad_(true);
            const Tensor w = leaf(w0, device), b = leaf(b0, device);
            Tensor rm = clone(rm0).to(device), rvar = clone(rv0).to(device);
            const Tensor y = affine ? batch_norm(x, rm, rvar, w, b, training) : batch_norm(x, rm, rvar, {}, {}, training);
            const std::vector<Tensor> wrt = affine ? std::vector<Tensor>{x, w, b} : std::vector<Tensor>{x};
            std::vector<Tensor> r = autograd::grad({y}, wrt, {gy.to(device)});
            r.insert(r.begin(), {y, rm, rvar});
            return r;
          };
          const std::vector<Tensor> want = run(kCPU), got = run(kCuda);
          const char* what[] = {"y", "running_mean", "running_var", "dx", "dweight", "dbias"};
          for (size_t i = 0; i < want.size(); ++i)
            check_same(got[i], want[i], i < 4 ? device_tol(i == 0 || i == 3 ? d : sd) : sum_tol(d, M), what[i]);
          CHECK(got[0].strides() == want[0].strides());  // the memory format of x
          CHECK(got[3].strides() == want[3].strides());
        }
}

EMBER_CUDA_TEST_CASE("cuda batch_norm_backward: the statistics' cotangents g_mean, g_var match the CPU kernel") {
  // batch_norm() hides the batch statistics, so their cotangents are given to the primitive directly.
  for (DType d : kFloats)
    for (bool channels_last : {false, true}) {
      INFO(name(d), channels_last ? " channels-last" : "");
      const DType sd = d == DType::f64 ? DType::f64 : DType::f32;
      const Shape s{4, 5, 3, 6};
      const BnLayout layout = channels_last ? BnLayout::channels_last : BnLayout::contiguous;
      const uint64_t seed = next_seed();
      const Tensor g = make_tensor(rv(numel(s)), s, d), w = make_tensor(rv(5), {5}, sd);
      const Tensor gm = make_tensor(rv(5), {5}, sd), gv = make_tensor(rv(5), {5}, sd);
      auto on = [&](Device device) {
        const std::vector<Tensor> in{bn_input(s, d, layout, device, seed), g.to(device), w.to(device), gm.to(device),
                                     gv.to(device)};
        return run(BatchNormBackward(true, true, 1e-5), in);
      };
      const std::vector<Tensor> want = on(kCPU), got = on(kCuda);
      const char* what[] = {"dx", "dweight", "dbias"};
      for (size_t i = 0; i < 3; ++i) check_same(got[i], want[i], i == 0 ? device_tol(d) : sum_tol(d, 72), what[i]);
      CHECK(got[0].strides() == want[0].strides());
    }
}

EMBER_CUDA_TEST_CASE("cuda layer_norm: outputs and gradients match the CPU kernels") {
  // rows of 24 and 8 (a warp each) and of 1500 (a block each); 210 rows split dweight's sums over blocks
  const std::vector<std::pair<Shape, Shape>> configs = {{{5, 4, 6}, {4, 6}}, {{3, 1500}, {1500}}, {{70, 3, 8}, {8}}};
  for (const auto& [xs, ns] : configs)
    for (DType d : kFloats)
      for (bool affine : {true, false}) {
        INFO(to_string(xs), " over ", to_string(ns), " ", name(d), affine ? " affine" : "");
        const DType sd = d == DType::f64 ? DType::f64 : DType::f32;
        const Tensor x0 = make_tensor(rv(numel(xs), -3, 3), xs, d);
        const Tensor w0 = make_tensor(rv(numel(ns)), ns, sd), b0 = make_tensor(rv(numel(ns)), ns, sd);
        const Tensor gy = make_tensor(rv(numel(xs)), xs, d);
        auto run = [&](Device device) {
          const Tensor x = leaf(x0, device), w = leaf(w0, device), b = leaf(b0, device);
          const Tensor y = affine ? layer_norm(x, ns, w, b) : layer_norm(x, ns);
          const std::vector<Tensor> wrt = affine ? std::vector<Tensor>{x, w, b} : std::vector<Tensor>{x};
          std::vector<Tensor> r = autograd::grad({y}, wrt, {gy.to(device)});
          r.insert(r.begin(), y);
          return r;
        };
        const std::vector<Tensor> want = run(kCPU), got = run(kCuda);
        const char* what[] = {"y", "dx", "dweight", "dbias"};
        for (size_t i = 0; i < want.size(); ++i)
          check_same(got[i], want[i], i < 2 ? device_tol(d) : sum_tol(d, numel(xs) / numel(ns)), what[i]);
      }
}

EMBER_CUDA_TEST_CASE("cuda cross_entropy: losses and gradients match the CPU kernels") {
  struct Config {
    Shape x;
    DType target;
  };
  // rows of 5 classes (a warp each), of 1200 (a block each), and (N, C, d...) (a thread per position)
  const std::vector<Config> configs = {
      {{9, 5}, DType::i64}, {{7, 1200}, DType::i32}, {{3, 4, 5, 6}, DType::i64}, {{2, 3, 70}, DType::i32}};
  for (const Config& cfg : configs)
    for (DType d : kFloats)
      for (const char* r : {"none", "sum", "mean"})
        for (double eps : {0.0, 0.1}) {
          INFO(to_string(cfg.x), " ", name(d), " ", r, " label_smoothing ", eps);
          const int64_t C = cfg.x[1];
          Shape ts{cfg.x[0]};
          for (int i = 2; i < cfg.x.size(); ++i) ts.push_back(cfg.x[i]);
          const Tensor x0 = make_tensor(rv(numel(cfg.x), -4, 4), cfg.x, d);
          // targets in [-1, C): -1 is ignore_index
          const Tensor t = make_tensor(random_values(numel(ts), DType::i64, -1, static_cast<double>(C - 1), true, next_seed()),
                                       ts, cfg.target);
          const Tensor gy = make_tensor(rv(std::string(r) == "none" ? numel(ts) : 1), std::string(r) == "none" ? ts : Shape{}, d);
          auto run = [&](Device device) {
            const Tensor x = leaf(x0, device);
            const Tensor loss = cross_entropy(x, t.to(device), r, -1, eps);
            return std::vector<Tensor>{loss, autograd::grad({loss}, {x}, {gy.to(device)})[0]};
          };
          const std::vector<Tensor> want = run(kCPU), got = run(kCuda);
          check_same(got[0], want[0], std::string(r) == "none" ? device_tol(d) : sum_tol(d, numel(ts)), "loss");
          check_same(got[1], want[1], device_tol(d), "dlogits");
        }
  // every target ignored: the mean is 0 / 0
  const Tensor x = make_tensor(rv(6), {2, 3}, DType::f32, kCuda);
  CHECK(std::isnan(cross_entropy(x, full({2}, -1, DType::i64).to(kCuda), "mean", -1).item<float>()));
  CHECK(cross_entropy(x, full({2}, -1, DType::i64).to(kCuda), "sum", -1).item<float>() == 0.0f);
}
