// The loss-scaling kernels: the multi-tensor unscale + non-finite check, the non-finite check alone,
// and the two scale updates (one thread: the rule of optim/amp/scale_rules.h on device memory).
#include "cuda/amp.h"
#include "cuda/error.h"
#include "cuda/multi_tensor.cuh"

namespace ember::cuda {

namespace {

constexpr int kUnscaleThreads = 512;

template <class T>
__global__ void __launch_bounds__(kUnscaleThreads) unscale_kernel(TensorList l, const float* inv_scale, float* found_inf) {
  const Chunk c = block_chunk(l);
  const auto inv = static_cast<optim::step_compute_t<T>>(*inv_scale);
  T* g = static_cast<T*>(l.data[c.t][0]);
  bool bad = false;
  for (int64_t i = c.begin + threadIdx.x; i < c.end; i += blockDim.x) bad |= amp::unscale_element(g, inv, i);
  if (bad) *found_inf = 1.0f;  // every writer stores the same value
}

template <class T>
__global__ void __launch_bounds__(kUnscaleThreads) first_nonfinite_kernel(TensorList l, int32_t slot, int32_t* first) {
  if (*first <= slot) return;  // an earlier check saw one already
  const Chunk c = block_chunk(l);
  const T* x = static_cast<const T*>(l.data[c.t][0]);
  bool bad = false;
  for (int64_t i = c.begin + threadIdx.x; i < c.end; i += blockDim.x)
    bad |= amp::exponent_field(x[i]) == amp::ExponentField<T>::kAllOnes;
  if (bad) atomicMin(first, slot);
}

template <class T>
__global__ void __launch_bounds__(kUnscaleThreads)
    copy_back_kernel(TensorList l, const float* found_inf, amp::CopyBackRule rule) {
  if (*found_inf != 0.0f) return;
  const Chunk c = block_chunk(l);
  const float* m = static_cast<const float*>(l.data[c.t][0]);
  T* p = static_cast<T*>(l.data[c.t][1]);
  for (int64_t i = c.begin + threadIdx.x; i < c.end; i += blockDim.x)
    amp::copy_back_element(m, p, i, l.first_element[c.t] + i, rule);
}

__global__ void grad_scale_update_kernel(float* scale, int32_t* tracker, const float* found_inf,
                                         amp::GradScalerRule rule) {
  amp::update_grad_scale(*scale, *tracker, *found_inf != 0.0f, rule);
}

__global__ void loss_scale_update_kernel(float* scale, amp::LossScalerCounters* counters, const float* found_inf,
                                         amp::LossScalerRule rule) {
  amp::update_loss_scale(*scale, *counters, *found_inf != 0.0f, rule);
}

}  // namespace

void launch_amp_unscale(DType dtype, const TensorList& l, const float* inv_scale, float* found_inf,
                        cudaStream_t stream) {
  if (l.chunks() == 0) return;
  visit_floating(dtype, "amp_unscale", [&]<class T>() {
    unscale_kernel<T><<<l.chunks(), kUnscaleThreads, 0, stream>>>(l, inv_scale, found_inf);
    EMBER_CUDA_LAUNCH_CHECK();
  });
}

void launch_first_nonfinite(DType dtype, const TensorList& l, int32_t slot, int32_t* first, cudaStream_t stream) {
  if (l.chunks() == 0) return;
  visit_floating(dtype, "first_nonfinite", [&]<class T>() {
    first_nonfinite_kernel<T><<<l.chunks(), kUnscaleThreads, 0, stream>>>(l, slot, first);
    EMBER_CUDA_LAUNCH_CHECK();
  });
}

void launch_master_copy_back(DType dtype, const TensorList& l, const float* found_inf, const amp::CopyBackRule& rule,
                             cudaStream_t stream) {
  if (l.chunks() == 0) return;
  visit_floating(dtype, "master_copy_back", [&]<class T>() {
    copy_back_kernel<T><<<l.chunks(), kUnscaleThreads, 0, stream>>>(l, found_inf, rule);
    EMBER_CUDA_LAUNCH_CHECK();
  });
}

void launch_grad_scale_update(float* scale, int32_t* growth_tracker, const float* found_inf,
                              const amp::GradScalerRule& rule, cudaStream_t stream) {
  grad_scale_update_kernel<<<1, 1, 0, stream>>>(scale, growth_tracker, found_inf, rule);
  EMBER_CUDA_LAUNCH_CHECK();
}

void launch_loss_scale_update(float* scale, amp::LossScalerCounters* counters, const float* found_inf,
                              const amp::LossScalerRule& rule, cudaStream_t stream) {
  loss_scale_update_kernel<<<1, 1, 0, stream>>>(scale, counters, found_inf, rule);
  EMBER_CUDA_LAUNCH_CHECK();
}

}  // namespace ember::cuda
