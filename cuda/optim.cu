// Multi-tensor kernels of the optimizer steps and of the total gradient norm: each block finds its
// tensor and chunk in the TensorList, reads found_inf first (the whole step is skipped on the device
// when it is nonzero) and applies the math of optim/step_math.h to its elements. Sums are taken per
// block in a fixed order and combined per chunk in order, so results do not depend on scheduling.
#include "cuda/accumulate.cuh"
#include "cuda/multi_tensor.cuh"
#include "cuda/optim.h"

namespace ember::cuda {

namespace {

constexpr int kStepThreads = 512;

__device__ __forceinline__ bool skipped(const float* found_inf) { return found_inf && *found_inf != 0.0f; }

__device__ __forceinline__ float scale_of(const StepScalars& s) { return s.grad_scale ? *s.grad_scale : 1.0f; }


template <class T>
__device__ __forceinline__ T* operand(const TensorList& l, int t, int k) {
  return static_cast<T*>(l.data[t][k]);
}

template <class T>
__global__ void __launch_bounds__(kStepThreads) sgd_kernel(TensorList l, optim::SGDStepParams given, StepScalars s) {
  if (skipped(s.found_inf)) return;
  const optim::SGDStepParams h = optim::with_scheduled(given, s.scheduled);
  const Chunk c = block_chunk(l);
  const bool first = l.step[c.t] && *l.step[c.t] == 0;
  const float scale = scale_of(s);
  T* p = operand<T>(l, c.t, 0);
  const T* g = operand<T>(l, c.t, 1);
  T* buf = operand<T>(l, c.t, 2);
  for (int64_t i = c.begin + threadIdx.x; i < c.end; i += blockDim.x) optim::sgd_element(h, p, g, buf, first, scale, i);
}

template <class T>
__global__ void __launch_bounds__(kStepThreads) adam_kernel(TensorList l, optim::AdamStepParams given, StepScalars s) {
  if (skipped(s.found_inf)) return;
  const optim::AdamStepParams h = optim::with_scheduled(given, s.scheduled);
  const Chunk c = block_chunk(l);
  const optim::BiasCorrection bc = optim::bias_correction(h.beta1, h.beta2, *l.step[c.t] + 1);
  const float scale = scale_of(s);
  T* p = operand<T>(l, c.t, 0);
  const T* g = operand<T>(l, c.t, 1);
  T* m = operand<T>(l, c.t, 2);
  T* v = operand<T>(l, c.t, 3);
  T* vmax = operand<T>(l, c.t, 4);
  for (int64_t i = c.begin + threadIdx.x; i < c.end; i += blockDim.x)
    optim::adam_element(h, bc, p, g, m, v, vmax, scale, i);
}

// LAMB phase one: moments, and the chunk's sums of p^2 and r^2 into sums[2b], sums[2b + 1].
template <class T>
__global__ void __launch_bounds__(kStepThreads)
    lamb_moments_kernel(TensorList l, optim::LAMBStepParams given, StepScalars s, double* sums) {
  if (skipped(s.found_inf)) return;
  const optim::LAMBStepParams h = optim::with_scheduled(given, s.scheduled);
  using A = float_acc_t<T>;
  __shared__ A shared[kStepThreads / 32];
  const Chunk c = block_chunk(l);
  const optim::BiasCorrection bc = optim::bias_correction(h.beta1, h.beta2, *l.step[c.t] + 1);
  const float scale = scale_of(s);
  const T* p = operand<T>(l, c.t, 0);
  const T* g = operand<T>(l, c.t, 1);
  T* m = operand<T>(l, c.t, 2);
  T* v = operand<T>(l, c.t, 3);
  A p_sq = 0, r_sq = 0;
  for (int64_t i = c.begin + threadIdx.x; i < c.end; i += blockDim.x)
    optim::lamb_moments_element(h, bc, p, g, m, v, scale, i, p_sq, r_sq);
  p_sq = group_all_reduce<true>(p_sq, AddOp{}, shared);
  r_sq = group_all_reduce<true>(r_sq, AddOp{}, shared);
  if (threadIdx.x == 0) {
    sums[2 * blockIdx.x] = p_sq;
    sums[2 * blockIdx.x + 1] = r_sq;
  }
}

// Each tensor's trust ratio from its chunks' sums, added in chunk order.
__global__ void lamb_trust_kernel(TensorList l, const float* found_inf, const double* sums, double* trust) {
  if (skipped(found_inf)) return;
  const int t = static_cast<int>(threadIdx.x);
  if (t >= l.count) return;
  double p_sq = 0, r_sq = 0;
  for (int32_t b = l.first_chunk[t]; b < l.first_chunk[t + 1]; ++b) {
    p_sq += sums[2 * b];
    r_sq += sums[2 * b + 1];
  }
  trust[t] = optim::lamb_trust(p_sq, r_sq);
}

template <class T>
__global__ void __launch_bounds__(kStepThreads)
    lamb_apply_kernel(TensorList l, optim::LAMBStepParams given, StepScalars s, const double* trust) {
  if (skipped(s.found_inf)) return;
  const optim::LAMBStepParams h = optim::with_scheduled(given, s.scheduled);
  const Chunk c = block_chunk(l);
  const optim::BiasCorrection bc = optim::bias_correction(h.beta1, h.beta2, *l.step[c.t] + 1);
  T* p = operand<T>(l, c.t, 0);
  const T* m = operand<T>(l, c.t, 2);
  const T* v = operand<T>(l, c.t, 3);
  const double r = trust[c.t];
  for (int64_t i = c.begin + threadIdx.x; i < c.end; i += blockDim.x) optim::lamb_apply_element(h, bc, r, p, m, v, i);
}

__global__ void advance_steps_kernel(TensorList l, const float* found_inf) {
  if (skipped(found_inf)) return;
  const int t = static_cast<int>(threadIdx.x);
  if (t < l.count && l.step[t]) *l.step[t] += 1;
}

struct NormOp {
  optim::NormKind kind;
  template <class V>
  __device__ __forceinline__ V operator()(V a, V b) const {
    return optim::norm_combine(kind, a, b);
  }
};

template <class T>
__global__ void __launch_bounds__(kStepThreads)
    norm_partials_kernel(TensorList l, optim::NormKind kind, double norm_type, double* partials) {
  using A = float_acc_t<T>;
  __shared__ A shared[kStepThreads / 32];
  const Chunk c = block_chunk(l);
  const T* x = operand<T>(l, c.t, 0);
  A acc = 0;
  for (int64_t i = c.begin + threadIdx.x; i < c.end; i += blockDim.x)
    acc = optim::norm_combine(kind, acc, optim::norm_term(kind, norm_type, load_as<A>(x[i])));
  acc = group_all_reduce<true>(acc, NormOp{kind}, shared);
  if (threadIdx.x == 0) partials[blockIdx.x] = acc;
}

template <class O>
__global__ void __launch_bounds__(kStepThreads)
    norm_finish_kernel(const double* partials, int64_t n, optim::NormKind kind, double norm_type, O* out) {
  __shared__ double shared[kStepThreads / 32];
  double acc = 0;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) acc = optim::norm_combine(kind, acc, partials[i]);
  acc = group_all_reduce<true>(acc, NormOp{kind}, shared);
  if (threadIdx.x == 0) *out = static_cast<O>(optim::norm_finish(kind, norm_type, acc));
}

}  // namespace

void launch_sgd_step(DType dtype, const TensorList& l, const optim::SGDStepParams& h, StepScalars s,
                     cudaStream_t stream) {
  if (l.chunks() == 0) return;
  visit_floating(dtype, "sgd_step", [&]<class T>() {
    sgd_kernel<T><<<l.chunks(), kStepThreads, 0, stream>>>(l, h, s);
    EMBER_CUDA_LAUNCH_CHECK();
  });
}

void launch_adam_step(DType dtype, const TensorList& l, const optim::AdamStepParams& h, StepScalars s,
                      cudaStream_t stream) {
  if (l.chunks() == 0) return;
  visit_floating(dtype, "adam_step", [&]<class T>() {
    adam_kernel<T><<<l.chunks(), kStepThreads, 0, stream>>>(l, h, s);
    EMBER_CUDA_LAUNCH_CHECK();
  });
}

void launch_lamb_step(DType dtype, const TensorList& l, const optim::LAMBStepParams& h, StepScalars s,
                      double* scratch, cudaStream_t stream) {
  if (l.chunks() == 0) return;
  double* sums = scratch;
  double* trust = scratch + 2 * int64_t{l.chunks()};
  visit_floating(dtype, "lamb_step", [&]<class T>() {
    lamb_moments_kernel<T><<<l.chunks(), kStepThreads, 0, stream>>>(l, h, s, sums);
    EMBER_CUDA_LAUNCH_CHECK();
    lamb_trust_kernel<<<1, TensorList::kMaxTensors, 0, stream>>>(l, s.found_inf, sums, trust);
    EMBER_CUDA_LAUNCH_CHECK();
    lamb_apply_kernel<T><<<l.chunks(), kStepThreads, 0, stream>>>(l, h, s, trust);
    EMBER_CUDA_LAUNCH_CHECK();
  });
}

void launch_advance_steps(const TensorList& l, const float* found_inf, cudaStream_t stream) {
  if (l.count == 0) return;
  advance_steps_kernel<<<1, TensorList::kMaxTensors, 0, stream>>>(l, found_inf);
  EMBER_CUDA_LAUNCH_CHECK();
}

void launch_norm_partials(DType dtype, const TensorList& l, double norm_type, double* partials, cudaStream_t stream) {
  if (l.chunks() == 0) return;
  visit_floating(dtype, "total_norm", [&]<class T>() {
    norm_partials_kernel<T><<<l.chunks(), kStepThreads, 0, stream>>>(l, optim::norm_kind(norm_type), norm_type, partials);
    EMBER_CUDA_LAUNCH_CHECK();
  });
}

void launch_norm_finish(DType out_dtype, const double* partials, int64_t n, double norm_type, void* out,
                        cudaStream_t stream) {
  const optim::NormKind kind = optim::norm_kind(norm_type);
  if (out_dtype == DType::f64)
    norm_finish_kernel<double><<<1, kStepThreads, 0, stream>>>(partials, n, kind, norm_type, static_cast<double*>(out));
  else
    norm_finish_kernel<float><<<1, kStepThreads, 0, stream>>>(partials, n, kind, norm_type, static_cast<float*>(out));
  EMBER_CUDA_LAUNCH_CHECK();
}

}  // namespace ember::cuda
