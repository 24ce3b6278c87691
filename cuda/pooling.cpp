// eval_cuda of the pooling primitives: the geometry is set up here, kernels in cuda/pooling.cu. Max
// pooling's backward needs no kernel of its own: its vjp is a scatter_add, which runs on CUDA.
#include "cuda/context.h"
#include "cuda/pooling.h"
#include "nn/primitives/pooling.h"

namespace ember {

namespace {

// Input planes x (N, C, H, W), output planes y (.., OH, OW); `strided` is the operand read.
cuda::PoolShape pool_shape(const Pool2dParams& p, const Shape& x, const Shape& y, const Tensor& strided) {
  cuda::PoolShape s{};
  s.N = x[0];
  s.C = x[1];
  s.H = x[2];
  s.W = x[3];
  s.OH = y[2];
  s.OW = y[3];
  for (int d = 0; d < 4; ++d) s.strides[d] = strided.strides()[d];
  for (int i = 0; i < 2; ++i) {
    s.kernel[i] = p.kernel[i];
    s.stride[i] = p.stride[i];
    s.padding[i] = p.padding[i];
    s.dilation[i] = p.dilation[i];
  }
  s.count_include_pad = p.count_include_pad;
  s.adaptive = p.adaptive;
  s.divisor_override = p.divisor_override;
  return s;
}

}  // namespace

void MaxPool2d::eval_cuda(const std::vector<Tensor>& in, std::vector<Tensor>& out) {
  cuda::DeviceGuard guard(out[0].device());
  cuda::launch_max_pool2d(in[0].dtype(), in[0].raw_data(), out[0].raw_data(), static_cast<int64_t*>(out[1].raw_data()),
                          pool_shape(p_, in[0].shape(), out[0].shape(), in[0]), cuda::current_stream());
}

void AvgPool2d::eval_cuda(const std::vector<Tensor>& in, std::vector<Tensor>& out) {
  cuda::DeviceGuard guard(out[0].device());
  cuda::launch_avg_pool2d(in[0].dtype(), in[0].raw_data(), out[0].raw_data(),
                          pool_shape(p_, in[0].shape(), out[0].shape(), in[0]), cuda::current_stream());
}

void AvgPool2dBackward::eval_cuda(const std::vector<Tensor>& in, std::vector<Tensor>& out) {
  cuda::DeviceGuard guard(out[0].device());
  cuda::launch_avg_pool2d_backward(in[0].dtype(), in[0].raw_data(), out[0].raw_data(),
                                   pool_shape(p_, out[0].shape(), in[0].shape(), in[0]), cuda::current_stream());
}

}  // namespace ember
