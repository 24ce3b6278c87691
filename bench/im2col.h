// The CPU conv baseline: im2col (or col2im) of each image, then one BLAS GEMM per image, the way
// Caffe-era frameworks ran conv2d. NCHW f32, stride and padding on both axes alike.
#pragma once

#include <vector>

#include "bench/conv_case.h"

namespace bench {

class Im2colConv {
 public:
  explicit Im2colConv(const ConvCase& c);
  // forward: y = conv(x, w); backward data: dx from dy and w; backward filter: dw from dy and x.
  void forward(const float* x, const float* w, float* y);
  void backward_data(const float* dy, const float* w, float* dx);
  void backward_filter(const float* dy, const float* x, float* dw);

 private:
  void im2col(const float* x);        // one image (C, H, W) -> cols_ (C k k, OH OW)
  void col2im(float* dx) const;       // cols_ -> one image, summing overlaps
  ConvCase c_;
  int rows_ = 0, cols_count_ = 0;     // C k k and OH OW
  std::vector<float> cols_, dw_image_;
};

}  // namespace bench
