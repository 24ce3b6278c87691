// eval_cuda of the fused cross entropy: shapes, partial buffers and the error slot are set up here,
// kernels in cuda/loss.cu. A bad target raises IndexError at the next synchronisation (the CPU
// kernel raises at once).
#include "autograd/grad_mode.h"
#include "cuda/loss.h"
#include "nn/primitives/loss.h"

namespace ember {

namespace {

// Arguments common to both directions: logits (N, C, S) and target (N, S), contiguous.
cuda::CrossEntropyArgs loss_args(const Tensor& x, const Tensor& t, Reduction r, int64_t ignore_index,
                                 double label_smoothing) {
  cuda::CrossEntropyArgs a;
  a.N = x.size(0);
  a.C = x.size(1);
  a.S = a.N * a.C == 0 ? 0 : x.numel() / (a.N * a.C);
  a.logits = x.raw_data();
  a.target = t.raw_data();
  a.target_dtype = t.dtype();
  a.reduction = r == Reduction::none  ? cuda::LossReduction::none
                : r == Reduction::sum ? cuda::LossReduction::sum
                                      : cuda::LossReduction::mean;
  a.ignore_index = ignore_index;
  a.label_smoothing = label_smoothing;
  a.errors = cuda::kernel_error_slot();
  return a;
}

Tensor scratch(int64_t n, DType dtype, Device device) {
  return Tensor::empty({n}, TensorOptions(dtype).with_device(device));
}

}  // namespace

void CrossEntropy::eval_cuda(const std::vector<Tensor>& in, std::vector<Tensor>& out) {
  cuda::DeviceGuard guard(out[0].device());
  const Tensor &x = in[0], &t = in[1];
  cuda::CrossEntropyArgs a = loss_args(x, t, reduction_, ignore_index_, label_smoothing_);
  a.out = out[0].raw_data();
  Tensor partial_loss, partial_count;  // per block, for the sum or mean
  if (reduction_ != Reduction::none) {
    partial_loss = scratch(cuda::kCrossEntropyMaxBlocks, x.dtype() == DType::f64 ? DType::f64 : DType::f32, x.device());
    partial_count = scratch(cuda::kCrossEntropyMaxBlocks, DType::i64, x.device());
    a.partial_loss = partial_loss.raw_data();
    a.partial_count = partial_count.raw_data();
  }
  cuda::launch_cross_entropy(x.dtype(), a, cuda::current_stream());
}

void CrossEntropyBackward::eval_cuda(const std::vector<Tensor>& in, std::vector<Tensor>& out) {
  cuda::DeviceGuard guard(out[0].device());
  const Tensor &x = in[0], &t = in[1];
  NoGradGuard no_grad;
  const Tensor g = in[2].to(x.dtype()).contiguous();  // a root gradient may come in another dtype
  cuda::CrossEntropyArgs a = loss_args(x, t, reduction_, ignore_index_, label_smoothing_);
  a.g = g.raw_data();
  a.out = out[0].raw_data();
  Tensor count;  // of the kept positions, for the mean
  if (reduction_ == Reduction::mean) {
    count = scratch(1, DType::i64, x.device());
    a.partial_count = count.raw_data();
  }
  cuda::launch_cross_entropy_backward(x.dtype(), a, cuda::current_stream());
}

}  // namespace ember
