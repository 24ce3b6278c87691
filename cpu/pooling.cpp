// CPU kernels of the pooling primitives: direct loops over windows, one (n, c) plane per task,
// inputs read through their strides (channels-last included); outputs are NCHW-contiguous.
#include <cmath>
#include <limits>

#include "cpu/parallel.h"
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

// The input window of output (i, j) of average pooling, clipped to the input, and its divisor.
struct Window {
  int64_t h0, h1, w0, w1, divisor;
};

Window avg_window(const Pool2dParams& p, const Plane& s, int64_t i, int64_t j) {
  if (p.adaptive) {
    const int64_t h0 = i * s.H / s.OH, h1 = ((i + 1) * s.H + s.OH - 1) / s.OH;
    const int64_t w0 = j * s.W / s.OW, w1 = ((j + 1) * s.W + s.OW - 1) / s.OW;
    return {h0, h1, w0, w1, (h1 - h0) * (w1 - w0)};
  }
  int64_t h0 = i * p.stride[0] - p.padding[0], w0 = j * p.stride[1] - p.padding[1];
  int64_t h1 = std::min(h0 + p.kernel[0], s.H + p.padding[0]), w1 = std::min(w0 + p.kernel[1], s.W + p.padding[1]);
  const int64_t padded = (h1 - h0) * (w1 - w0);
  h0 = std::max<int64_t>(h0, 0);
  w0 = std::max<int64_t>(w0, 0);
  h1 = std::min(h1, s.H);
  w1 = std::min(w1, s.W);
  return {h0, h1, w0, w1, p.count_include_pad ? padded : (h1 - h0) * (w1 - w0)};
}

Plane plane_of(const Shape& x, const Shape& y) { return {x[0], x[1], x[2], x[3], y[2], y[3]}; }

template <class T>
using C = compute_t<T>;

}  // namespace

void MaxPool2d::eval_cpu(const std::vector<Tensor>& in, std::vector<Tensor>& out) {
  const Plane s = plane_of(in[0].shape(), out[0].shape());
  const Strides4 xs(in[0]);
  int64_t* idx = out[1].data<int64_t>();
  visit_floating(in[0].dtype(), name(), [&]<class T>() {
    const T* x = in[0].data<T>();
    T* y = out[0].data<T>();
    cpu::parallel_for(s.N * s.C, s.OH * s.OW * p_.kernel[0] * p_.kernel[1], [&](int64_t begin, int64_t end) {
      for (int64_t nc = begin; nc < end; ++nc) {
        const T* plane = x + (nc / s.C) * xs.n + (nc % s.C) * xs.c;
        for (int64_t i = 0; i < s.OH; ++i)
          for (int64_t j = 0; j < s.OW; ++j) {
            C<T> best = -std::numeric_limits<C<T>>::infinity();
            int64_t arg = -1;
            for (int64_t ki = 0; ki < p_.kernel[0]; ++ki) {
              const int64_t h = i * p_.stride[0] - p_.padding[0] + ki * p_.dilation[0];
              if (h < 0 || h >= s.H) continue;
              for (int64_t kj = 0; kj < p_.kernel[1]; ++kj) {
                const int64_t w = j * p_.stride[1] - p_.padding[1] + kj * p_.dilation[1];
                if (w < 0 || w >= s.W) continue;
                const C<T> v = static_cast<C<T>>(plane[h * xs.h + w * xs.w]);
                if (arg < 0 || v > best || std::isnan(v)) {
                  best = v;
                  arg = h * s.W + w;
                  if (std::isnan(v)) goto done;
                }
              }
            }
          done:
            const int64_t o = (nc * s.OH + i) * s.OW + j;
            y[o] = convert<T>(best);
            idx[o] = arg;
          }
      }
    });
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
            const Window win = avg_window(p_, s, i, j);
            double acc = 0;
            for (int64_t h = win.h0; h < win.h1; ++h)
              for (int64_t w = win.w0; w < win.w1; ++w) acc += static_cast<double>(static_cast<C<T>>(plane[h * xs.h + w * xs.w]));
            y[(nc * s.OH + i) * s.OW + j] = convert<T>(win.divisor > 0 ? acc / win.divisor : 0.0);
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
            const Window win = avg_window(p_, s, i, j);
            if (win.divisor <= 0) continue;
            const double v = static_cast<double>(static_cast<C<T>>(plane[i * gs.h + j * gs.w])) / win.divisor;
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
