// Naive f64 references for the nn ops (conv2d and its transpose, pooling, batch/layer norm, losses,
// embedding, attention): plain loops over row-major host values, written straight from the PyTorch
// definitions and sharing no code with the library. The op-case table (tests/op_cases.cpp) and the nn
// tests (tests/test_nn_conv.cpp, tests/test_nn_functional.cpp) all check against these.
//
// Conventions: a Host is a shape plus row-major doubles (tests/helpers.h); NCHW tensors index as
// ((n * C + c) * H + h) * W + w; integer targets / indices arrive as doubles holding integers.
#pragma once

#include <array>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "tests/helpers.h"

namespace ember_test::ref {

using P2 = std::array<int64_t, 2>;

// ---- conv2d

// out[n][o][i][j] = b[o] + sum_{c,ki,kj} x[n][g*Cg+c][i*s-p+ki*d][j*s-p+kj*d] * w[o][c][ki][kj],
// g = o / (O / groups); taps that land in the zero padding are skipped.
// `after`: padding beyond p at the bottom and right only (padding 'same' with an even extent).
inline Host conv2d(const Host& x, const Host& w, const std::vector<double>* b, P2 s, P2 p, P2 d, int64_t groups,
                   P2 after = {0, 0}) {
  const int64_t N = x.shape[0], C = x.shape[1], H = x.shape[2], W = x.shape[3];
  const int64_t O = w.shape[0], Cg = w.shape[1], kh = w.shape[2], kw = w.shape[3], Og = O / groups;
  const int64_t OH = (H + 2 * p[0] + after[0] - d[0] * (kh - 1) - 1) / s[0] + 1;
  const int64_t OW = (W + 2 * p[1] + after[1] - d[1] * (kw - 1) - 1) / s[1] + 1;
  Host y{{N, O, OH, OW}, std::vector<double>(static_cast<size_t>(N * O * OH * OW))};
  for (int64_t n = 0; n < N; ++n)
    for (int64_t o = 0; o < O; ++o)
      for (int64_t i = 0; i < OH; ++i)
        for (int64_t j = 0; j < OW; ++j) {
          double acc = b ? (*b)[o] : 0.0;
          const int64_t g = o / Og;
          for (int64_t c = 0; c < Cg; ++c)
            for (int64_t ki = 0; ki < kh; ++ki)
              for (int64_t kj = 0; kj < kw; ++kj) {
                const int64_t h = i * s[0] - p[0] + ki * d[0], ww = j * s[1] - p[1] + kj * d[1];
                if (h < 0 || h >= H || ww < 0 || ww >= W) continue;
                acc += x.v[((n * C + g * Cg + c) * H + h) * W + ww] * w.v[((o * Cg + c) * kh + ki) * kw + kj];
              }
          y.v[((n * O + o) * OH + i) * OW + j] = acc;
        }
  return y;
}

// The transposed convolution, scattered from each input element (PyTorch's ConvTranspose2d definition):
// out[n][g*Og+o][i*s-p+ki*d][j*s-p+kj*d] += x[n][c][i][j] * w[c][o][ki][kj] for c in group g, plus b;
// taps outside the output (the cropped padding) are dropped. w is (C, O/groups, kh, kw).
inline Host conv_transpose2d(const Host& x, const Host& w, const std::vector<double>* b, P2 s, P2 p, P2 op, P2 d,
                             int64_t groups) {
  const int64_t N = x.shape[0], C = x.shape[1], H = x.shape[2], W = x.shape[3];
  const int64_t Og = w.shape[1], kh = w.shape[2], kw = w.shape[3], O = Og * groups, Cg = C / groups;
  const int64_t OH = (H - 1) * s[0] - 2 * p[0] + d[0] * (kh - 1) + op[0] + 1;
  const int64_t OW = (W - 1) * s[1] - 2 * p[1] + d[1] * (kw - 1) + op[1] + 1;
  Host y{{N, O, OH, OW}, std::vector<double>(static_cast<size_t>(N * O * OH * OW))};
  for (int64_t n = 0; n < N; ++n)
    for (int64_t o = 0; o < O; ++o)
      for (int64_t k = 0; k < OH * OW; ++k) y.v[(n * O + o) * OH * OW + k] = b ? (*b)[o] : 0.0;
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t i = 0; i < H; ++i)
        for (int64_t j = 0; j < W; ++j)
          for (int64_t o = 0; o < Og; ++o)
            for (int64_t ki = 0; ki < kh; ++ki)
              for (int64_t kj = 0; kj < kw; ++kj) {
                const int64_t h = i * s[0] - p[0] + ki * d[0], ww = j * s[1] - p[1] + kj * d[1];
                if (h < 0 || h >= OH || ww < 0 || ww >= OW) continue;
                const int64_t out_channel = c / Cg * Og + o;
                y.v[((n * O + out_channel) * OH + h) * OW + ww] +=
                    x.v[((n * C + c) * H + i) * W + j] * w.v[((c * Og + o) * kh + ki) * kw + kj];
              }
  return y;
}

// ---- pooling

// Max (with the flat index h * W + w of the first maximum in window order) or average over each
// window, with PyTorch's output size (ceil_mode drops a last window that starts in the padding)
// and divisor (count_include_pad: the window clipped to the padded input; else the real elements).
struct Pool {
  Host values;
  std::vector<double> indices;
};

// Max or average pooling; the average divides by divisor_override when it is not 0.
inline Pool pool2d(const Host& x, P2 k, P2 s, P2 p, P2 d, bool ceil_mode, bool is_max, bool count_include_pad,
                   int64_t divisor_override = 0) {
  const int64_t N = x.shape[0], C = x.shape[1], H = x.shape[2], W = x.shape[3];
  auto out_size = [&](int64_t in, int i) {
    const int64_t num = in + 2 * p[i] - d[i] * (k[i] - 1) - 1 + (ceil_mode ? s[i] - 1 : 0);
    int64_t o = num / s[i] + 1;
    if (ceil_mode && (o - 1) * s[i] >= in + p[i]) --o;
    return o;
  };
  const int64_t OH = out_size(H, 0), OW = out_size(W, 1);
  Pool r{{{N, C, OH, OW}, std::vector<double>(static_cast<size_t>(N * C * OH * OW))}, {}};
  r.indices.resize(r.values.v.size());
  for (int64_t nc = 0; nc < N * C; ++nc)
    for (int64_t i = 0; i < OH; ++i)
      for (int64_t j = 0; j < OW; ++j) {
        double best = -INFINITY, sum = 0;
        int64_t arg = -1, count = 0;
        for (int64_t ki = 0; ki < k[0]; ++ki)
          for (int64_t kj = 0; kj < k[1]; ++kj) {
            const int64_t h = i * s[0] - p[0] + ki * d[0], w = j * s[1] - p[1] + kj * d[1];
            if (h >= -p[0] && h < H + p[0] && w >= -p[1] && w < W + p[1] && count_include_pad) ++count;
            if (h < 0 || h >= H || w < 0 || w >= W) continue;
            if (!count_include_pad) ++count;
            const double v = x.v[(nc * H + h) * W + w];
            sum += v;
            if (arg < 0 || v > best) best = v, arg = h * W + w;
          }
        const int64_t o = (nc * OH + i) * OW + j;
        r.values.v[o] = is_max ? best : sum / static_cast<double>(divisor_override != 0 ? divisor_override : count);
        r.indices[o] = static_cast<double>(arg);
      }
  return r;
}

// Mean over windows [floor(i H / OH), ceil((i + 1) H / OH)) x [floor(j W / OW), ceil((j + 1) W / OW)).
inline Host adaptive_avg_pool2d(const Host& x, P2 os) {
  const int64_t N = x.shape[0], C = x.shape[1], H = x.shape[2], W = x.shape[3];
  Host y{{N, C, os[0], os[1]}, {}};
  for (int64_t nc = 0; nc < N * C; ++nc)
    for (int64_t i = 0; i < os[0]; ++i)
      for (int64_t j = 0; j < os[1]; ++j) {
        const int64_t h0 = i * H / os[0], h1 = ((i + 1) * H + os[0] - 1) / os[0];
        const int64_t w0 = j * W / os[1], w1 = ((j + 1) * W + os[1] - 1) / os[1];
        double sum = 0;
        for (int64_t h = h0; h < h1; ++h)
          for (int64_t w = w0; w < w1; ++w) sum += x.v[(nc * H + h) * W + w];
        y.v.push_back(sum / static_cast<double>((h1 - h0) * (w1 - w0)));
      }
  return y;
}

// ---- normalization

// Per-channel biased mean and variance of x seen as (N, C, S) row-major.
struct Stats {
  std::vector<double> mean, var;
};
inline Stats channel_stats(const std::vector<double>& x, int64_t N, int64_t C, int64_t S) {
  Stats st{std::vector<double>(C, 0), std::vector<double>(C, 0)};
  for (int64_t c = 0; c < C; ++c) {
    for (int64_t n = 0; n < N; ++n)
      for (int64_t s = 0; s < S; ++s) st.mean[c] += x[(n * C + c) * S + s];
    st.mean[c] /= static_cast<double>(N * S);
    for (int64_t n = 0; n < N; ++n)
      for (int64_t s = 0; s < S; ++s) st.var[c] += std::pow(x[(n * C + c) * S + s] - st.mean[c], 2);
    st.var[c] /= static_cast<double>(N * S);
  }
  return st;
}

// y = (x - m[c]) / sqrt(v[c] + eps) * w[c] + b[c] over x (N, C, S) row-major.
inline std::vector<double> batch_norm(const std::vector<double>& x, int64_t N, int64_t C, int64_t S,
                                      const std::vector<double>& m, const std::vector<double>& v,
                                      const std::vector<double>& w, const std::vector<double>& b, double eps = 1e-5) {
  std::vector<double> y(x.size());
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t s = 0; s < S; ++s) {
        const int64_t i = (n * C + c) * S + s;
        y[i] = (x[i] - m[c]) / std::sqrt(v[c] + eps) * w[c] + b[c];
      }
  return y;
}

// Running statistics after one training step: (1 - momentum) * running + momentum * batch, the
// batch variance unbiased (times count / (count - 1)).
inline void update_running(std::vector<double>& running_mean, std::vector<double>& running_var, const Stats& batch,
                           int64_t count, double momentum) {
  for (size_t c = 0; c < running_mean.size(); ++c) {
    running_mean[c] = (1 - momentum) * running_mean[c] + momentum * batch.mean[c];
    running_var[c] = (1 - momentum) * running_var[c] +
                     momentum * batch.var[c] * static_cast<double>(count) / static_cast<double>(count - 1);
  }
}

// Layer norm of x seen as (R, D) row-major: each row normalised with its biased mean / variance,
// then scaled by w and shifted by b (length D; empty means 1 and 0).
inline std::vector<double> layer_norm(const std::vector<double>& x, int64_t D, const std::vector<double>& w,
                                      const std::vector<double>& b, double eps = 1e-5) {
  const int64_t R = static_cast<int64_t>(x.size()) / D;
  std::vector<double> y(x.size());
  for (int64_t r = 0; r < R; ++r) {
    double m = 0, v = 0;
    for (int64_t j = 0; j < D; ++j) m += x[r * D + j] / static_cast<double>(D);
    for (int64_t j = 0; j < D; ++j) v += std::pow(x[r * D + j] - m, 2) / static_cast<double>(D);
    for (int64_t j = 0; j < D; ++j)
      y[r * D + j] = (x[r * D + j] - m) / std::sqrt(v + eps) * (w.empty() ? 1.0 : w[j]) + (b.empty() ? 0.0 : b[j]);
  }
  return y;
}

// ---- losses

// Class c's weight: w[c], or 1 without a weight (w empty).
inline double class_weight(const std::vector<double>& w, int64_t c) { return w.empty() ? 1.0 : w[c]; }

// log(sum_c e^x[c]) of position (n, s) of logits (N, C, S) row-major.
inline double logsumexp_at(const std::vector<double>& x, int64_t n, int64_t s, int64_t C, int64_t S) {
  double z = 0;
  for (int64_t c = 0; c < C; ++c) z += std::exp(x[(n * C + c) * S + s]);
  return std::log(z);
}

// Per-element cross-entropy of logits (N, C, S) row-major at targets (N, S), class weights w (or none):
// (1 - eps) * w[target] (lse - x[target]) + eps * mean_c w[c] (lse - x[c]); 0 where the target is `ignore`.
inline std::vector<double> cross_entropy(const std::vector<double>& x, const std::vector<int64_t>& t, int64_t N,
                                         int64_t C, int64_t S, int64_t ignore, double eps,
                                         const std::vector<double>& w = {}) {
  std::vector<double> loss(N * S, 0.0);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t s = 0; s < S; ++s) {
      const int64_t target = t[n * S + s];
      if (target == ignore) continue;
      const double lse = logsumexp_at(x, n, s, C, S);
      double smooth = 0;
      for (int64_t c = 0; c < C; ++c) smooth += class_weight(w, c) * (lse - x[(n * C + c) * S + s]);
      loss[n * S + s] = (1 - eps) * class_weight(w, target) * (lse - x[(n * C + target) * S + s]) +
                        eps * smooth / static_cast<double>(C);
    }
  return loss;
}

// Per-element cross-entropy of logits (N, C, S) against class probabilities q (N, C, S):
// -sum_c w[c] ((1 - eps) q[c] + eps / C) (x[c] - lse).
inline std::vector<double> cross_entropy_probabilities(const std::vector<double>& x, const std::vector<double>& q,
                                                       int64_t N, int64_t C, int64_t S, double eps,
                                                       const std::vector<double>& w = {}) {
  std::vector<double> loss(N * S, 0.0);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t s = 0; s < S; ++s) {
      const double lse = logsumexp_at(x, n, s, C, S);
      for (int64_t c = 0; c < C; ++c) {
        const int64_t i = (n * C + c) * S + s;
        loss[n * S + s] -= class_weight(w, c) * ((1 - eps) * q[i] + eps / static_cast<double>(C)) * (x[i] - lse);
      }
    }
  return loss;
}

// Per-element negative log likelihood of log-probabilities (N, C, S) at targets (N, S): -w[t] lp[t].
inline std::vector<double> nll_loss(const std::vector<double>& lp, const std::vector<int64_t>& t, int64_t N, int64_t C,
                                    int64_t S, int64_t ignore, const std::vector<double>& w = {}) {
  std::vector<double> loss(N * S, 0.0);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t s = 0; s < S; ++s)
      if (t[n * S + s] != ignore) loss[n * S + s] = -class_weight(w, t[n * S + s]) * lp[(n * C + t[n * S + s]) * S + s];
  return loss;
}

// Sum, or mean over the targets that are not `ignore` weighted by w[target] (the class-loss "mean").
inline double reduce_targets(const std::vector<double>& loss, const std::vector<int64_t>& t, int64_t ignore,
                             bool mean, const std::vector<double>& w = {}) {
  double s = 0, total = 0;
  for (size_t i = 0; i < loss.size(); ++i) {
    s += loss[i];
    if (t[i] != ignore) total += class_weight(w, t[i]);
  }
  return mean ? s / total : s;
}

// A per-element loss reduced as "none" (kept, shape `shape`), "sum" or "mean" (0-dim).
inline Host reduce_loss(const std::vector<double>& loss, const Shape& shape, const std::string& reduction,
                        const std::vector<int64_t>& t, int64_t ignore, const std::vector<double>& w = {}) {
  if (reduction == "none") return {shape, loss};
  return {{}, {reduce_targets(loss, t, ignore, reduction == "mean", w)}};
}

// (a - b)^2 elementwise with a and b broadcast.
inline Host squared_error(const Host& a, const Host& b) {
  Host r{broadcast(a.shape, b.shape), {}};
  for (int64_t i = 0; i < numel(r.shape); ++i) {
    const Shape at = unravel(i, r.shape);
    const double diff = a.v[broadcast_index(at, a.shape)] - b.v[broadcast_index(at, b.shape)];
    r.v.push_back(diff * diff);
  }
  return r;
}

// ---- embedding

// out[..., j] = weight[index[...]][j] for weight (V, D): shape (*index.shape, D).
inline Host embedding(const Host& weight, const Host& index) {
  const int64_t D = weight.shape[1];
  Shape s = index.shape;
  s.push_back(D);
  Host r{s, {}};
  for (double i : index.v)
    for (int64_t j = 0; j < D; ++j) r.v.push_back(weight.v[static_cast<int64_t>(i) * D + j]);
  return r;
}

// ---- scaled dot-product attention

// y[n][i] = sum_j softmax_j(q[n][i] . k[n][j] / sqrt(E)) v[n][j] over the keys j that take part:
// mask[i][j] != 0 (mask (L, S), or none) and, when causal, j <= i. q (..., L, E), k (..., S, E) and
// v (..., S, Ev) share their batch dims. A query with no key taking part gets zeros (PyTorch's SDPA).
inline Host attention(const Host& q, const Host& k, const Host& v, const Host* mask, bool causal) {
  const int r = q.shape.size();
  const int64_t L = q.shape[r - 2], E = q.shape[r - 1], S = k.shape[r - 2], Ev = v.shape[r - 1];
  const int64_t N = L * E == 0 ? 0 : q.numel() / (L * E);
  Shape out = q.shape;
  out[r - 1] = Ev;
  Host y{out, std::vector<double>(static_cast<size_t>(N * L * Ev), 0.0)};
  for (int64_t n = 0; n < N; ++n)
    for (int64_t i = 0; i < L; ++i) {
      std::vector<double> w(static_cast<size_t>(S), 0.0);
      std::vector<bool> take(static_cast<size_t>(S));
      double mx = -INFINITY;
      for (int64_t j = 0; j < S; ++j) {
        take[j] = (!mask || mask->v[i * S + j] != 0) && !(causal && j > i);
        if (!take[j]) continue;
        double dot = 0;
        for (int64_t e = 0; e < E; ++e) dot += q.v[(n * L + i) * E + e] * k.v[(n * S + j) * E + e];
        w[j] = dot / std::sqrt(static_cast<double>(E));
        mx = std::max(mx, w[j]);
      }
      double total = 0;
      for (int64_t j = 0; j < S; ++j) total += take[j] ? std::exp(w[j] - mx) : 0.0;
      for (int64_t j = 0; j < S; ++j)
        if (take[j])
          for (int64_t c = 0; c < Ev; ++c) y.v[(n * L + i) * Ev + c] += std::exp(w[j] - mx) / total * v.v[(n * S + j) * Ev + c];
    }
  return y;
}

}  // namespace ember_test::ref
