// eval_cuda of the fused attention primitives and the rule for which calls they take: arguments and
// scratch are set up here, kernels in cuda/attention.cu.
#include <algorithm>
#include <cstdint>
#include <string>

#include "autograd/grad_mode.h"
#include "cuda/attention.h"
#include "cuda/context.h"
#include "cuda/error.h"
#include "nn/primitives/attention.h"
#include "tensor/deterministic.h"
#include "tensor/ops.h"

namespace ember {

namespace {

// What both directions read: q, k, v, the score rules and dropout. mask_input: the mask's place.
cuda::AttentionArgs attention_args(const AttentionParams& p, const std::vector<Tensor>& in, size_t mask_input) {
  const Tensor &q = in[0], &k = in[1], &v = in[2];
  cuda::AttentionArgs a;
  a.N = q.size(0);
  a.L = q.size(1);
  a.E = q.size(2);
  a.S = k.size(1);
  a.Ev = v.size(2);
  a.scale = p.scale;
  a.causal = p.causal;
  a.q = q.raw_data();
  a.k = k.raw_data();
  a.v = v.raw_data();
  if (p.has_mask) {
    const Tensor& m = in[mask_input];
    a.mask = m.raw_data();
    a.mask_bool = m.dtype() == DType::boolean;
    a.mask_dims = m.dim() - 2;
    for (int d = 0; d < a.mask_dims; ++d) {
      a.mask_sizes[d] = m.size(d);
      a.mask_strides[d] = m.stride(d);
    }
    a.mask_sl = m.stride(-2);
    a.mask_ss = m.stride(-1);
  }
  if (p.dropout_p > 0) {
    a.dropout_p = static_cast<float>(p.dropout_p);  // compared with f32 uniforms, as the CPU kernel does
    a.dropout_scale = 1.0 / (1.0 - p.dropout_p);
    a.counter = p.counter;
  }
  return a;
}

// Whether the kernels may read every row of these contiguous (N, rows, cols) tensors 16 bytes at a time.
bool rows_aligned(const std::vector<Tensor>& tensors) {
  return std::all_of(tensors.begin(), tensors.end(), [](const Tensor& t) {
    const auto row_bytes = static_cast<uint64_t>(t.size(-1)) * dtype_size(t.dtype());
    return reinterpret_cast<uintptr_t>(t.raw_data()) % 16 == 0 && row_bytes % 16 == 0;
  });
}

void check_supported(const char* op, const Tensor& q, const Tensor& v) {
  if (!cuda_attention_fused(q.dtype(), q.size(2), v.size(2), q.device()))
    throw NotImplementedError(std::string(op) + " on CUDA: no kernel for " + dtype_name(q.dtype()) +
                              " with head dims " + std::to_string(q.size(2)) + " and " + std::to_string(v.size(2)) +
                              " (cuda_attention_fused says which calls the kernels take)");
}

}  // namespace

bool cuda_attention_fused(DType dtype, int64_t E, int64_t Ev, Device device) {
  if (!is_floating(dtype) || E < 1 || Ev < 1 || E > cuda::kAttentionMaxHead || Ev > cuda::kAttentionMaxHead)
    return false;
  // f64 tiles take the most: head dims up to 80 fit an A100 block's 163 KB, up to 112 an H100's 227 KB.
  int most = 0;
  EMBER_CUDA_CHECK(cudaDeviceGetAttribute(&most, cudaDevAttrMaxSharedMemoryPerBlockOptin, device.index));
  const size_t need = std::max(cuda::attention_shared_bytes(dtype, E, Ev, false),
                               cuda::attention_shared_bytes(dtype, E, Ev, true));
  return need <= static_cast<size_t>(most);
}

void ScaledDotProductAttention::eval_cuda(const std::vector<Tensor>& in, std::vector<Tensor>& out) {
  cuda::DeviceGuard guard(out[0].device());
  check_supported(name(), in[0], in[2]);
  cuda::AttentionArgs a = attention_args(p_, in, 3);
  a.out = out[0].raw_data();
  a.stats = out[1].raw_data();
  a.vector_loads = rows_aligned({in[0], in[1], in[2], out[0]});
  cuda::launch_attention_forward(in[0].dtype(), a, cuda::current_stream());
}

void ScaledDotProductAttentionBackward::eval_cuda(const std::vector<Tensor>& in, std::vector<Tensor>& out) {
  alert_not_deterministic("scaled_dot_product_attention_backward on CUDA (dq is summed with atomics)");
  cuda::DeviceGuard guard(out[0].device());
  check_supported(name(), in[0], in[2]);
  NoGradGuard no_grad;
  const Tensor& q = in[0];
  cuda::AttentionArgs a = attention_args(p_, in, 6);
  a.out = in[3].raw_data();
  a.g = in[4].raw_data();
  a.stats = in[5].raw_data();
  a.dq = out[0].raw_data();
  a.dk = out[1].raw_data();
  a.dv = out[2].raw_data();
  a.vector_loads = rows_aligned({q, in[1], in[2], in[3], in[4]});
  // dq is summed over key tiles in the compute type: in dq itself for f32 and f64, else in an f32 copy.
  const DType acc = opmath_dtype(q.dtype());
  const TensorOptions opts = TensorOptions(acc).with_device(q.device());
  const Tensor dq_accum = acc == q.dtype() ? out[0] : Tensor::empty(q.shape(), opts);
  const Tensor d = Tensor::empty({a.N, a.L}, opts);
  a.dq_accum = dq_accum.raw_data();
  a.d = d.raw_data();
  cuda::launch_attention_backward(q.dtype(), a, cuda::current_stream());
  if (acc != q.dtype()) copy_(out[0], dq_accum);
}

}  // namespace ember
