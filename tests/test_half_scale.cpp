// 16-bit arithmetic at scale (issue 14): every reduction, normalisation, loss, pooling and softmax
// in f16 and bf16 over more elements than f16's largest finite value (65504), forward and backward,
// against f64 references computed from the same 16-bit-rounded inputs; gradients of 70000 repeated
// indices; scalar operands f16 cannot hold (65520, 1e-8, 0.1); an optimizer step, gradient clipping
// and loss scaling on 16-bit tensors. Each check runs on the CPU, and on a GPU in the cuda suite.
#include <cmath>
#include <functional>

#include "nn/loss.h"
#include "nn/normalization.h"
#include "nn/pooling.h"
#include "optim/adam.h"
#include "optim/amp/grad_scaler.h"
#include "optim/amp/loss_scaler.h"
#include "optim/clip_grad.h"
#include "tests/helpers.h"

using namespace ember;
using namespace ember_test;

namespace {

const std::vector<DType> kHalves = {DType::f16, DType::bf16};
// Past 65504; 2^17 + 3 is odd, so no kernel's blocks or lanes divide it evenly.
const std::vector<int64_t> kSizes = {70000, (int64_t{1} << 17) + 3};

// Tolerances from the unit roundoff u of the dtype (2^-11 for f16, 2^-8 for bf16): a value the
// library computes in f32 or wider and rounds once to the 16-bit dtype lies within u·|ref| of the
// exact ref, plus eta, half the smallest subnormal, where it lands below the normal range
// (fl(x) = x(1 + d) + e, |d| <= u, |e| <= eta: Higham, "Accuracy and Stability of Numerical
// Algorithms", 2nd ed., §2.1). Before that rounding, `ops` f32 operations and a sum over `terms`
// elements add at most (ops·2^-24 + terms·a)·magnitude, a the accumulator's unit roundoff (2^-53:
// the CPU kernels accumulate in double; 2^-24: the CUDA kernels in float) and magnitude the sum of
// the absolute values the arithmetic went through (Higham §4.2, recursive summation's bound
// gamma_{n-1}·sum|x_i|). `rounded_inputs` counts the 16-bit values a formula reads that were
// rounded themselves (a backward reading its saved 16-bit output), each worth u·magnitude. None of
// these was widened to make a result pass.
struct ErrorModel {
  int ops = 0;
  int64_t terms = 0;
  int rounded_inputs = 0;
};

double unit_roundoff(DType d) { return d == DType::f16 ? 0x1p-11 : d == DType::bf16 ? 0x1p-8 : 0x1p-24; }
double eta(DType d) { return d == DType::f16 ? 0x1p-25 : d == DType::bf16 ? 0x1p-134 : 0x1p-150; }
double accumulator_roundoff(Device d) { return d.is_cpu() ? 0x1p-53 : 0x1p-24; }

double allowed(DType dt, Device device, double ref, double magnitude, ErrorModel m) {
  const double u = unit_roundoff(dt);
  return u * (std::fabs(ref) + m.rounded_inputs * magnitude) + eta(dt) +
         (m.ops * 0x1p-24 + static_cast<double>(m.terms) * accumulator_roundoff(device)) * magnitude;
}

// `got` against the exact values `ref`, each within tol[i]; where ref is beyond the dtype's range
// the result must be the infinity storing it gives (PyTorch agrees: the sum of 70000 f16 ones is inf).
void check_within(const Tensor& got, const std::vector<double>& ref, const std::vector<double>& tol,
                  const std::string& what) {
  INFO(what);
  REQUIRE(got.numel() == static_cast<int64_t>(ref.size()));
  const std::vector<double> g = got.to_vector<double>();
  const std::vector<double> stored =
      from_vector(ref, {static_cast<int64_t>(ref.size())}).to(got.dtype()).to_vector<double>();
  for (size_t i = 0; i < g.size(); ++i) {
    const bool overflows = std::isinf(stored[i]) && !std::isinf(ref[i]);
    if (std::isnan(ref[i]) ? std::isnan(g[i]) : std::isinf(ref[i]) ? g[i] == ref[i]
        : overflows ? g[i] == stored[i] : std::fabs(g[i] - ref[i]) <= tol[i])
      continue;
    FAIL_CHECK("element ", i, " of ", g.size(), ": got ", g[i], ", expected ", ref[i], " (allowed error ", tol[i], ")");
    return;
  }
  CHECK(true);
}

// check_within with allowed() as the tolerance; an empty `magnitude` means |ref|.
void check_close(const Tensor& got, const std::vector<double>& ref, const std::vector<double>& magnitude, ErrorModel m,
                 const std::string& what) {
  std::vector<double> tol(ref.size());
  for (size_t i = 0; i < ref.size(); ++i)
    tol[i] = allowed(got.dtype(), got.device(), ref[i], magnitude.empty() ? std::fabs(ref[i]) : magnitude[i], m);
  check_within(got, ref, tol, what);
}
void check_close(const Tensor& got, double ref, double magnitude, ErrorModel m, const std::string& what) {
  check_close(got, std::vector<double>{ref}, std::vector<double>{magnitude}, m, what);
}

// A 16-bit tensor on `device` and its exact values (the f64 draws rounded to the dtype).
struct Input {
  Tensor t;
  std::vector<double> v;
};
Input input(const Shape& shape, DType dt, Device device, double lo, double hi, uint64_t seed, bool grad = true) {
  Tensor t = make_tensor(random_values(numel(shape), DType::f64, lo, hi, false, seed), shape, dt, device);
  if (grad) t.requires_grad_(true);
  return {t, t.to_vector<double>()};
}

std::string label(const char* op, DType dt, int64_t n) { return std::string(op) + " " + name(dt) + " n=" + std::to_string(n); }

double sum_of(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return s;
}
double abs_sum(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += std::fabs(x);
  return s;
}

// ---- sum, mean, var, std, norm, logsumexp over all elements, forward and backward

void check_full_reductions(Device device) {
  for (DType dt : kHalves)
    for (int64_t n : kSizes) {
      const double N = static_cast<double>(n);
      // Positive values around 1: every sum of them passes 65504.
      Input x = input({n}, dt, device, 0.5, 1.5, 1000 + n);
      const double s = sum_of(x.v), a = abs_sum(x.v), m = s / N;

      Tensor y = sum(x.t);
      check_close(y, s, a, {0, n}, label("sum", dt, n));
      y.backward();
      check_close(x.t.grad(), std::vector<double>(n, 1.0), {}, {}, label("sum backward", dt, n));

      x.t.set_grad(Tensor());
      y = mean(x.t);
      check_close(y, m, a / N, {2, n}, label("mean", dt, n));
      y.backward();
      check_close(x.t.grad(), std::vector<double>(n, 1.0 / N), {}, {1}, label("mean backward", dt, n));

      double q = 0, d1 = 0;
      for (double v : x.v) {
        q += (v - m) * (v - m);
        d1 += std::fabs(v - m);
      }
      const double var_ref = q / (N - 1), std_ref = std::sqrt(var_ref);
      std::vector<double> dvar(n), dstd(n), mag(n);
      for (int64_t i = 0; i < n; ++i) {
        dvar[i] = 2 * (x.v[i] - m) / (N - 1);
        dstd[i] = (x.v[i] - m) / ((N - 1) * std_ref);
        mag[i] = 2 * (std::fabs(x.v[i] - m) + d1 / N) / (N - 1);  // the centring's share included
      }
      x.t.set_grad(Tensor());
      y = var(x.t);
      // The mean's error cancels to first order; the sum of squares is over n terms.
      check_close(y, var_ref, var_ref, {4, n}, label("var", dt, n));
      y.backward();
      check_close(x.t.grad(), dvar, mag, {6, n}, label("var backward", dt, n));
      x.t.set_grad(Tensor());
      y = ember::std(x.t);
      check_close(y, std_ref, std_ref, {5, n}, label("std", dt, n));
      y.backward();
      for (double& v : mag) v /= 2 * std_ref;
      check_close(x.t.grad(), dstd, mag, {8, n}, label("std backward", dt, n));

      double sq = 0;
      for (double v : x.v) sq += v * v;
      const double n2 = std::sqrt(sq);
      x.t.set_grad(Tensor());
      y = norm(x.t);
      check_close(y, n2, n2, {2, n}, label("norm 2", dt, n));
      y.backward();
      std::vector<double> dn(n);
      for (int64_t i = 0; i < n; ++i) dn[i] = x.v[i] / n2;
      check_close(x.t.grad(), dn, {}, {4, n}, label("norm 2 backward", dt, n));
      x.t.set_grad(Tensor());
      y = norm(x.t, 1.0);
      check_close(y, a, a, {0, n}, label("norm 1", dt, n));
      y.backward();
      check_close(x.t.grad(), std::vector<double>(n, 1.0), {}, {}, label("norm 1 backward", dt, n));

      double mx = -INFINITY;
      for (double v : x.v) mx = std::max(mx, v);
      double se = 0;
      for (double v : x.v) se += std::exp(v - mx);
      const double lse = mx + std::log(se);
      x.t.set_grad(Tensor());
      y = logsumexp(x.t, {0});
      check_close(y, lse, lse, {4, n}, label("logsumexp", dt, n));
      y.backward();
      std::vector<double> sm(n);
      for (int64_t i = 0; i < n; ++i) sm[i] = std::exp(x.v[i] - lse);
      check_close(x.t.grad(), sm, {}, {6, n}, label("logsumexp backward", dt, n));
    }
}

// prod over values 1 + k·(the dtype's spacing at 1), k in {-1, 0, 1}: the product stays in range,
// and its gradient prod / x_i is a product of n - 1 of them.
void check_prod(Device device) {
  for (DType dt : kHalves)
    for (int64_t n : kSizes) {
      const double step = 2 * unit_roundoff(dt);
      std::vector<double> v = random_values(n, DType::f64, -1, 1, true, 2000 + n);
      for (double& k : v) k = 1 + k * step;
      Tensor x = make_tensor(v, {n}, dt, device);
      x.requires_grad_(true);
      double p = 1;
      for (double e : v) p *= e;
      Tensor y = prod(x);
      check_close(y, p, p, {0, n}, label("prod", dt, n));
      y.backward();
      std::vector<double> d(n);
      for (int64_t i = 0; i < n; ++i) d[i] = p / v[i];
      check_close(x.grad(), d, {}, {2, n}, label("prod backward", dt, n));
    }
}

// amax / amin of n equal values: every element ties, and each gets 1/n of the gradient.
void check_extremum_ties(Device device) {
  for (DType dt : kHalves)
    for (int64_t n : kSizes)
      for (bool is_max : {true, false}) {
        Tensor x = full({n}, 3.0, TensorOptions(dt).with_device(device).with_requires_grad());
        Tensor y = is_max ? amax(x) : amin(x);
        check_close(y, 3.0, 3.0, {}, label(is_max ? "amax" : "amin", dt, n));
        y.backward();
        check_close(x.grad(), std::vector<double>(n, 1.0 / static_cast<double>(n)), {}, {1},
                    label(is_max ? "amax backward" : "amin backward", dt, n));
      }
}

// mean over one dim of n: rows (the reduced dim innermost) and columns (outermost).
void check_mean_dims(Device device) {
  constexpr int64_t kOther = 3;
  for (DType dt : kHalves)
    for (int64_t n : kSizes)
      for (bool rows : {true, false}) {
        const Shape shape = rows ? Shape{kOther, n} : Shape{n, kOther};
        Input x = input(shape, dt, device, 0.5, 1.5, 3000 + n + rows);
        std::vector<double> s(kOther, 0.0);
        for (int64_t i = 0; i < n; ++i)
          for (int64_t j = 0; j < kOther; ++j) s[j] += x.v[rows ? j * n + i : i * kOther + j];
        std::vector<double> ref(kOther);
        for (int64_t j = 0; j < kOther; ++j) ref[j] = s[j] / static_cast<double>(n);
        Tensor y = mean(x.t, {rows ? 1 : 0});
        const std::string what = label(rows ? "mean over rows" : "mean over columns", dt, n);
        check_close(y, ref, std::vector<double>(kOther, 1.5), {2, n}, what);
        sum(y).backward();
        check_close(x.t.grad(), std::vector<double>(kOther * n, 1.0 / static_cast<double>(n)), {}, {1},
                    what + " backward");
      }
}

// ---- softmax and log_softmax along a dim of n, as rows (the dim innermost) and as columns;
// backward of sum(w * y)

void check_softmax(Device device) {
  constexpr int64_t kOther = 2;
  for (DType dt : kHalves)
    for (int64_t n : kSizes)
      for (bool log : {false, true})
        for (bool rows : {true, false}) {
          const Shape shape = rows ? Shape{kOther, n} : Shape{n, kOther};
          const int dim = rows ? 1 : 0;
          auto at = [&](int64_t k, int64_t i) { return rows ? k * n + i : i * kOther + k; };
          Input x = input(shape, dt, device, -4, 4, 4000 + n);
          Input w = input(shape, dt, device, 0.5, 1.5, 5000 + n, false);  // sum(w) passes 65504
          std::vector<double> y(kOther * n), ymag(kOther * n), dx(kOther * n), dtol(kOther * n);
          for (int64_t k = 0; k < kOther; ++k) {
            double mx = -INFINITY;
            for (int64_t i = 0; i < n; ++i) mx = std::max(mx, x.v[at(k, i)]);
            double se = 0;
            for (int64_t i = 0; i < n; ++i) se += std::exp(x.v[at(k, i)] - mx);
            const double lse = mx + std::log(se);
            double wy = 0, wy_abs = 0, wsum = 0;
            for (int64_t i = 0; i < n; ++i) {
              const double p = std::exp(x.v[at(k, i)] - lse);
              wy += w.v[at(k, i)] * p;
              wy_abs += std::fabs(w.v[at(k, i)]) * p;
              wsum += w.v[at(k, i)];
            }
            for (int64_t i = 0; i < n; ++i) {
              const int64_t e = at(k, i);
              const double p = std::exp(x.v[e] - lse), wi = w.v[e];
              y[e] = log ? x.v[e] - lse : p;
              ymag[e] = log ? std::fabs(x.v[e] - mx) + std::log(se) : p;
              // softmax: dx = y (w - sum(w y)); log_softmax: dx = w - exp(y) sum(w). Both read the
              // saved 16-bit output y: each y_j within u·|y_j| + eta, which for log_softmax's
              // exp(y) is a relative u·|y_j|.
              dx[e] = log ? wi - p * wsum : p * (wi - wy);
              const double mag = log ? std::fabs(wi) + p * wsum * (1 + std::fabs(y[e])) : p * (std::fabs(wi) + wy_abs);
              const double from_eta = log ? 0 : eta(dt) * (std::fabs(wi) + wy_abs + p * wsum);  // w > 0
              dtol[e] = allowed(dt, device, dx[e], mag, {8, n, log ? 1 : 2}) + from_eta;
            }
          }
          const std::string what = label(log ? "log_softmax" : "softmax", dt, n) + (rows ? " rows" : " columns");
          Tensor out = log ? log_softmax(x.t, dim) : softmax(x.t, dim);
          check_close(out, y, ymag, {4, n}, what);
          sum(out * w.t).backward();
          check_within(x.t.grad(), dx, dtol, what + " backward");
        }
}

// ---- layer norm over rows of n, batch norm with n values per channel (both layouts of (N, C, S))

void check_layer_norm(Device device) {
  constexpr int64_t kRows = 2;
  for (DType dt : kHalves)
    for (int64_t n : kSizes) {
      Input x = input({kRows, n}, dt, device, -3, 5, 6000 + n);
      Input w = input({n}, dt, device, 0.5, 1.5, 6100 + n);
      Input b = input({n}, dt, device, -1, 1, 6200 + n);
      Input g = input({kRows, n}, dt, device, -1, 1, 6300 + n, false);
      const double eps = 1e-5, N = static_cast<double>(n);
      std::vector<double> y(kRows * n), ymag(kRows * n), dx(kRows * n), dxmag(kRows * n), dw(n, 0.0), db(n, 0.0),
          dwmag(n, 0.0), dbmag(n, 0.0);
      for (int64_t r = 0; r < kRows; ++r) {
        const double* xr = &x.v[r * n];
        const double* gr = &g.v[r * n];
        double m = 0;
        for (int64_t j = 0; j < n; ++j) m += xr[j];
        m /= N;
        double q = 0;
        for (int64_t j = 0; j < n; ++j) q += (xr[j] - m) * (xr[j] - m);
        const double rstd = 1 / std::sqrt(q / N + eps);
        // An error in the statistics shifts xhat by up to the accumulation's error times mean |x| · rstd.
        double shift = 0;
        for (int64_t j = 0; j < n; ++j) shift += std::fabs(xr[j]) / N * rstd;
        double mg = 0, mgx = 0, mg_abs = 0, mgx_abs = 0;
        for (int64_t j = 0; j < n; ++j) {
          const double xh = (xr[j] - m) * rstd, gw = gr[j] * w.v[j];
          y[r * n + j] = xh * w.v[j] + b.v[j];
          ymag[r * n + j] = (std::fabs(xh) + shift) * std::fabs(w.v[j]) + std::fabs(b.v[j]);
          mg += gw / N;
          mgx += gw * xh / N;
          mg_abs += std::fabs(gw) / N;
          mgx_abs += std::fabs(gw * xh) / N;
          dw[j] += gr[j] * xh;
          db[j] += gr[j];
          dwmag[j] += std::fabs(gr[j] * xh);
          dbmag[j] += std::fabs(gr[j]);
        }
        for (int64_t j = 0; j < n; ++j) {
          const double xh = (xr[j] - m) * rstd, gw = gr[j] * w.v[j];
          dx[r * n + j] = rstd * (gw - mg - xh * mgx);
          dxmag[r * n + j] = rstd * (std::fabs(gw) + mg_abs + (std::fabs(xh) + shift) * mgx_abs);
        }
      }
      const std::string what = label("layer_norm", dt, n);
      Tensor out = layer_norm(x.t, {n}, w.t, b.t, eps);
      // The statistics carry the accumulation's error into every output through rstd.
      check_close(out, y, ymag, {6, 2 * n}, what);
      out.backward(g.t);
      check_close(x.t.grad(), dx, dxmag, {10, 2 * n}, what + " backward: input");
      check_close(w.t.grad(), dw, dwmag, {6, 2 * n}, what + " backward: weight");
      check_close(b.t.grad(), db, dbmag, {0, kRows}, what + " backward: bias");
    }
}

void check_batch_norm(Device device) {
  constexpr int64_t kChannels = 2;
  for (DType dt : kHalves)
    for (int64_t n : kSizes)
      for (bool spatial : {true, false}) {
        // (1, C, n): a channel's n values are one spatial run; (n, C): one value per image.
        const Shape shape = spatial ? Shape{1, kChannels, n} : Shape{n, kChannels};
        auto at = [&](int64_t c, int64_t i) { return spatial ? c * n + i : i * kChannels + c; };
        Input x = input(shape, dt, device, -3, 5, 7000 + n);
        Input g = input(shape, dt, device, -1, 1, 7100 + n, false);
        Input w = input({kChannels}, DType::f32, device, 0.5, 1.5, 7200 + n);
        Input b = input({kChannels}, DType::f32, device, -1, 1, 7300 + n);
        Tensor rm = make_tensor({0.5, -0.25}, {kChannels}, dt, device);  // 16-bit running statistics
        Tensor rv = make_tensor({2.0, 0.75}, {kChannels}, dt, device);
        const std::vector<double> rm0 = rm.to_vector<double>(), rv0 = rv.to_vector<double>();
        const double eps = 1e-5, momentum = 0.1, N = static_cast<double>(n);
        std::vector<double> y(kChannels * n), ymag(kChannels * n), dx(kChannels * n), dxmag(kChannels * n),
            dw(kChannels), db(kChannels), dwmag(kChannels), dbmag(kChannels), rm1(kChannels), rv1(kChannels);
        for (int64_t c = 0; c < kChannels; ++c) {
          double m = 0;
          for (int64_t i = 0; i < n; ++i) m += x.v[at(c, i)];
          m /= N;
          double q = 0;
          for (int64_t i = 0; i < n; ++i) q += (x.v[at(c, i)] - m) * (x.v[at(c, i)] - m);
          const double rstd = 1 / std::sqrt(q / N + eps);
          rm1[c] = (1 - momentum) * rm0[c] + momentum * m;
          rv1[c] = (1 - momentum) * rv0[c] + momentum * q / (N - 1);
          double shift = 0;  // as in check_layer_norm
          for (int64_t i = 0; i < n; ++i) shift += std::fabs(x.v[at(c, i)]) / N * rstd;
          double sg = 0, sgx = 0, sg_abs = 0, sgx_abs = 0;
          for (int64_t i = 0; i < n; ++i) {
            const double xh = (x.v[at(c, i)] - m) * rstd, gv = g.v[at(c, i)];
            y[at(c, i)] = xh * w.v[c] + b.v[c];
            ymag[at(c, i)] = (std::fabs(xh) + shift) * std::fabs(w.v[c]) + std::fabs(b.v[c]);
            sg += gv;
            sgx += gv * xh;
            sg_abs += std::fabs(gv);
            sgx_abs += std::fabs(gv * xh);
          }
          dw[c] = sgx;
          db[c] = sg;
          dwmag[c] = sgx_abs;
          dbmag[c] = sg_abs;
          for (int64_t i = 0; i < n; ++i) {
            const double xh = (x.v[at(c, i)] - m) * rstd, gv = g.v[at(c, i)];
            dx[at(c, i)] = w.v[c] * rstd * (gv - sg / N - xh * sgx / N);
            dxmag[at(c, i)] = w.v[c] * rstd * (std::fabs(gv) + sg_abs / N + (std::fabs(xh) + shift) * sgx_abs / N);
          }
        }
        const std::string what = label("batch_norm", dt, n) + (spatial ? " (1, C, n)" : " (n, C)");
        Tensor out = batch_norm(x.t, rm, rv, w.t, b.t, /*training=*/true, momentum, eps);
        check_close(out, y, ymag, {6, n}, what);
        check_close(rm, rm1, {}, {4, n}, what + ": running_mean");
        check_close(rv, rv1, {}, {6, n}, what + ": running_var");
        out.backward(g.t);
        check_close(x.t.grad(), dx, dxmag, {10, n}, what + " backward: input");
        // f32 weight and bias: f32 gradients, held to f32's unit roundoff.
        check_close(w.t.grad(), dw, dwmag, {6, n}, what + " backward: weight");
        check_close(b.t.grad(), db, dbmag, {0, n}, what + " backward: bias");
      }
}

// ---- losses with n positions: the mean's divisor is n (or the kept count)

void check_losses(Device device) {
  constexpr int64_t kClasses = 3;
  for (DType dt : kHalves)
    for (int64_t n : kSizes) {
      const double N = static_cast<double>(n);
      Input x = input({n, kClasses}, dt, device, -2, 2, 8000 + n);
      std::vector<double> tv = random_values(n, DType::i64, 0, kClasses - 1, true, 8100 + n);
      for (int64_t i = 0; i < n; i += 7) tv[i] = -100;  // ignored: left out of the mean's divisor
      const Tensor target = make_tensor(tv, {n}, DType::i64, device);
      double kept = 0, total = 0, total_abs = 0;
      std::vector<double> lse(n, 0.0);
      for (int64_t i = 0; i < n; ++i) {
        double mx = -INFINITY, se = 0;
        for (int64_t c = 0; c < kClasses; ++c) mx = std::max(mx, x.v[i * kClasses + c]);
        for (int64_t c = 0; c < kClasses; ++c) se += std::exp(x.v[i * kClasses + c] - mx);
        lse[i] = mx + std::log(se);
        if (tv[i] < 0) continue;
        kept += 1;
        const double loss = lse[i] - x.v[i * kClasses + static_cast<int64_t>(tv[i])];
        total += loss;
        total_abs += std::fabs(loss);
      }
      // d mean / d logits = (softmax - onehot) / kept on the kept rows.
      std::vector<double> dce(n * kClasses, 0.0), dnll(n * kClasses, 0.0), dmag(n * kClasses, 0.0);
      for (int64_t i = 0; i < n; ++i) {
        if (tv[i] < 0) continue;
        for (int64_t c = 0; c < kClasses; ++c) {
          const double p = std::exp(x.v[i * kClasses + c] - lse[i]), hit = c == tv[i] ? 1.0 : 0.0;
          dce[i * kClasses + c] = (p - hit) / kept;
          dmag[i * kClasses + c] = (p + hit) / kept;
          dnll[i * kClasses + c] = -hit / kept;
        }
      }
      for (bool recorded : {false, true}) {  // the fused backward kernel, or public ops (create_graph)
        const std::string what = label("cross_entropy", dt, n) + (recorded ? " (create_graph)" : "");
        x.t.set_grad(Tensor());
        Tensor loss = cross_entropy(x.t, target);
        check_close(loss, total / kept, total_abs / kept, {4, n}, what);
        loss.backward({}, false, recorded);
        // At most 8 f32 operations an element: softmax's exp and scaling, the target's subtraction,
        // g / count and the product with it, each worth 2^-24 of (p + hit) / kept.
        check_close(x.t.grad(), dce, dmag, {8, kClasses}, what + " backward");
      }
      x.t.set_grad(Tensor());
      // nll_loss of the logits taken as log-probabilities: its value is -mean(x[target]).
      double nll = 0, nll_abs = 0;
      for (int64_t i = 0; i < n; ++i)
        if (tv[i] >= 0) {
          nll -= x.v[i * kClasses + static_cast<int64_t>(tv[i])];
          nll_abs += std::fabs(x.v[i * kClasses + static_cast<int64_t>(tv[i])]);
        }
      Tensor loss = nll_loss(x.t, target);
      check_close(loss, nll / kept, nll_abs / kept, {2, n}, label("nll_loss", dt, n));
      loss.backward();
      check_close(x.t.grad(), dnll, {}, {1}, label("nll_loss backward", dt, n));

      Input a = input({n}, dt, device, -2, 2, 8200 + n), b = input({n}, dt, device, -2, 2, 8300 + n, false);
      double mse = 0;
      std::vector<double> dmse(n);
      for (int64_t i = 0; i < n; ++i) {
        mse += (a.v[i] - b.v[i]) * (a.v[i] - b.v[i]) / N;
        dmse[i] = 2 * (a.v[i] - b.v[i]) / N;
      }
      loss = mse_loss(a.t, b.t);
      check_close(loss, mse, mse, {4, n}, label("mse_loss", dt, n));
      loss.backward();
      check_close(a.t.grad(), dmse, {}, {3}, label("mse_loss backward", dt, n));
    }
}

// ---- average pooling whose window holds more than 65504 elements

void check_avg_pool(Device device) {
  for (DType dt : kHalves)
    for (int64_t side : {265, 363}) {  // 70225 and 131769 elements per window
      const int64_t n = side * side;
      Input x = input({1, 2, side, side}, dt, device, 0.5, 1.5, 9000 + side);
      std::vector<double> ref(2, 0.0), sums(2, 0.0);
      for (int64_t c = 0; c < 2; ++c)
        for (int64_t i = 0; i < n; ++i) sums[c] += x.v[c * n + i];
      for (int64_t c = 0; c < 2; ++c) ref[c] = sums[c] / static_cast<double>(n);
      for (bool adaptive : {true, false}) {
        x.t.set_grad(Tensor());
        Tensor y = adaptive ? adaptive_avg_pool2d(x.t, {1, 1}) : avg_pool2d(x.t, {side, side});
        const std::string what = label(adaptive ? "adaptive_avg_pool2d" : "avg_pool2d", dt, n);
        check_close(y, ref, ref, {1, n}, what);
        sum(y).backward();
        check_close(x.t.grad(), std::vector<double>(2 * n, 1.0 / static_cast<double>(n)), {}, {1}, what + " backward");
      }
    }
}

// ---- repeated indices: index_select's (embedding's) and gather's gradients add up their repeats,
// 70000 picks of one place with gradient 0.5 each to 35000 (a 16-bit running sum would stop at
// 1024 in f16, 128 in bf16, where adding 0.5 rounds back).

void check_repeated_indices(Device device) {
  constexpr int64_t n = 70000;
  const Tensor index = zeros({n}, TensorOptions(DType::i64).with_device(device));
  for (DType dt : kHalves) {
    Tensor w = zeros({3, 4}, TensorOptions(dt).with_device(device).with_requires_grad());
    sum(index_select(w, 0, index) * 0.5).backward();
    std::vector<double> ref(12, 0.0);
    for (int j = 0; j < 4; ++j) ref[j] = 0.5 * n;
    // The index_add kernels add in f32: n operations.
    check_close(w.grad(), ref, {}, {static_cast<int>(n)}, std::string("index_select backward, repeats ") + name(dt));
    Tensor x = zeros({1, 4}, TensorOptions(dt).with_device(device).with_requires_grad());
    sum(gather(x, 1, index.reshape({1, n})) * 0.5).backward();
    check_close(x.grad(), {0.5 * n, 0, 0, 0}, {}, {static_cast<int>(n)}, std::string("gather backward, repeats ") + name(dt));
  }
}

// ---- scalar operands: 65520 (inf in f16), 1e-8 (0 in f16), 0.1 (0.0999756 in f16)

struct ScalarCase {
  const char* what;
  double lo, hi;
  std::function<double(double)> ref;
  std::function<Tensor(const Tensor&)> run;
};

void check_scalar_operands(Device device) {
  const std::vector<ScalarCase> cases = {
      {"x + 65520", -65000, -100, [](double x) { return x + 65520; }, [](const Tensor& x) { return x + 65520.0; }},
      {"65520 - x", 100, 65000, [](double x) { return 65520 - x; }, [](const Tensor& x) { return 65520.0 - x; }},
      {"x / 65520", -60000, 60000, [](double x) { return x / 65520; }, [](const Tensor& x) { return x / 65520.0; }},
      {"x * 1e-8", 1000, 60000, [](double x) { return x * 1e-8; }, [](const Tensor& x) { return x * 1e-8; }},
      {"x * 0.1", -100, 100, [](double x) { return x * 0.1; }, [](const Tensor& x) { return x * 0.1; }},
      {"x - 0.1", -1, 1, [](double x) { return x - 0.1; }, [](const Tensor& x) { return x - 0.1; }},
      {"0.1 / x", 0.5, 100, [](double x) { return 0.1 / x; }, [](const Tensor& x) { return 0.1 / x; }},
      {"x * 70000 (an integer)", -0.9, 0.9, [](double x) { return x * 70000; },
       [](const Tensor& x) { return x * 70000; }},
      {"add_(x, 65520)", -65000, -100, [](double x) { return x + 65520; },
       [](const Tensor& x) { Tensor c = x.clone(); return add_(c, 65520.0); }},
      {"mul_(x, 1e-8)", 1000, 60000, [](double x) { return x * 1e-8; },
       [](const Tensor& x) { Tensor c = x.clone(); return mul_(c, 1e-8); }},
      {"div_(x, 0.1)", -100, 100, [](double x) { return x / 0.1; },
       [](const Tensor& x) { Tensor c = x.clone(); return div_(c, 0.1); }},
      {"x * 65536 (an f32 scalar tensor)", -0.9, 0.9, [](double x) { return x * 65536; },
       [](const Tensor& x) { return x * scalar_tensor(65536.0, TensorOptions(DType::f32).with_device(x.device())); }},
      {"add_(x, an f32 tensor of 65520s)", -65000, -100, [](double x) { return x + 65520; },
       [](const Tensor& x) {
         Tensor c = x.clone();
         return add_(c, full(x.shape(), 65520.0, TensorOptions(DType::f32).with_device(x.device())));
       }},
  };
  for (DType dt : kHalves)
    for (const ScalarCase& c : cases) {
      Input x = input({70000}, dt, device, c.lo, c.hi, 10000, false);
      std::vector<double> ref(x.v.size());
      for (size_t i = 0; i < ref.size(); ++i) ref[i] = c.ref(x.v[i]);
      // One f32 operation (the scalar's own rounding to f32 is a second) before the final rounding.
      check_close(c.run(x.t), ref, {}, {2}, std::string(c.what) + " " + name(dt));
    }
  for (DType dt : kHalves) {
    // Comparisons are exact: x == 0.1 is false for every 16-bit x; 0.0999756 (f16) < 0.1 < 0.1000977 (bf16).
    std::vector<double> v = random_values(70000, DType::f64, -1, 1, false, 10100);
    for (size_t i = 0; i < v.size(); i += 5) v[i] = 0.1;
    Tensor x = make_tensor(v, {70000}, dt, device);
    const std::vector<double> xv = x.to_vector<double>();
    const std::vector<double> eq01 = eq(x, 0.1).to_vector<double>(), gt01 = gt(x, 0.1).to_vector<double>(),
                              le01 = le(scalar_tensor(0.1, TensorOptions(DType::f64).with_device(device)), x)
                                         .to_vector<double>();  // a 0-dim f64 tensor on the left
    int64_t wrong = 0;
    for (size_t i = 0; i < xv.size(); ++i)
      wrong += (eq01[i] != (xv[i] == 0.1)) + (gt01[i] != (xv[i] > 0.1)) + (le01[i] != (0.1 <= xv[i]));
    CHECK_MESSAGE(wrong == 0, "comparisons with 0.1 ", name(dt), ": ", wrong, " wrong");

    // Gradients through scalar operands: d(x / 65520) = 1/65520, and clamp(x, 0.1) passes none
    // where x (0.0999756 in f16, 0.1000977 in bf16) was clamped or at the bound, i.e. x <= 0.1.
    Tensor xg = x.detach();
    xg.requires_grad_(true);
    sum(xg / 65520.0).backward();
    check_close(xg.grad(), std::vector<double>(xv.size(), 1.0 / 65520), {}, {2}, std::string("x / 65520 backward ") + name(dt));
    xg.set_grad(Tensor());
    sum(clamp(xg, 0.1, std::nullopt)).backward();
    const std::vector<double> gc = xg.grad().to_vector<double>();
    int64_t clamp_wrong = 0;
    for (size_t i = 0; i < xv.size(); ++i) clamp_wrong += gc[i] != (xv[i] > 0.1 ? 1.0 : 0.0);
    CHECK_MESSAGE(clamp_wrong == 0, "clamp(x, 0.1) backward ", name(dt), ": ", clamp_wrong, " wrong");

    // A 0-dim f32 tensor that requires grad times a 16-bit tensor: its gradient, sum(x) over 70000
    // values near 1, passes 65504.
    Input y = input({70000}, dt, device, 0.5, 1.5, 10200, false);
    Tensor w = scalar_tensor(1.5, TensorOptions(DType::f32).with_device(device).with_requires_grad());
    sum(y.t * w).backward();
    check_close(w.grad(), sum_of(y.v), abs_sum(y.v), {0, 70000}, std::string("d sum(x * w) / dw, w f32 ") + name(dt));
  }
}

// ---- optimizers, clipping and loss scaling on 16-bit tensors

// One Adam step from zero state on 16-bit parameters, eps 1e-8 (0 in f16) mattering: gradients
// small enough that the stored second moment v = (1 - b2) g^2 underflows to 0 in f16, leaving
// eps as the whole denominator. Reference: PyTorch's formula with m and v rounded to the dtype
// where the kernel stores them.
void check_adam_eps(Device device) {
  for (DType dt : kHalves) {
    const int64_t n = 70000;
    Input p = input({n}, dt, device, -1, 1, 11000, false);
    Input g = input({n}, dt, device, 1e-4, 2e-4, 11100, false);
    Tensor param = p.t.detach();
    param.requires_grad_(true);
    param.set_grad(g.t);
    const double lr = 1e-6, b1 = 0.9, b2 = 0.999, eps = 1e-8;
    optim::Adam adam({param}, {.lr = lr, .beta1 = b1, .beta2 = b2, .eps = eps});
    adam.step();
    const std::vector<double> m = make_tensor([&] {
      std::vector<double> r(n);
      for (int64_t i = 0; i < n; ++i) r[i] = (1 - b1) * g.v[i];
      return r;
    }(), {n}, dt).to_vector<double>();
    const std::vector<double> v = make_tensor([&] {
      std::vector<double> r(n);
      for (int64_t i = 0; i < n; ++i) r[i] = (1 - b2) * g.v[i] * g.v[i];
      return r;
    }(), {n}, dt).to_vector<double>();
    std::vector<double> ref(n), mag(n);
    const double c1 = 1 - b1, c2 = 1 - b2;
    for (int64_t i = 0; i < n; ++i) {
      const double update = lr / c1 * m[i] / (std::sqrt(v[i]) / std::sqrt(c2) + eps);
      ref[i] = p.v[i] - update;
      mag[i] = std::fabs(p.v[i]) + std::fabs(update);
    }
    // Six f32 operations; m may round differently through f32 than straight from f64 (a double
    // rounding the kernel's store makes), worth u·|update|.
    check_close(param.detach(), ref, mag, {6, 0, 1}, std::string("Adam step, eps 1e-8, ") + name(dt));
  }
}

// clip_grad_norm_ of many 16-bit gradients whose total norm passes 65504: the clip coefficient
// (about 3e-9 here: 0 in f16) scales them in f32 and each is rounded once.
void check_clip_grad_norm(Device device) {
  for (DType dt : kHalves) {
    std::vector<Tensor> params;
    std::vector<std::vector<double>> grads;
    double sq = 0;
    for (int64_t k = 0; k < 3; ++k) {
      Input g = input({70000}, dt, device, 500, 1000, 12000 + k, false);
      Tensor p = zeros({70000}, TensorOptions(dt).with_device(device).with_requires_grad());
      p.set_grad(g.t);
      params.push_back(p);
      grads.push_back(g.v);
      for (double x : g.v) sq += x * x;
    }
    const double total = std::sqrt(sq), max_norm = 1e-3, coef = max_norm / (total + 1e-6);
    const Tensor got = optim::clip_grad_norm_(params, max_norm);
    check_close(got, total, total, {2, 3 * 70000}, std::string("total gradient norm (f32) ") + name(dt));
    for (size_t k = 0; k < params.size(); ++k) {
      std::vector<double> ref(grads[k].size());
      for (size_t i = 0; i < ref.size(); ++i) ref[i] = grads[k][i] * coef;
      check_close(params[k].grad(), ref, {}, {4, 3 * 70000}, std::string("clipped gradient ") + name(dt));
    }
  }
}

// The loss scalers' default scale 2^16 = 65536 is beyond f16's range: scaling a 16-bit loss
// tensor multiplies in f32 and rounds the product once (finite for losses below 0.99).
void check_loss_scaling(Device device) {
  for (DType dt : kHalves) {
    Input loss = input({70000}, dt, device, 0.001, 0.99, 13000, false);
    std::vector<double> ref(loss.v.size());
    for (size_t i = 0; i < ref.size(); ++i) ref[i] = loss.v[i] * 65536;
    amp::GradScaler grad_scaler;
    check_close(grad_scaler.scale(loss.t), ref, {}, {1}, std::string("GradScaler.scale ") + name(dt));
    amp::DynamicLossScaler loss_scaler;
    check_close(loss_scaler.scale(loss.t), ref, {}, {1}, std::string("DynamicLossScaler.scale ") + name(dt));
  }
}

// ---- elementwise gradients at the 16-bit range edges

// Values at the edges of f16's range, and ordinary ones: near its largest finite value, past 256
// (whose square passes 65504), near 2^-10 (the cube of whose reciprocal nears 2^30), at the smallest
// normal, a subnormal, and 1, -2.5, 0.3. bfloat16 takes the same values: in it they test the
// rounding of intermediates, not their range. Its own limits are f32's, where f32 intermediates hold
// only what stays in range (0.001 * 2^128 / 0.3 is a bf16 value whose 2^128 / 0.3 is not an f32 one).
std::vector<double> edge_values() {
  const double max = 65504, tiny = 0x1p-14;
  return {0.9 * max, -0.5 * max, 300, -501, 0.0010004, -0.003, tiny, 3 * tiny, tiny / 8, 1, -2.5, 0.3};
}
const std::vector<double> kCotangents = {1, 2.154, -0.75, 0.001, 300};

// What a row of the sweep differentiates: y = f(x) (or f(a, b)) and the exact vjp in f64 of the
// 16-bit values it reads, y the rounded output where the vjp reads the saved output (exp's g * y),
// as the library's formula does; PyTorch's formulas read the same saved outputs.
struct UnaryEdgeCase {
  const char* name;
  std::function<Tensor(const Tensor&)> f;
  std::function<bool(double)> domain;
  std::function<double(double g, double x, double y)> vjp;
  int ops;  // f32 operations (and ulps of the f32 functions) before the one rounding
};

double normal_pdf(double x) { return std::exp(-0.5 * x * x) / std::sqrt(2 * M_PI); }
double sigmoid_of(double x) { return 1 / (1 + std::exp(-x)); }

std::vector<UnaryEdgeCase> unary_edge_cases() {
  auto any = [](double) { return true; };
  auto positive = [](double x) { return x > 0; };
  return {
      {"neg", [](const Tensor& x) { return neg(x); }, any, [](double g, double, double) { return -g; }, 0},
      {"abs", [](const Tensor& x) { return abs(x); }, any, [](double g, double x, double) { return x < 0 ? -g : g; }, 0},
      {"square", [](const Tensor& x) { return square(x); }, any, [](double g, double x, double) { return 2 * x * g; }, 2},
      {"exp", [](const Tensor& x) { return exp(x); }, any, [](double g, double, double y) { return g * y; }, 1},
      {"log", [](const Tensor& x) { return log(x); }, positive, [](double g, double x, double) { return g / x; }, 1},
      {"log1p", [](const Tensor& x) { return log1p(x); }, [](double x) { return x > -1; },
       [](double g, double x, double) { return g / (1 + x); }, 2},
      {"sqrt", [](const Tensor& x) { return sqrt(x); }, positive, [](double g, double, double y) { return g / (2 * y); }, 2},
      {"rsqrt", [](const Tensor& x) { return rsqrt(x); }, positive,
       [](double g, double, double y) { return -0.5 * g * y * y * y; }, 4},
      {"reciprocal", [](const Tensor& x) { return reciprocal(x); }, [](double x) { return x != 0; },
       [](double g, double, double y) { return -g * y * y; }, 3},
      {"sin", [](const Tensor& x) { return sin(x); }, any, [](double g, double x, double) { return g * std::cos(x); }, 4},
      {"cos", [](const Tensor& x) { return cos(x); }, any, [](double g, double x, double) { return -g * std::sin(x); }, 4},
      {"erf", [](const Tensor& x) { return erf(x); }, any,
       [](double g, double x, double) { return g * 2 / std::sqrt(M_PI) * std::exp(-x * x); }, 6},
      {"tanh", [](const Tensor& x) { return tanh(x); }, any, [](double g, double, double y) { return g * (1 - y * y); }, 3},
      {"sigmoid", [](const Tensor& x) { return sigmoid(x); }, any,
       [](double g, double, double y) { return g * y * (1 - y); }, 3},
      {"relu", [](const Tensor& x) { return relu(x); }, any, [](double g, double, double y) { return y <= 0 ? 0 : g; }, 0},
      {"gelu", [](const Tensor& x) { return gelu(x); }, any,
       [](double g, double x, double) { return g * (0.5 * std::erfc(-x / std::sqrt(2.0)) + x * normal_pdf(x)); }, 8},
      {"gelu tanh", [](const Tensor& x) { return gelu(x, /*tanh_approximation=*/true); }, any,
       [](double g, double x, double) {
         const double k = std::sqrt(2 / M_PI), c = 0.044715, t = std::tanh(k * (x + c * x * x * x));
         return g * (0.5 * (1 + t) + 0.5 * x * (1 - t * t) * k * (1 + 3 * c * x * x));
       }, 10},
      {"silu", [](const Tensor& x) { return silu(x); }, any,
       [](double g, double x, double) { return g * sigmoid_of(x) * (1 + x * (1 - sigmoid_of(x))); }, 8},
      {"pow 2.5", [](const Tensor& x) { return pow(x, 2.5); }, positive,
       [](double g, double x, double) { return g * 2.5 * std::pow(x, 1.5); }, 6},
      {"pow -1.5", [](const Tensor& x) { return pow(x, -1.5); }, positive,
       [](double g, double x, double) { return g * -1.5 * std::pow(x, -2.5); }, 6},
  };
}

struct BinaryEdgeCase {
  const char* name;
  std::function<Tensor(const Tensor&, const Tensor&)> f;
  std::function<bool(double, double)> domain;
  std::function<double(double g, double a, double b, double y)> da, db;
  int ops;
};

std::vector<BinaryEdgeCase> binary_edge_cases() {
  auto any = [](double, double) { return true; };
  return {
      {"sub", [](const Tensor& a, const Tensor& b) { return a - b; }, any,
       [](double g, double, double, double) { return g; }, [](double g, double, double, double) { return -g; }, 0},
      {"maximum", [](const Tensor& a, const Tensor& b) { return maximum(a, b); }, any,
       [](double g, double a, double b, double) { return a > b ? g : a == b ? g / 2 : 0; },
       [](double g, double a, double b, double) { return b > a ? g : a == b ? g / 2 : 0; }, 0},
      {"mul", [](const Tensor& a, const Tensor& b) { return a * b; }, any,
       [](double g, double, double b, double) { return g * b; }, [](double g, double a, double, double) { return g * a; }, 0},
      {"div", [](const Tensor& a, const Tensor& b) { return a / b; }, [](double, double b) { return b != 0; },
       [](double g, double, double b, double) { return g / b; },
       [](double g, double a, double b, double) { return -g * a / (b * b); }, 4},
      {"pow", [](const Tensor& a, const Tensor& b) { return pow(a, b); },
       [](double a, double b) { return a > 0 && std::fabs(b) < 4; },
       [](double g, double a, double b, double) { return g * b * std::pow(a, b - 1); },
       [](double g, double a, double, double y) { return g * y * std::log(a); }, 8},
  };
}

// Backward of f at every (x, g) pair of edge values in the domain, against the exact vjp of the
// rounded inputs: each vjp rounds once (ops f32 operations before it), or gives the infinity the
// exact value rounds to.
void check_unary_edges(Device device) {
  for (DType dt : kHalves)
    for (const UnaryEdgeCase& c : unary_edge_cases()) {
      std::vector<double> xs, gs;
      for (double x : edge_values())
        for (double g : kCotangents)
          if (c.domain(x)) {
            xs.push_back(x);
            gs.push_back(g);
          }
      const Shape shape{static_cast<int64_t>(xs.size())};
      Tensor x = make_tensor(xs, shape, dt, device).requires_grad_(true);
      const Tensor g = make_tensor(gs, shape, dt, device);
      const Tensor y = c.f(x);
      y.backward(g);
      const std::vector<double> xv = values(x), gv = values(g), yv = values(y);
      std::vector<double> ref(xv.size());
      for (size_t i = 0; i < ref.size(); ++i) ref[i] = c.vjp(gv[i], xv[i], yv[i]);
      check_close(x.grad(), ref, {}, {c.ops}, std::string(c.name) + " backward " + name(dt) + " at the range edges");
    }
}

void check_binary_edges(Device device) {
  for (DType dt : kHalves)
    for (const BinaryEdgeCase& c : binary_edge_cases()) {
      std::vector<double> as, bs, gs;
      for (double a : edge_values())
        for (double b : edge_values())
          for (double g : {1.0, 2.154, 0.001})
            if (c.domain(a, b)) {
              as.push_back(a);
              bs.push_back(b);
              gs.push_back(g);
            }
      const Shape shape{static_cast<int64_t>(as.size())};
      Tensor a = make_tensor(as, shape, dt, device).requires_grad_(true);
      Tensor b = make_tensor(bs, shape, dt, device).requires_grad_(true);
      const Tensor g = make_tensor(gs, shape, dt, device);
      const Tensor y = c.f(a, b);
      y.backward(g);
      const std::vector<double> av = values(a), bv = values(b), gv = values(g), yv = values(y);
      std::vector<double> ra(av.size()), rb(av.size());
      for (size_t i = 0; i < ra.size(); ++i) {
        ra[i] = c.da(gv[i], av[i], bv[i], yv[i]);
        rb[i] = c.db(gv[i], av[i], bv[i], yv[i]);
      }
      const std::string what = std::string(c.name) + " backward " + name(dt) + " at the range edges, d/d";
      check_close(a.grad(), ra, {}, {c.ops}, what + "a");
      check_close(b.grad(), rb, {}, {c.ops}, what + "b");
    }
}

const Device kCuda{DeviceType::cuda, 0};

}  // namespace

// Each group runs on the CPU (suite cpu) and on a GPU (suite cuda).
#define EMBER_HALF_SCALE_CASE(title, ...)                                             \
  TEST_CASE("16-bit at scale: " title * doctest::test_suite("cpu")) {                  \
    for (auto check : {__VA_ARGS__}) check(kCPU);                                     \
  }                                                                                   \
  EMBER_CUDA_TEST_CASE("cuda 16-bit at scale: " title) {                               \
    for (auto check : {__VA_ARGS__}) check(kCuda);                                    \
  }

EMBER_HALF_SCALE_CASE("sum, mean, var, std, norm, logsumexp over 70000 and 2^17+3 elements", check_full_reductions)
EMBER_HALF_SCALE_CASE("prod, and amax/amin sharing their gradient among 70000 ties", check_prod, check_extremum_ties)
EMBER_HALF_SCALE_CASE("mean over a dim of rows and of columns", check_mean_dims)
EMBER_HALF_SCALE_CASE("softmax and log_softmax along 70000 elements", check_softmax)
EMBER_HALF_SCALE_CASE("layer_norm and batch_norm with more than 65504 values per statistic", check_layer_norm,
                      check_batch_norm)
EMBER_HALF_SCALE_CASE("cross_entropy, nll_loss and mse_loss means over 70000 positions", check_losses)
EMBER_HALF_SCALE_CASE("average pooling over windows of more than 65504 elements", check_avg_pool)
EMBER_HALF_SCALE_CASE("index_select and gather gradients of 70000 repeats of one index", check_repeated_indices)
EMBER_HALF_SCALE_CASE("scalar operands 65520, 1e-8 and 0.1 keep their value", check_scalar_operands)
EMBER_HALF_SCALE_CASE("elementwise gradients at the range edges: one rounding after f32 intermediates",
                      check_unary_edges, check_binary_edges)
EMBER_HALF_SCALE_CASE("Adam with eps 1e-8, clip_grad_norm_ and loss scaling of 16-bit tensors", check_adam_eps,
                      check_clip_grad_norm, check_loss_scaling)
