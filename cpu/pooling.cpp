// CPU kernels of the pooling primitives: direct loops over windows (2x2 max pooling on the vector
// kernels, cpu/simd_math.h), one (n, c) plane per task,
// inputs read through their strides (channels-last included); outputs are NCHW-contiguous.
#include <algorithm>
#include <bit>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <utility>
#include <vector>

#include "cpu/half_runs.h"
#include "cpu/parallel.h"
#include "cpu/simd_math.h"
#include "nn/primitives/avg_pool_window.h"
#include "nn/primitives/pooling.h"
#include "tensor/convert.h"
#include "tensor/ops.h"

namespace ember {

namespace {

struct Plane {
  int64_t N, C, H, W, OH, OW;
};

// Element strides (n, c, h, w) of a 4-D tensor.
struct Strides4 {
  int64_t n, c, h, w;
  explicit Strides4(const Tensor& t) : n(t.strides()[0]), c(t.strides()[1]), h(t.strides()[2]), w(t.strides()[3]) {}
};

Plane plane_of(const Shape& x, const Shape& y) { return {x[0], x[1], x[2], x[3], y[2], y[3]}; }

template <class T>
using C = compute_t<T>;

// The taps [lo, hi) of a window starting at `start` (with dilation d, k taps) that fall inside [0, size).
std::pair<int64_t, int64_t> inside_taps(int64_t start, int64_t d, int64_t k, int64_t size) {
  const int64_t lo = start >= 0 ? 0 : (-start + d - 1) / d;
  const int64_t hi = start > size - 1 ? 0 : std::min(k, (size - 1 - start) / d + 1);
  return {lo, std::max(lo, hi)};
}

// take ? a : b, without a branch.
template <class V>
V select(bool take, V a, V b) {
  using U = std::conditional_t<sizeof(V) == 8, uint64_t, std::conditional_t<sizeof(V) == 4, uint32_t, uint16_t>>;
  const U mask = static_cast<U>(U(0) - static_cast<U>(take));
  return std::bit_cast<V>(static_cast<U>((std::bit_cast<U>(a) & mask) | (std::bit_cast<U>(b) & ~mask)));
}

// What max pooling of one plane reads: sizes, steps and the input's element strides.
struct MaxPlane {
  int64_t H, W, OH, OW, kh, kw, sh, sw, ph, pw, dh, dw, xh, xw;
  int64_t jlo, jhi;  // the output columns whose windows have all kw taps inside
};

// A window size fixed at compile time (K > 0), or read from g (K == 0).
template <int64_t K>
auto window_size(int64_t runtime) {
  if constexpr (K > 0)
    return std::integral_constant<int64_t, K>{};
  else
    return runtime;
}

// One plane into y and idx (its OH x OW outputs). Each window's in-bounds taps are found per output
// row and, at the borders only, per column, so that no loop over taps checks bounds. Which tap wins
// is a coin toss on real data, so the running maximum is updated through masks, not branches.
// Windows whole inside the plane loop over KH x KW taps known at compile time (common sizes): fully
// unrolled, about 3x faster. `g` comes by value: fields the output stores might alias would
// otherwise be reloaded.
template <class T, int64_t KH, int64_t KW>
void max_pool_plane(const MaxPlane g, const T* plane, T* y, int64_t* idx) {
  const auto kh = window_size<KH>(g.kh), kw = window_size<KW>(g.kw);
  const std::integral_constant<int64_t, 0> zero;
  for (int64_t i = 0; i < g.OH; ++i) {
    const int64_t h0 = i * g.sh - g.ph;
    // Named, not a structured binding: the lambdas below capture them (clang before 16 cannot).
    const std::pair<int64_t, int64_t> rows = inside_taps(h0, g.dh, g.kh, g.H);
    const int64_t ki0 = rows.first, ki1 = rows.second;
    // Output j from the taps [ka, kb) x [kc, kd) of its window, not empty; padding counts as -inf.
    auto window = [&](int64_t j, auto ka, auto kb, auto kc, auto kd) {
      const int64_t w0 = j * g.sw - g.pw;
      // The winner is kept as read too, so that a 16-bit one is stored without a round trip.
      T best_read = plane[(h0 + ka * g.dh) * g.xh + (w0 + kc * g.dw) * g.xw];
      C<T> best = static_cast<C<T>>(best_read);
      int64_t arg = (h0 + ka * g.dh) * g.W + w0 + kc * g.dw;
      for (int64_t ki = ka; ki < kb; ++ki)
        for (int64_t kj = kc; kj < kd; ++kj) {
          const int64_t h = h0 + ki * g.dh, w = w0 + kj * g.dw;
          const T read = plane[h * g.xh + w * g.xw];
          const C<T> v = static_cast<C<T>>(read);
          const bool take = !(v <= best) & (best == best);  // greater, or a NaN unless one came first
          best = select(take, v, best);
          best_read = select(take, read, best_read);
          arg = select(take, h * g.W + w, arg);
        }
      y[i * g.OW + j] = best_read;
      idx[i * g.OW + j] = arg;
    };
    auto clipped = [&](int64_t j) {
      const auto [kj0, kj1] = inside_taps(j * g.sw - g.pw, g.dw, g.kw, g.W);
      if (ki0 < ki1 && kj0 < kj1) {
        window(j, ki0, ki1, kj0, kj1);
      } else {
        y[i * g.OW + j] = convert<T>(-std::numeric_limits<C<T>>::infinity());
        idx[i * g.OW + j] = -1;
      }
    };
    if (ki0 != 0 || ki1 != g.kh) {
      for (int64_t j = 0; j < g.OW; ++j) clipped(j);
      continue;
    }
    for (int64_t j = 0; j < g.jlo; ++j) clipped(j);
    for (int64_t j = g.jlo; j < g.jhi; ++j) window(j, zero, kh, zero, kw);
    for (int64_t j = g.jhi; j < g.OW; ++j) clipped(j);
  }
}

// Max pooling of one plane by 2x2 windows at stride 2, all inside the plane, with dense rows: the
// vector kernel a row pair at a time, 16-bit rows widened to f32 first (the maximum is one of the
// values, so narrowing it back is exact).
template <class T>
void max_pool_2x2_plane(const cpu::simd::Kernels& k, const MaxPlane g, const T* plane, T* y, int64_t* idx) {
  thread_local std::vector<float> buffer;
  buffer.resize(static_cast<size_t>(6 * g.OW));  // tap, and for 16-bit: two rows and y
  float *tap = buffer.data(), *a = tap + g.OW, *b = a + 2 * g.OW, *row_max = b + 2 * g.OW;
  for (int64_t i = 0; i < g.OH; ++i) {
    const T* top = plane + 2 * i * g.xh;
    T* out = y + i * g.OW;
    if constexpr (std::is_same_v<T, float>) {
      k.max_pool_2x2(top, top + g.xh, out, tap, g.OW);
    } else {
      cpu::widen_run(k, top, a, 2 * g.OW);
      cpu::widen_run(k, top + g.xh, b, 2 * g.OW);
      k.max_pool_2x2(a, b, row_max, tap, g.OW);
      cpu::narrow_run(k, row_max, out, g.OW);
    }
    for (int64_t j = 0; j < g.OW; ++j) {
      const int t = static_cast<int>(tap[j]);
      idx[i * g.OW + j] = (2 * i + t / 2) * g.W + 2 * j + t % 2;
    }
  }
}

}  // namespace

void MaxPool2d::eval_cpu(const std::vector<Tensor>& in, std::vector<Tensor>& out) {
  const Plane s = plane_of(in[0].shape(), out[0].shape());
  const Strides4 xs(in[0]);
  MaxPlane g{s.H, s.W, s.OH, s.OW, p_.kernel[0], p_.kernel[1], p_.stride[0], p_.stride[1], p_.padding[0],
             p_.padding[1], p_.dilation[0], p_.dilation[1], xs.h, xs.w, 0, 0};
  const int64_t last = s.W - 1 + g.pw - (g.kw - 1) * g.dw;  // the furthest start of a window inside
  g.jlo = std::min((g.pw + g.sw - 1) / g.sw, s.OW);
  g.jhi = std::clamp<int64_t>(last < 0 ? 0 : last / g.sw + 1, g.jlo, s.OW);
  int64_t* idx = out[1].data<int64_t>();
  visit_floating(in[0].dtype(), name(), [&]<class T>() {
    const T* x = in[0].data<T>();
    T* y = out[0].data<T>();
    auto planes = [&](auto plane_kernel) {
      cpu::parallel_for(s.N * s.C, s.OH * s.OW * g.kh * g.kw, [&](int64_t begin, int64_t end) {
        for (int64_t nc = begin; nc < end; ++nc)
          plane_kernel(g, x + (nc / s.C) * xs.n + (nc % s.C) * xs.c, y + nc * s.OH * s.OW, idx + nc * s.OH * s.OW);
      });
    };
    const cpu::simd::Kernels* simd = cpu::simd::active_kernels();
    const bool pairs = g.kh == 2 && g.kw == 2 && g.sh == 2 && g.sw == 2 && g.ph == 0 && g.pw == 0 && g.dh == 1 &&
                       g.dw == 1 && g.xw == 1 && 2 * g.OH <= g.H && 2 * g.OW <= g.W;
    if constexpr (std::is_same_v<T, float> || cpu::kHalf<T>) {
      if (pairs && simd != nullptr) {
        planes([simd](const MaxPlane g, const T* plane, T* y, int64_t* idx) { max_pool_2x2_plane(*simd, g, plane, y, idx); });
        return;
      }
    }
    if (g.kh == 2 && g.kw == 2)
      planes(max_pool_plane<T, 2, 2>);
    else if (g.kh == 3 && g.kw == 3)
      planes(max_pool_plane<T, 3, 3>);
    else
      planes(max_pool_plane<T, 0, 0>);
  });
}

void AvgPool2d::eval_cpu(const std::vector<Tensor>& in, std::vector<Tensor>& out) {
  const Plane s = plane_of(in[0].shape(), out[0].shape());
  const Strides4 xs(in[0]);
  visit_floating(in[0].dtype(), name(), [&]<class T>() {
    const T* x = in[0].data<T>();
    T* y = out[0].data<T>();
    cpu::parallel_for(s.N * s.C, std::max<int64_t>(s.H * s.W, s.OH * s.OW), [&](int64_t begin, int64_t end) {
      for (int64_t nc = begin; nc < end; ++nc) {
        const T* plane = x + (nc / s.C) * xs.n + (nc % s.C) * xs.c;
        for (int64_t i = 0; i < s.OH; ++i)
          for (int64_t j = 0; j < s.OW; ++j) {
            const AvgPoolWindow win = avg_pool_window(p_, s, i, j);
            double acc = 0;
            for (int64_t h = win.h0; h < win.h1; ++h)
              for (int64_t w = win.w0; w < win.w1; ++w) acc += static_cast<double>(static_cast<C<T>>(plane[h * xs.h + w * xs.w]));
            y[(nc * s.OH + i) * s.OW + j] = convert<T>(win.divisor != 0 ? acc / static_cast<double>(win.divisor) : 0.0);
          }
      }
    });
  });
}

void AvgPool2dBackward::eval_cpu(const std::vector<Tensor>& in, std::vector<Tensor>& out) {
  const Plane s = plane_of(out[0].shape(), in[0].shape());
  const Strides4 gs(in[0]);
  visit_floating(in[0].dtype(), name(), [&]<class T>() {
    const T* g = in[0].data<T>();
    T* gx = out[0].data<T>();  // dense (N, C, H, W)
    cpu::parallel_for(s.N * s.C, std::max<int64_t>(s.H * s.W, s.OH * s.OW), [&](int64_t begin, int64_t end) {
      std::vector<double> acc(static_cast<size_t>(s.H * s.W));
      for (int64_t nc = begin; nc < end; ++nc) {
        std::fill(acc.begin(), acc.end(), 0.0);
        const T* plane = g + (nc / s.C) * gs.n + (nc % s.C) * gs.c;
        for (int64_t i = 0; i < s.OH; ++i)
          for (int64_t j = 0; j < s.OW; ++j) {
            const AvgPoolWindow win = avg_pool_window(p_, s, i, j);
            if (win.divisor == 0) continue;
            const double v = static_cast<double>(static_cast<C<T>>(plane[i * gs.h + j * gs.w])) / static_cast<double>(win.divisor);
            for (int64_t h = win.h0; h < win.h1; ++h)
              for (int64_t w = win.w0; w < win.w1; ++w) acc[h * s.W + w] += v;
          }
        T* dst = gx + nc * s.H * s.W;
        for (int64_t k = 0; k < s.H * s.W; ++k) dst[k] = convert<T>(acc[k]);
      }
    });
  });
}

}  // namespace ember
