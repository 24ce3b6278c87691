// eval_cuda of batch norm and layer norm: operand layouts, parameters as contiguous vectors of the
// kernels' compute dtype (opmath_dtype) and the workspace are set up here; kernels in
// cuda/normalization.cu. Batch norm reads contiguous and channels-last x and g in place and writes
// its output in x's memory format, as the CPU kernels do.
#include "cuda/context.h"
#include "cuda/normalization.h"
#include "nn/primitives/batch_norm_layout.h"
#include "nn/primitives/normalization.h"

namespace ember {

namespace {

// A parameter vector (weight, bias, statistics) in the compute dtype, contiguous: p itself when it
// already is, else a converted copy.
Tensor as_vector(const Tensor& p, DType dtype) { return p.to(dtype).contiguous(); }

cuda::ChannelStrides channel_strides(const NCS& l) { return {l.sn, l.sc, l.ss}; }

// Scratch space of `n` values of `dtype` on `device`, freed in stream order after the kernels.
Tensor workspace(int64_t n, DType dtype, Device device) {
  return Tensor::empty({n}, TensorOptions(dtype).with_device(device));
}

// The cut of the per-channel reductions over x: warps across channels when they are adjacent in
// memory (channels-last, or (N, C) with S == 1), a block along each channel otherwise.
cuda::ChannelReduction plan(const NCS& lx, int64_t N, int64_t C, int64_t S) {
  return cuda::plan_channel_reduction(N, C, S, C > 1 && lx.sc == 1 && (S == 1 || lx.ss != 1));
}

// x (N, C, ...) as N, C and the product S of its spatial dims.
void batch_dims(const Tensor& x, int64_t* N, int64_t* C, int64_t* S) {
  *N = x.size(0);
  *C = x.size(1);
  *S = *C == 0 || *N == 0 ? 0 : x.numel() / (*N * *C);
}

// Layer norm's rows and row length D (the product of the last `normalized_dims` dims).
void layer_dims(const Tensor& x, int normalized_dims, int64_t* rows, int64_t* D) {
  *D = 1;
  for (int d = x.dim() - normalized_dims; d < x.dim(); ++d) *D *= x.size(d);
  *rows = *D == 0 ? 0 : x.numel() / *D;
}

}  // namespace

void BatchNorm::eval_cuda(const std::vector<Tensor>& in, std::vector<Tensor>& out) {
  cuda::DeviceGuard guard(out[0].device());
  NoGradGuard no_grad;  // the conversions below are not part of the graph
  NCS lx;
  const Tensor x = ncs_operand(in[0], &lx);
  const NCS ly = ncs_output_like(in[0], out[0]);
  int64_t N, C, S;
  batch_dims(x, &N, &C, &S);
  const DType cd = opmath_dtype(x.dtype());
  size_t next = 1;
  const Tensor w = has_weight_ ? as_vector(in[next++], cd) : Tensor();
  const Tensor b = has_bias_ ? as_vector(in[next++], cd) : Tensor();
  const Tensor rm = training_ ? Tensor() : as_vector(in[next], cd);
  const Tensor rv = training_ ? Tensor() : as_vector(in[next + 1], cd);

  cuda::BatchNormArgs a;
  a.plan = plan(lx, N, C, S);
  a.training = training_;
  a.eps = eps_;
  a.x = x.raw_data();
  a.x_strides = channel_strides(lx);
  a.out = out[0].raw_data();
  a.out_strides = channel_strides(ly);
  a.out_channels_last = ncs_is_channels_last(in[0]);
  if (w.defined()) a.weight = w.raw_data();
  if (b.defined()) a.bias = b.raw_data();
  if (training_) {
    a.mean = out[1].raw_data();
    a.var = out[2].raw_data();
  } else {
    a.running_mean = rm.raw_data();
    a.running_var = rv.raw_data();
  }
  const Tensor ws = workspace(cuda::partials_size(a.plan) + cuda::kBatchNormWorkspaceChannels * C, cd, x.device());
  a.workspace = ws.raw_data();
  cuda::launch_batch_norm(x.dtype(), a, cuda::current_stream());
}

void BatchNormBackward::eval_cuda(const std::vector<Tensor>& in, std::vector<Tensor>& out) {
  cuda::DeviceGuard guard(out[0].device());
  NoGradGuard no_grad;  // the conversions below are not part of the graph
  NCS lx, lg;
  const Tensor x = ncs_operand(in[0], &lx);
  const Tensor g = ncs_operand(in[1].to(x.dtype()), &lg);  // a root gradient may come in another dtype
  const NCS ld = ncs_output_like(in[0], out[0]);
  int64_t N, C, S;
  batch_dims(x, &N, &C, &S);
  const DType cd = opmath_dtype(x.dtype());
  const size_t next = has_weight_ ? 3 : 2;
  const Tensor w = has_weight_ ? as_vector(in[2], cd) : Tensor();
  // g_mean, g_var when training; running_mean, running_var when not
  const Tensor s0 = as_vector(in[next], cd), s1 = as_vector(in[next + 1], cd);

  cuda::BatchNormArgs a;
  a.plan = plan(lx, N, C, S);
  a.training = training_;
  a.eps = eps_;
  a.x = x.raw_data();
  a.x_strides = channel_strides(lx);
  a.g = g.raw_data();
  a.g_strides = channel_strides(lg);
  a.out = out[0].raw_data();
  a.out_strides = channel_strides(ld);
  a.out_channels_last = ncs_is_channels_last(in[0]);
  if (w.defined()) a.weight = w.raw_data();
  if (training_) {
    a.g_mean = s0.raw_data();
    a.g_var = s1.raw_data();
  } else {
    a.running_mean = s0.raw_data();
    a.running_var = s1.raw_data();
  }
  a.dweight = out[1].raw_data();
  a.dbias = out[2].raw_data();
  const Tensor ws = workspace(cuda::partials_size(a.plan) + cuda::kBatchNormWorkspaceChannels * C, cd, x.device());
  a.workspace = ws.raw_data();
  cuda::launch_batch_norm_backward(x.dtype(), a, cuda::current_stream());
}

void LayerNorm::eval_cuda(const std::vector<Tensor>& in, std::vector<Tensor>& out) {
  cuda::DeviceGuard guard(out[0].device());
  NoGradGuard no_grad;  // the conversions below are not part of the graph
  const Tensor& x = in[0];
  const DType cd = opmath_dtype(x.dtype());
  const Tensor w = has_weight_ ? as_vector(in[1], cd) : Tensor();
  const Tensor b = has_bias_ ? as_vector(in[has_weight_ ? 2 : 1], cd) : Tensor();
  cuda::LayerNormArgs a;
  layer_dims(x, normalized_dims_, &a.rows, &a.D);
  a.eps = eps_;
  a.x = x.raw_data();
  a.out = out[0].raw_data();
  if (w.defined()) a.weight = w.raw_data();
  if (b.defined()) a.bias = b.raw_data();
  cuda::launch_layer_norm(x.dtype(), a, cuda::current_stream());
}

void LayerNormBackward::eval_cuda(const std::vector<Tensor>& in, std::vector<Tensor>& out) {
  cuda::DeviceGuard guard(out[0].device());
  NoGradGuard no_grad;  // the conversions below are not part of the graph
  const Tensor& x = in[0];
  const Tensor g = in[1].to(x.dtype()).contiguous();  // a root gradient may come in another dtype
  const DType cd = opmath_dtype(x.dtype());
  const Tensor w = has_weight_ ? as_vector(in[2], cd) : Tensor();
  cuda::LayerNormArgs a;
  layer_dims(x, normalized_dims_, &a.rows, &a.D);
  a.eps = eps_;
  a.x = x.raw_data();
  a.g = g.raw_data();
  a.out = out[0].raw_data();
  if (w.defined()) a.weight = w.raw_data();
  a.dweight = out[1].raw_data();
  a.dbias = out[2].raw_data();
  // dweight and dbias sum columns of (rows, D) over rows: neighbouring columns are adjacent
  a.columns = cuda::plan_channel_reduction(a.rows, a.D, 1, true);
  const Tensor ws = workspace(2 * a.rows + cuda::partials_size(a.columns), cd, x.device());
  a.workspace = ws.raw_data();
  cuda::launch_layer_norm_backward(x.dtype(), a, cuda::current_stream());
}

}  // namespace ember
