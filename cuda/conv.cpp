// eval_cuda of conv2d and its two backward halves through cuDNN (cuda/cudnn_conv.h). cuDNN reads
// and writes tensors dense in NCHW or NHWC order. Each conv runs in one of them: NHWC when its
// tensors are channels-last (the primitive's flag; for the weight gradient, the input's layout),
// except in f64, which runs NCHW as PyTorch does (ATen's cudnn_conv_suggest_memory_format keeps f64
// off cuDNN's NHWC kernels). Operands dense in that order are used in place, others copied; an
// output that is not (an NHWC weight gradient, an f64 channels-last output) is written through a copy.
#include <array>

#include "autograd/grad_mode.h"
#include "cuda/cudnn_conv.h"
#include "cuda/host.h"
#include "nn/conv.h"
#include "tensor/ops.h"

namespace ember {

namespace {

using cuda::ConvDirection;

bool runs_nhwc(bool channels_last, DType dtype) { return channels_last && dtype != DType::f64; }

// True when t (NCHW-shaped) is dense in NHWC order, or in NCHW order; size-1 dims' strides never matter.
bool dense_in(const Tensor& t, bool nhwc) {
  const Shape& s = t.shape();
  const Strides& st = t.strides();
  int64_t expected = 1;
  for (int d : nhwc ? std::array<int, 4>{1, 3, 2, 0} : std::array<int, 4>{3, 2, 1, 0}) {
    if (s[d] != 1 && st[d] != expected) return false;
    expected *= s[d];
  }
  return true;
}

// t itself when dense in the layout, else a copy that is.
Tensor in_layout(const Tensor& t, bool nhwc) {
  if (dense_in(t, nhwc)) return t;
  if (!nhwc) return contiguous(t);
  return to_channels_last(t);
}

// Calls write(target) with a tensor dense in the layout that ends up in `out`: out itself, or a
// scratch tensor copied into out afterwards.
template <class F>
void write_in_layout(const Tensor& out, bool nhwc, F&& write) {
  if (dense_in(out, nhwc)) return write(out);
  const Shape& s = out.shape();
  const TensorOptions options = TensorOptions(out.dtype()).with_device(out.device());
  const Tensor scratch = nhwc ? permute(Tensor::empty({s[0], s[2], s[3], s[1]}, options), {0, 3, 1, 2})
                              : Tensor::empty(s, options);
  write(scratch);
  cuda::convert_into(out, scratch);
}

// The primitive's output (N, H, W, C) when channels_last, seen NCHW-shaped.
Tensor as_nchw(const Tensor& out, bool channels_last) { return channels_last ? permute(out, {0, 3, 1, 2}) : out; }

// An output whose sums are empty (no input channels, no output channels, or no images) is zero.
void fill_zero(const Tensor& t) {
  cuda::launch_fill(t.dtype(), true, 0.0, 0, cuda::make_strided<1>(t, {}), cuda::current_stream());
}

}  // namespace

void Conv2d::eval_cuda(const std::vector<Tensor>& in, std::vector<Tensor>& out) {
  NoGradGuard no_grad;  // the layout copies are not graph nodes
  cuda::DeviceGuard guard(out[0].device());
  const Tensor y = as_nchw(out[0], channels_last_);
  if (y.numel() == 0) return;
  if (in[0].numel() == 0 || in[1].numel() == 0) return fill_zero(y);
  const bool nhwc = runs_nhwc(channels_last_, y.dtype());
  write_in_layout(y, nhwc, [&](const Tensor& dst) {
    cuda::cudnn_convolution(ConvDirection::forward, in_layout(in[0], nhwc), in_layout(in[1], nhwc), dst, nhwc, p_);
  });
}

void Conv2dBackwardInput::eval_cuda(const std::vector<Tensor>& in, std::vector<Tensor>& out) {
  NoGradGuard no_grad;
  cuda::DeviceGuard guard(out[0].device());
  const Tensor gx = as_nchw(out[0], channels_last_);
  if (gx.numel() == 0) return;
  if (in[0].numel() == 0 || in[1].numel() == 0) return fill_zero(gx);
  const bool nhwc = runs_nhwc(channels_last_, gx.dtype());
  write_in_layout(gx, nhwc, [&](const Tensor& dst) {
    cuda::cudnn_convolution(ConvDirection::backward_data, dst, in_layout(in[1], nhwc), in_layout(in[0], nhwc), nhwc,
                            p_);
  });
}

void Conv2dBackwardWeight::eval_cuda(const std::vector<Tensor>& in, std::vector<Tensor>& out) {
  NoGradGuard no_grad;
  cuda::DeviceGuard guard(out[0].device());
  const Tensor& gw = out[0];  // (O, C/groups, kh, kw), contiguous
  if (gw.numel() == 0) return;
  if (in[0].numel() == 0 || in[1].numel() == 0) return fill_zero(gw);
  const bool nhwc = runs_nhwc(is_channels_last(in[1]), gw.dtype());
  write_in_layout(gw, nhwc, [&](const Tensor& dst) {
    cuda::cudnn_convolution(ConvDirection::backward_filter, in_layout(in[1], nhwc), dst, in_layout(in[0], nhwc), nhwc,
                            p_);
  });
}

}  // namespace ember
