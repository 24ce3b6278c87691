// CPU kernels of batch norm and layer norm. Statistics accumulate in double (two passes: mean,
// then the sum of squared deviations); the output is computed in the input's compute type.
// Batch norm reads x as (N, C, S) with strides (sn, sc, ss): contiguous and channels-last inputs
// both fit (the spatial dims collapse into one stride), so neither is copied (other layouts are),
// and its outputs keep the input's memory format (channels-last in, channels-last out).
#include <cmath>
#include <mutex>
#include <vector>

#include "autograd/grad_mode.h"
#include "cpu/parallel.h"
#include "nn/primitives/normalization.h"
#include "tensor/convert.h"
#include "tensor/ops.h"

namespace ember {

namespace {

// Host copy of a small parameter vector (weight, bias, statistics) as double.
std::vector<double> host(const Tensor& t) { return t.to_vector<double>(); }

template <class T>
void write_vector(Tensor& t, const std::vector<double>& v) {
  T* p = t.data<T>();
  for (size_t i = 0; i < v.size(); ++i) p[i] = convert<T>(v[i]);
}

// A batch-norm operand seen as (N, C, S): element (n, c, i) at n * sn + c * sc + i * ss.
struct NCS {
  int64_t sn = 0, sc = 0, ss = 1;
  int64_t at(int64_t n, int64_t c, int64_t i) const { return n * sn + c * sc + i * ss; }
};

// The spatial dims 2... of t collapsed into one stride (size-1 dims ignored); false if they don't.
bool collapse(const Tensor& t, NCS* l) {
  int64_t prev = -1;
  l->sn = t.stride(0);
  l->sc = t.stride(1);
  l->ss = 1;
  for (int d = 2; d < t.dim(); ++d) {
    if (t.size(d) == 1) continue;
    if (prev >= 0 && prev != t.stride(d) * t.size(d)) return false;
    prev = t.stride(d);
    l->ss = t.stride(d);
  }
  return true;
}
// t itself when its layout collapses, else a contiguous copy.
Tensor collapsible(const Tensor& t, NCS* l) {
  if (collapse(t, l)) return t;
  NoGradGuard no_grad;
  Tensor c = t.contiguous();
  collapse(c, l);
  return c;
}

// The dense channels-last strides of `shape` (rank >= 3): C innermost, then W, H, ..., N.
Strides channels_last_strides(const Shape& shape) {
  Strides st = Dims::filled(shape.size(), 0);
  int64_t s = 1;
  st[1] = s;
  s *= shape[1];
  for (int d = shape.size() - 1; d >= 2; --d) {
    st[d] = s;
    s *= shape[d];
  }
  st[0] = s;
  return st;
}
// True when x is channels-last and not also contiguous (dims of size 1 don't count).
bool is_channels_last(const Tensor& x) {
  if (x.dim() < 3 || x.is_contiguous()) return false;
  const Strides want = channels_last_strides(x.shape());
  for (int d = 0; d < x.dim(); ++d)
    if (x.size(d) != 1 && x.stride(d) != want[d]) return false;
  return true;
}
// Gives `out` (freshly allocated, contiguous) x's memory format: channels-last stays
// channels-last, as in PyTorch. Returns the layout the kernel writes out in.
NCS match_layout(const Tensor& x, Tensor& out) {
  if (is_channels_last(x))
    out = Tensor(make_intrusive<TensorImpl>(out.storage(), 0, out.shape(), channels_last_strides(out.shape()),
                                            out.dtype()));
  NCS l;
  collapse(out, &l);
  return l;
}

}  // namespace

void BatchNorm::eval_cpu(const std::vector<Tensor>& in, std::vector<Tensor>& out) {
  NCS lx;
  const Tensor x = collapsible(in[0], &lx);
  const NCS ly = match_layout(in[0], out[0]);
  const int64_t N = x.size(0), C = x.size(1), S = C == 0 || N == 0 ? 0 : x.numel() / (N * C);
  size_t next = 1;
  const std::vector<double> w = has_weight_ ? host(in[next++]) : std::vector<double>(C, 1.0);
  const std::vector<double> b = has_bias_ ? host(in[next++]) : std::vector<double>(C, 0.0);
  std::vector<double> mu(C), var(C);
  if (!training_) {
    mu = host(in[next]);
    var = host(in[next + 1]);
  }
  const double eps = eps_;
  const bool training = training_;
  visit_floating(x.dtype(), name(), [&]<class T>() {
    using Cp = compute_t<T>;
    const T* xp = x.data<T>();
    T* yp = out[0].data<T>();
    cpu::parallel_for(C, N * S, [&](int64_t begin, int64_t end) {
      for (int64_t c = begin; c < end; ++c) {
        auto xv = [&](int64_t n, int64_t i) { return static_cast<Cp>(xp[lx.at(n, c, i)]); };
        if (training) {
          double s = 0, q = 0;
          for (int64_t n = 0; n < N; ++n)
            for (int64_t i = 0; i < S; ++i) s += static_cast<double>(xv(n, i));
          const double m = s / static_cast<double>(N * S);
          for (int64_t n = 0; n < N; ++n)
            for (int64_t i = 0; i < S; ++i) {
              const double d = static_cast<double>(xv(n, i)) - m;
              q += d * d;
            }
          mu[c] = m;
          var[c] = q / static_cast<double>(N * S);
        }
        const double scale = w[c] / std::sqrt(var[c] + eps);
        const auto a = static_cast<Cp>(scale), sh = static_cast<Cp>(b[c] - mu[c] * scale);
        for (int64_t n = 0; n < N; ++n)
          for (int64_t i = 0; i < S; ++i) yp[ly.at(n, c, i)] = convert<T>(xv(n, i) * a + sh);
      }
    });
  });
  if (training_)
    visit_floating(out[1].dtype(), name(), [&]<class T>() {
      write_vector<T>(out[1], mu);
      write_vector<T>(out[2], var);
    });
}

// Per channel: statistics (training) or the running ones, then sum(g) and sum(g * xhat) in
// double, then dx in a second pass (see BatchNorm::vjp for the formulas). g may be contiguous
// or channels-last; dx takes x's memory format.
void BatchNormBackward::eval_cpu(const std::vector<Tensor>& in, std::vector<Tensor>& out) {
  NCS lx, lg;
  const Tensor x = collapsible(in[0], &lx);
  const Tensor gt = collapsible(in[1], &lg);
  const NCS ld = match_layout(in[0], out[0]);
  const int64_t N = x.size(0), C = x.size(1), S = C == 0 || N == 0 ? 0 : x.numel() / (N * C);
  const double M = static_cast<double>(N * S);
  size_t next = 2;
  const std::vector<double> w = has_weight_ ? host(in[next++]) : std::vector<double>(C, 1.0);
  const std::vector<double> a = host(in[next]), b = host(in[next + 1]);  // g_mean, g_var or running stats
  std::vector<double> dw(C), db(C);
  const double eps = eps_;
  const bool training = training_;
  visit_floating(x.dtype(), name(), [&]<class T>() {
    using Cp = compute_t<T>;
    const T* xp = x.data<T>();
    const T* gp = gt.data<T>();
    T* dxp = out[0].data<T>();
    cpu::parallel_for(C, N * S, [&](int64_t begin, int64_t end) {
      for (int64_t c = begin; c < end; ++c) {
        auto xv = [&](int64_t n, int64_t i) { return static_cast<double>(static_cast<Cp>(xp[lx.at(n, c, i)])); };
        auto gv = [&](int64_t n, int64_t i) { return static_cast<double>(static_cast<Cp>(gp[lg.at(n, c, i)])); };
        double m, rstd;
        if (training) {
          double s = 0, q = 0;
          for (int64_t n = 0; n < N; ++n)
            for (int64_t i = 0; i < S; ++i) s += xv(n, i);
          m = s / M;
          for (int64_t n = 0; n < N; ++n)
            for (int64_t i = 0; i < S; ++i) q += (xv(n, i) - m) * (xv(n, i) - m);
          rstd = 1.0 / std::sqrt(q / M + eps);
        } else {
          m = a[c];
          rstd = 1.0 / std::sqrt(b[c] + eps);
        }
        double sg = 0, sgx = 0;
        for (int64_t n = 0; n < N; ++n)
          for (int64_t i = 0; i < S; ++i) {
            sg += gv(n, i);
            sgx += gv(n, i) * (xv(n, i) - m) * rstd;
          }
        dw[c] = sgx;
        db[c] = sg;
        const double k = w[c] * rstd;
        for (int64_t n = 0; n < N; ++n)
          for (int64_t i = 0; i < S; ++i) {
            double d;
            if (training) {
              const double xc = xv(n, i) - m;
              d = k * (gv(n, i) - sg / M - xc * rstd * sgx / M) + a[c] / M + b[c] * 2.0 * xc / M;
            } else {
              d = k * gv(n, i);
            }
            dxp[ld.at(n, c, i)] = convert<T>(d);
          }
      }
    });
  });
  visit_floating(out[1].dtype(), name(), [&]<class T>() {
    write_vector<T>(out[1], dw);
    write_vector<T>(out[2], db);
  });
}

void LayerNorm::eval_cpu(const std::vector<Tensor>& in, std::vector<Tensor>& out) {
  const Tensor& x = in[0];
  int64_t D = 1;
  for (int d = x.dim() - normalized_dims_; d < x.dim(); ++d) D *= x.size(d);
  const int64_t rows = D == 0 ? 0 : x.numel() / D;
  const std::vector<double> w = has_weight_ ? host(in[1]) : std::vector<double>();
  const std::vector<double> b = has_bias_ ? host(in[has_weight_ ? 2 : 1]) : std::vector<double>();
  const double eps = eps_;
  visit_floating(x.dtype(), name(), [&]<class T>() {
    using Cp = compute_t<T>;
    const T* xp = x.data<T>();
    T* yp = out[0].data<T>();
    cpu::parallel_for(rows, D, [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) {
        const T* xr = xp + r * D;
        T* yr = yp + r * D;
        double s = 0;
        for (int64_t j = 0; j < D; ++j) s += static_cast<double>(static_cast<Cp>(xr[j]));
        const double m = s / static_cast<double>(D);
        double q = 0;
        for (int64_t j = 0; j < D; ++j) {
          const double d = static_cast<double>(static_cast<Cp>(xr[j])) - m;
          q += d * d;
        }
        const auto rstd = static_cast<Cp>(1.0 / std::sqrt(q / static_cast<double>(D) + eps));
        const auto mc = static_cast<Cp>(m);
        for (int64_t j = 0; j < D; ++j) {
          Cp v = (static_cast<Cp>(xr[j]) - mc) * rstd;
          if (!w.empty()) v = v * static_cast<Cp>(w[j]);
          if (!b.empty()) v = v + static_cast<Cp>(b[j]);
          yr[j] = convert<T>(v);
        }
      }
    });
  });
}

// Rows in parallel: per row the statistics, then sum(gw) and sum(gw * xhat) and dx; each chunk
// of rows sums its g * xhat and g into local vectors, merged at its end.
void LayerNormBackward::eval_cpu(const std::vector<Tensor>& in, std::vector<Tensor>& out) {
  const Tensor& x = in[0];
  int64_t D = 1;
  for (int d = x.dim() - normalized_dims_; d < x.dim(); ++d) D *= x.size(d);
  const int64_t rows = D == 0 ? 0 : x.numel() / D;
  const std::vector<double> w = has_weight_ ? host(in[2]) : std::vector<double>(D, 1.0);
  std::vector<double> dw(D, 0.0), db(D, 0.0);
  std::mutex merge;
  const double eps = eps_;
  visit_floating(x.dtype(), name(), [&]<class T>() {
    using Cp = compute_t<T>;
    const T* xp = x.data<T>();
    const T* gp = in[1].data<T>();
    T* dxp = out[0].data<T>();
    cpu::parallel_for(rows, D, [&](int64_t begin, int64_t end) {
      std::vector<double> ldw(D, 0.0), ldb(D, 0.0), xhat(D);
      for (int64_t r = begin; r < end; ++r) {
        const T* xr = xp + r * D;
        const T* gr = gp + r * D;
        double s = 0, q = 0;
        for (int64_t j = 0; j < D; ++j) s += static_cast<double>(static_cast<Cp>(xr[j]));
        const double m = s / static_cast<double>(D);
        for (int64_t j = 0; j < D; ++j) {
          const double d = static_cast<double>(static_cast<Cp>(xr[j])) - m;
          q += d * d;
        }
        const double rstd = 1.0 / std::sqrt(q / static_cast<double>(D) + eps);
        double sgw = 0, sgwx = 0;
        for (int64_t j = 0; j < D; ++j) {
          const double g = static_cast<double>(static_cast<Cp>(gr[j]));
          xhat[j] = (static_cast<double>(static_cast<Cp>(xr[j])) - m) * rstd;
          sgw += g * w[j];
          sgwx += g * w[j] * xhat[j];
          ldw[j] += g * xhat[j];
          ldb[j] += g;
        }
        const double mg = sgw / static_cast<double>(D), mgx = sgwx / static_cast<double>(D);
        for (int64_t j = 0; j < D; ++j) {
          const double g = static_cast<double>(static_cast<Cp>(gr[j]));
          dxp[r * D + j] = convert<T>(rstd * (g * w[j] - mg - xhat[j] * mgx));
        }
      }
      std::lock_guard<std::mutex> lock(merge);
      for (int64_t j = 0; j < D; ++j) {
        dw[j] += ldw[j];
        db[j] += ldb[j];
      }
    });
  });
  visit_floating(out[1].dtype(), name(), [&]<class T>() {
    write_vector<T>(out[1], dw);
    write_vector<T>(out[2], db);
  });
}

}  // namespace ember
