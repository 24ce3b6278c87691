// bench/im2col.h: the loops of im2col/col2im and the per-image GEMMs.
#include "bench/im2col.h"

#include <algorithm>
#include <cstddef>

#include "bench/blas.h"

namespace bench {

Im2colConv::Im2colConv(const ConvCase& c)
    : c_(c),
      rows_(static_cast<int>(c.c * c.k * c.k)),
      cols_count_(static_cast<int>(c.out_h() * c.out_w())),
      cols_(static_cast<size_t>(rows_) * cols_count_),
      dw_image_(static_cast<size_t>(c.o) * rows_) {}

void Im2colConv::im2col(const float* x) {
  const int64_t oh = c_.out_h(), ow = c_.out_w();
  float* out = cols_.data();
  for (int64_t ch = 0; ch < c_.c; ++ch)
    for (int64_t ky = 0; ky < c_.k; ++ky)
      for (int64_t kx = 0; kx < c_.k; ++kx)
        for (int64_t y = 0; y < oh; ++y) {
          const int64_t iy = y * c_.stride - c_.pad + ky;
          for (int64_t xo = 0; xo < ow; ++xo) {
            const int64_t ix = xo * c_.stride - c_.pad + kx;
            *out++ = (iy >= 0 && iy < c_.h && ix >= 0 && ix < c_.w) ? x[(ch * c_.h + iy) * c_.w + ix] : 0.0f;
          }
        }
}

void Im2colConv::col2im(float* dx) const {
  const int64_t oh = c_.out_h(), ow = c_.out_w();
  std::fill(dx, dx + c_.c * c_.h * c_.w, 0.0f);
  const float* in = cols_.data();
  for (int64_t ch = 0; ch < c_.c; ++ch)
    for (int64_t ky = 0; ky < c_.k; ++ky)
      for (int64_t kx = 0; kx < c_.k; ++kx)
        for (int64_t y = 0; y < oh; ++y) {
          const int64_t iy = y * c_.stride - c_.pad + ky;
          for (int64_t xo = 0; xo < ow; ++xo, ++in) {
            const int64_t ix = xo * c_.stride - c_.pad + kx;
            if (iy >= 0 && iy < c_.h && ix >= 0 && ix < c_.w) dx[(ch * c_.h + iy) * c_.w + ix] += *in;
          }
        }
}

void Im2colConv::forward(const float* x, const float* w, float* y) {
  const int o = static_cast<int>(c_.o);
  for (int64_t i = 0; i < c_.n; ++i) {
    im2col(x + i * c_.c * c_.h * c_.w);
    blas_sgemm(1, o, cols_count_, rows_, w, false, cols_.data(), false, y + i * c_.o * cols_count_);  // W @ cols
  }
}

void Im2colConv::backward_data(const float* dy, const float* w, float* dx) {
  const int o = static_cast<int>(c_.o);
  for (int64_t i = 0; i < c_.n; ++i) {
    blas_sgemm(1, rows_, cols_count_, o, w, true, dy + i * c_.o * cols_count_, false, cols_.data());  // W^T @ dy
    col2im(dx + i * c_.c * c_.h * c_.w);
  }
}

void Im2colConv::backward_filter(const float* dy, const float* x, float* dw) {
  const int o = static_cast<int>(c_.o);
  for (int64_t i = 0; i < c_.n; ++i) {
    im2col(x + i * c_.c * c_.h * c_.w);
    float* target = i == 0 ? dw : dw_image_.data();
    blas_sgemm(1, o, rows_, cols_count_, dy + i * c_.o * cols_count_, false, cols_.data(), true, target);  // dy @ cols^T
    if (i > 0) std::transform(dw, dw + dw_image_.size(), dw_image_.data(), dw, [](float a, float b) { return a + b; });
  }
}

}  // namespace bench
