// CPU kernels of batch norm and layer norm. Statistics accumulate in double (two passes: mean,
// then the sum of squared deviations; batch norm makes them over runs that stay in cache and
// merges the runs' results); the output is computed in the input's compute type.
// Batch norm reads x as (N, C, S) with strides (sn, sc, ss): contiguous and channels-last inputs
// both fit (the spatial dims collapse into one stride), so neither is copied (other layouts are),
// and its outputs keep the input's memory format (channels-last in, channels-last out).
#include <algorithm>
#include <cmath>
#include <vector>

#include "autograd/grad_mode.h"
#include "cpu/half_runs.h"
#include "cpu/parallel.h"
#include "cpu/simd_math.h"
#include "nn/primitives/batch_norm_layout.h"
#include "nn/primitives/normalization.h"
#include "tensor/convert.h"
#include "tensor/host_sync.h"
#include "tensor/ops.h"

namespace ember {

namespace {

// Host copy of a small parameter vector (weight, bias, statistics) as double.
std::vector<double> host(const Tensor& t) { return detail::cpu_values<double>(t); }

template <class T>
void write_vector(Tensor& t, const std::vector<double>& v) {
  T* p = t.data<T>();
  for (size_t i = 0; i < v.size(); ++i) p[i] = convert<T>(v[i]);
}

// The kernels walk each channel's N*S values as `runs` runs of `len`: the spatial plane of each image
// (runs = N, len = S) or, with no spatial dims, the whole batch as one run (runs = 1, len = N). A
// plane mostly fits in cache, so its statistics take two passes over it for the cost of one read
// from memory. Runs are grouped into pieces of about kPieceElements, the units of parallel work,
// whose number depends on the shape only: the results don't depend on the thread count.
constexpr int64_t kPieceElements = 16384;

struct Runs {
  int64_t C, runs, len, pieces;
  int64_t first_run(int64_t piece) const { return runs * piece / pieces; }
};

Runs runs_of(int64_t N, int64_t C, int64_t S) {
  Runs r{C, S > 1 ? N : 1, S > 1 ? S : N, 1};
  r.pieces = std::clamp<int64_t>(r.runs * r.len / kPieceElements, 1, std::max<int64_t>(r.runs, 1));
  return r;
}

// An operand's strides in run terms: value i of run r of channel c at c * sc + r * sr + i * si.
struct RunStrides {
  int64_t sc, sr, si;
  RunStrides(const NCS& l, int64_t S) : sc(l.sc), sr(S > 1 ? l.sn : 0), si(S > 1 ? l.ss : l.sn) {}
  int64_t at(int64_t c, int64_t r) const { return c * sc + r * sr; }
};

// Count, mean and sum of squared deviations of a set of values x, and for the backward the sums
// of g and of g * (x - mean) over the same set. Two sets merge exactly (Chan et al. for m2), so
// runs summed apart join into the statistics of the whole.
struct Moments {
  double n = 0, mean = 0, m2 = 0, g = 0, gx = 0;
  void merge(const Moments& o) {
    if (o.n == 0) return;
    const double total = n + o.n, d = o.mean - mean, merged = mean + d * o.n / total;
    m2 += o.m2 + d * d * n * o.n / total;
    gx += (mean - merged) * g + o.gx + (o.mean - merged) * o.g;
    g += o.g;
    mean = merged;
    n = total;
  }
};

constexpr int kLanes = 4;  // independent accumulators, so that the adds pipeline and vectorize

// The moments of one run: x(i) and g(i) read value i as double; kGrad adds the g sums.
template <bool kGrad, class X, class G>
Moments run_moments(int64_t len, X x, G g) {
  double acc[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= len; i += kLanes)
    for (int k = 0; k < kLanes; ++k) acc[k] += x(i + k);
  for (; i < len; ++i) acc[0] += x(i);
  double sum = 0;
  for (double a : acc) sum += a;
  Moments m;
  m.n = static_cast<double>(len);
  m.mean = sum / m.n;
  double q[kLanes] = {}, gs[kLanes] = {}, gd[kLanes] = {};
  auto take = [&](int k, int64_t j) {
    const double d = x(j) - m.mean;
    q[k] += d * d;
    if constexpr (kGrad) {
      gs[k] += g(j);
      gd[k] += g(j) * d;
    }
  };
  for (i = 0; i + kLanes <= len; i += kLanes)
    for (int k = 0; k < kLanes; ++k) take(k, i + k);
  for (; i < len; ++i) take(0, i);
  for (int k = 0; k < kLanes; ++k) {
    m.m2 += q[k];
    m.g += gs[k];
    m.gx += gd[k];
  }
  return m;
}

// Calls f(value reader) with a reader of p[i * stride] as double through the compute type; a
// unit stride gets its own instance, which the compiler vectorizes.
template <class T, class F>
void with_reader(const T* p, int64_t stride, F&& f) {
  using Cp = compute_t<T>;
  if (stride == 1)
    f([p](int64_t i) { return static_cast<double>(static_cast<Cp>(p[i])); });
  else
    f([p, stride](int64_t i) { return static_cast<double>(static_cast<Cp>(p[i * stride])); });
}

// run_moments of a dense f32 run (g null: without the g sums) by the vector kernels.
Moments vector_run_moments(const cpu::simd::Kernels& k, const float* x, const float* g, int64_t len) {
  Moments m;
  m.n = static_cast<double>(len);
  m.mean = k.sum(x, len) / m.n;
  m.m2 = k.sum_squared_deviations(x, m.mean, len);
  if (g != nullptr) {
    m.g = k.sum(g, len);
    m.gx = k.sum_products_about(g, x, m.mean, len);
  }
  return m;
}

// A dense run of 16-bit values widened into `buffer`.
template <class T>
float* widen(const cpu::simd::Kernels& k, const T* p, int64_t len, std::vector<float>& buffer) {
  buffer.resize(static_cast<size_t>(len));
  cpu::widen_run(k, p, buffer.data(), len);
  return buffer.data();
}

// A dense run of values as f32: itself, or 16-bit ones widened into `buffer`.
template <class T>
const float* as_floats(const cpu::simd::Kernels& k, const T* p, int64_t len, std::vector<float>& buffer) {
  if constexpr (std::is_same_v<T, float>)
    return p;
  else
    return widen(k, p, len, buffer);
}

template <class T>
constexpr bool kVectorMoments = std::is_same_v<T, float> || std::is_same_v<T, f16> || std::is_same_v<T, bf16>;

// Per channel, the moments of x (and, with g, the g sums) over the batch: pieces in parallel,
// then merged in piece order. Dense f32, f16 and bf16 runs take the vector kernels where they are active.
template <class T>
std::vector<Moments> channel_moments(const Runs& r, const T* xp, const RunStrides& xs, const T* gp,
                                     const RunStrides& gs) {
  std::vector<Moments> part(static_cast<size_t>(r.C * r.pieces));
  const cpu::simd::Kernels* simd =
      kVectorMoments<T> && xs.si == 1 && (!gp || gs.si == 1) ? cpu::simd::active_kernels() : nullptr;
  cpu::parallel_for(r.C * r.pieces, r.runs * r.len / r.pieces, [&](int64_t begin, int64_t end) {
    std::vector<float> x_buffer, g_buffer;
    for (int64_t u = begin; u < end; ++u) {
      const int64_t c = u / r.pieces, piece = u % r.pieces;
      Moments& m = part[static_cast<size_t>(u)];
      for (int64_t run = r.first_run(piece); run < r.first_run(piece + 1); ++run) {
        if constexpr (kVectorMoments<T>) {
          if (simd != nullptr) {
            const float* x = as_floats(*simd, xp + xs.at(c, run), r.len, x_buffer);
            const float* g = gp ? as_floats(*simd, gp + gs.at(c, run), r.len, g_buffer) : nullptr;
            m.merge(vector_run_moments(*simd, x, g, r.len));
            continue;
          }
        }
        with_reader(xp + xs.at(c, run), xs.si, [&](auto x) {
          if (gp)
            with_reader(gp + gs.at(c, run), gs.si, [&](auto g) { m.merge(run_moments<true>(r.len, x, g)); });
          else
            m.merge(run_moments<false>(r.len, x, x));
        });
      }
    }
  });
  std::vector<Moments> out(static_cast<size_t>(r.C));
  for (int64_t c = 0; c < r.C; ++c)
    for (int64_t piece = 0; piece < r.pieces; ++piece) out[c].merge(part[static_cast<size_t>(c * r.pieces + piece)]);
  return out;
}

// Calls f(c, run) for every run of every channel, in parallel.
template <class F>
void for_each_run(const Runs& r, F&& f) {
  cpu::parallel_for(r.C * r.pieces, r.runs * r.len / r.pieces, [&](int64_t begin, int64_t end) {
    for (int64_t u = begin; u < end; ++u) {
      const int64_t c = u / r.pieces, piece = u % r.pieces;
      for (int64_t run = r.first_run(piece); run < r.first_run(piece + 1); ++run) f(c, run);
    }
  });
}

}  // namespace

void BatchNorm::eval_cpu(const std::vector<Tensor>& in, std::vector<Tensor>& out) {
  NCS lx;
  const Tensor x = ncs_operand(in[0], &lx);
  const NCS ly = ncs_output_like(in[0], out[0]);
  const int64_t N = x.size(0), C = x.size(1), S = C == 0 || N == 0 ? 0 : x.numel() / (N * C);
  const Runs r = runs_of(N, C, S);
  const RunStrides xs(lx, S), ys(ly, S);
  size_t next = 1;
  const std::vector<double> w = has_weight_ ? host(in[next++]) : std::vector<double>(C, 1.0);
  const std::vector<double> b = has_bias_ ? host(in[next++]) : std::vector<double>(C, 0.0);
  std::vector<double> mu(C), var(C);
  if (!training_) {
    mu = host(in[next]);
    var = host(in[next + 1]);
  }
  visit_floating(x.dtype(), name(), [&]<class T>() {
    using Cp = compute_t<T>;
    const T* xp = x.data<T>();
    T* yp = out[0].data<T>();
    if (training_) {
      const std::vector<Moments> m = channel_moments<T>(r, xp, xs, nullptr, xs);
      for (int64_t c = 0; c < C; ++c) {
        mu[c] = m[c].mean;
        var[c] = m[c].m2 / m[c].n;
      }
    }
    // y = (x - mean) * scale + bias, in the compute type
    std::vector<Cp> shift(C), scale(C), bias(C);
    for (int64_t c = 0; c < C; ++c) {
      shift[c] = static_cast<Cp>(mu[c]);
      scale[c] = static_cast<Cp>(w[c] / std::sqrt(var[c] + eps_));
      bias[c] = static_cast<Cp>(b[c]);
    }
    const cpu::simd::Kernels* simd = cpu::kHalf<T> && xs.si == 1 && ys.si == 1 ? cpu::simd::active_kernels() : nullptr;
    for_each_run(r, [&](int64_t c, int64_t run) {
      const T* xr = xp + xs.at(c, run);
      T* yr = yp + ys.at(c, run);
      const Cp m = shift[c], a = scale[c], sh = bias[c];
      if constexpr (cpu::kHalf<T>) {
        if (simd != nullptr) {  // 16-bit runs in f32 blocks, converted by the vector kernels
          thread_local std::vector<float> buffer;
          float* v = widen(*simd, xr, r.len, buffer);
          for (int64_t i = 0; i < r.len; ++i) v[i] = (v[i] - m) * a + sh;
          cpu::narrow_run(*simd, v, yr, r.len);
          return;
        }
      }
      if (xs.si == 1 && ys.si == 1)
        for (int64_t i = 0; i < r.len; ++i) yr[i] = convert<T>((static_cast<Cp>(xr[i]) - m) * a + sh);
      else
        for (int64_t i = 0; i < r.len; ++i)
          yr[i * ys.si] = convert<T>((static_cast<Cp>(xr[i * xs.si]) - m) * a + sh);
    });
  });
  if (training_)
    visit_floating(out[1].dtype(), name(), [&]<class T>() {
      write_vector<T>(out[1], mu);
      write_vector<T>(out[2], var);
    });
}

// Per channel, in one pass over x and g: the statistics (training; the running ones otherwise),
// sum(g) and sum(g * (x - mean)); then dx in a second pass (see BatchNorm::vjp for the formulas).
// g may be contiguous or channels-last; dx takes x's memory format.
void BatchNormBackward::eval_cpu(const std::vector<Tensor>& in, std::vector<Tensor>& out) {
  NCS lx, lg;
  const Tensor x = ncs_operand(in[0], &lx);
  const Tensor gt = ncs_operand(in[1], &lg);
  const NCS ld = ncs_output_like(in[0], out[0]);
  const int64_t N = x.size(0), C = x.size(1), S = C == 0 || N == 0 ? 0 : x.numel() / (N * C);
  const double M = static_cast<double>(N * S);
  size_t next = 2;
  const std::vector<double> w = has_weight_ ? host(in[next++]) : std::vector<double>(C, 1.0);
  const std::vector<double> a = host(in[next]), b = host(in[next + 1]);  // g_mean, g_var or running stats
  std::vector<double> dw(C), db(C);
  if (x.numel() > 0) {
    const Runs r = runs_of(N, C, S);
    const RunStrides xs(lx, S), gs(lg, S), ds(ld, S);
    visit_floating(x.dtype(), name(), [&]<class T>() {
      using Cp = compute_t<T>;
      const T* xp = x.data<T>();
      const T* gp = gt.data<T>();
      T* dxp = out[0].data<T>();
      const std::vector<Moments> mom = channel_moments<T>(r, xp, xs, gp, gs);
      // dx = k * g + (x - m) * slope + offset, per channel
      std::vector<Cp> k(C), m(C), slope(C), offset(C);
      for (int64_t c = 0; c < C; ++c) {
        const Moments& s = mom[c];
        const double mean = training_ ? s.mean : a[c];
        const double rstd = 1.0 / std::sqrt((training_ ? s.m2 / s.n : b[c]) + eps_);
        const double sgx = s.gx + (s.mean - mean) * s.g;  // sum(g * (x - mean))
        dw[c] = sgx * rstd;
        db[c] = s.g;
        const double kc = w[c] * rstd;
        k[c] = static_cast<Cp>(kc);
        m[c] = static_cast<Cp>(mean);
        slope[c] = static_cast<Cp>(training_ ? (2.0 * b[c] - kc * rstd * dw[c]) / M : 0.0);
        offset[c] = static_cast<Cp>(training_ ? (a[c] - kc * s.g) / M : 0.0);
      }
      const cpu::simd::Kernels* simd =
          cpu::kHalf<T> && xs.si == 1 && gs.si == 1 && ds.si == 1 ? cpu::simd::active_kernels() : nullptr;
      for_each_run(r, [&](int64_t c, int64_t run) {
        const T* xr = xp + xs.at(c, run);
        const T* gr = gp + gs.at(c, run);
        T* dr = dxp + ds.at(c, run);
        const Cp kc = k[c], mc = m[c], sl = slope[c], off = offset[c];
        if constexpr (cpu::kHalf<T>) {
          if (simd != nullptr) {  // 16-bit runs in f32 blocks, converted by the vector kernels
            thread_local std::vector<float> x_buffer, g_buffer;
            const float* xv = widen(*simd, xr, r.len, x_buffer);
            float* gv = widen(*simd, gr, r.len, g_buffer);
            if (training_)
              for (int64_t i = 0; i < r.len; ++i) gv[i] = kc * gv[i] + (xv[i] - mc) * sl + off;
            else
              for (int64_t i = 0; i < r.len; ++i) gv[i] = kc * gv[i];
            cpu::narrow_run(*simd, gv, dr, r.len);
            return;
          }
        }
        auto dx = [&](Cp xv, Cp gv) { return convert<T>(training_ ? kc * gv + (xv - mc) * sl + off : kc * gv); };
        if (xs.si == 1 && gs.si == 1 && ds.si == 1)
          for (int64_t i = 0; i < r.len; ++i) dr[i] = dx(static_cast<Cp>(xr[i]), static_cast<Cp>(gr[i]));
        else
          for (int64_t i = 0; i < r.len; ++i)
            dr[i * ds.si] = dx(static_cast<Cp>(xr[i * xs.si]), static_cast<Cp>(gr[i * gs.si]));
      });
    });
  }
  visit_floating(out[1].dtype(), name(), [&]<class T>() {
    write_vector<T>(out[1], dw);
    write_vector<T>(out[2], db);
  });
}

namespace {

// A layer norm row's count, mean and m2, accumulated in double; f32 rows by the vector kernels when
// there are.
template <class T>
Moments row_moments(const T* x, int64_t n, const cpu::simd::Kernels* simd) {
  if constexpr (std::is_same_v<T, float>)
    if (simd != nullptr) return vector_run_moments(*simd, x, nullptr, n);
  using Cp = compute_t<T>;
  double s = 0, q = 0;
  for (int64_t j = 0; j < n; ++j) s += static_cast<double>(static_cast<Cp>(x[j]));
  const double mean = s / static_cast<double>(n);
  for (int64_t j = 0; j < n; ++j) {
    const double d = static_cast<double>(static_cast<Cp>(x[j])) - mean;
    q += d * d;
  }
  return {static_cast<double>(n), mean, q};
}

}  // namespace

void LayerNorm::eval_cpu(const std::vector<Tensor>& in, std::vector<Tensor>& out) {
  const Tensor& x = in[0];
  int64_t D = 1;
  for (int d = x.dim() - normalized_dims_; d < x.dim(); ++d) D *= x.size(d);
  const int64_t rows = D == 0 ? 0 : x.numel() / D;
  const std::vector<double> w = has_weight_ ? host(in[1]) : std::vector<double>();
  const std::vector<double> b = has_bias_ ? host(in[has_weight_ ? 2 : 1]) : std::vector<double>();
  const double eps = eps_;
  const cpu::simd::Kernels* simd = cpu::simd::active_kernels();
  visit_floating(x.dtype(), name(), [&]<class T>() {
    using Cp = compute_t<T>;
    const T* xp = x.data<T>();
    T* yp = out[0].data<T>();
    cpu::parallel_for(rows, D, [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) {
        const T* xr = xp + r * D;
        T* yr = yp + r * D;
        const Moments stats = row_moments(xr, D, simd);
        const double m = stats.mean, q = stats.m2;
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

// Rows in parallel: per row the statistics, then sum(gw) and sum(gw * xhat) and dx. dw and db sum
// over rows in parts of a fixed number of rows (from the shape, never the thread count), each into
// its own vectors, merged in part order: the same bits on any number of threads.
void LayerNormBackward::eval_cpu(const std::vector<Tensor>& in, std::vector<Tensor>& out) {
  const Tensor& x = in[0];
  int64_t D = 1;
  for (int d = x.dim() - normalized_dims_; d < x.dim(); ++d) D *= x.size(d);
  const int64_t rows = D == 0 ? 0 : x.numel() / D;
  const std::vector<double> w = has_weight_ ? host(in[2]) : std::vector<double>(D, 1.0);
  std::vector<double> dw(D, 0.0), db(D, 0.0);
  const int64_t part_rows = std::max<int64_t>(cpu::kParallelGrain / std::max<int64_t>(D, 1), 1);
  const int64_t parts = (rows + part_rows - 1) / part_rows;
  std::vector<std::vector<double>> part_dw(static_cast<size_t>(parts)), part_db(static_cast<size_t>(parts));
  const double eps = eps_;
  const cpu::simd::Kernels* simd = cpu::simd::active_kernels();
  visit_floating(x.dtype(), name(), [&]<class T>() {
    using Cp = compute_t<T>;
    const T* xp = x.data<T>();
    const T* gp = in[1].data<T>();
    T* dxp = out[0].data<T>();
    // Row r: dx, and its terms of dw and db added into ldw and ldb.
    auto row = [&](int64_t r, std::vector<double>& ldw, std::vector<double>& ldb, std::vector<double>& xhat) {
      const T* xr = xp + r * D;
      const T* gr = gp + r * D;
      const Moments stats = row_moments(xr, D, simd);
      const double m = stats.mean, q = stats.m2;
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
    };
    cpu::parallel_for(parts, part_rows * D, [&](int64_t begin, int64_t end) {
      std::vector<double> xhat(D);
      for (int64_t part = begin; part < end; ++part) {
        std::vector<double>& ldw = part_dw[static_cast<size_t>(part)];
        std::vector<double>& ldb = part_db[static_cast<size_t>(part)];
        ldw.assign(static_cast<size_t>(D), 0.0);
        ldb.assign(static_cast<size_t>(D), 0.0);
        for (int64_t r = part * part_rows; r < std::min(rows, (part + 1) * part_rows); ++r) row(r, ldw, ldb, xhat);
      }
    });
  });
  for (int64_t part = 0; part < parts; ++part)
    for (int64_t j = 0; j < D; ++j) {
      dw[j] += part_dw[static_cast<size_t>(part)][j];
      db[j] += part_db[static_cast<size_t>(part)][j];
    }
  visit_floating(out[1].dtype(), name(), [&]<class T>() {
    write_vector<T>(out[1], dw);
    write_vector<T>(out[2], db);
  });
}

}  // namespace ember
