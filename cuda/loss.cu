// Kernels of the fused cross entropy (log_softmax over dim 1 and the label-smoothed negative log
// likelihood), computing in A (float; double for f64). One thread takes each position when S > 1
// (neighbouring threads read neighbouring positions' logits), else a warp takes each row, or the
// block when rows are long. A sum or mean over positions is partial per block, then folded in block
// order by one more block (deterministic).
#include <algorithm>
#include <cmath>
#include <limits>

#include "cuda/accumulate.cuh"
#include "cuda/loss.h"
#include "tensor/convert.h"

namespace ember::cuda {

namespace {

// The logits of position p: class c at row[c * S].
__device__ __forceinline__ int64_t row_start(const CrossEntropyArgs& a, int64_t p) {
  return (p / a.S) * a.C * a.S + p % a.S;
}

// The row's max and sum of exp(x - max), each reduced over the group.
template <Group G, class A, class T>
__device__ __forceinline__ void softmax_terms(const T* row, const CrossEntropyArgs& a, A* shared, A* mx, A* sum_exp) {
  using R = RowGroup<G>;
  A m = -std::numeric_limits<A>::infinity();
  for (int64_t c = R::rank(); c < a.C; c += R::size()) m = MaxOp{}(m, load_as<A>(row[c * a.S]));
  m = R::all_reduce(m, MaxOp{}, shared);
  A s = 0;
  for (int64_t c = R::rank(); c < a.C; c += R::size()) s += std::exp(load_as<A>(row[c * a.S]) - m);
  *mx = m;
  *sum_exp = R::all_reduce(s, AddOp{}, shared);
}

// loss = lse - x[target], or (1 - e) (lse - x[target]) + e (lse - mean(x)) with label smoothing e;
// 0 where the target is ignore_index. Per position (none) or into the block's partial sum and count.
template <class T, class I, Group G>
__global__ void __launch_bounds__(kThreads) cross_entropy_kernel(CrossEntropyArgs a) {
  using A = float_acc_t<T>;
  using R = RowGroup<G>;
  __shared__ A shared[kThreads / 32];
  __shared__ int64_t shared_count[kThreads / 32];
  const T* x = static_cast<const T*>(a.logits);
  const I* t = static_cast<const I*>(a.target);
  const int64_t P = a.N * a.S;
  const A e = static_cast<A>(a.label_smoothing);
  A total = 0;
  int64_t count = 0;
  for (int64_t p = R::first(); p < P; p += R::stride()) {
    const auto k = static_cast<int64_t>(t[p]);
    A loss = 0;
    if (k != a.ignore_index) {
      const T* row = x + row_start(a, p);
      A mx, sum_exp;
      softmax_terms<G>(row, a, shared, &mx, &sum_exp);
      const A lse = mx + std::log(sum_exp);
      A sum_x = 0;
      if (e != 0) {
        for (int64_t c = R::rank(); c < a.C; c += R::size()) sum_x += load_as<A>(row[c * a.S]);
        sum_x = R::all_reduce(sum_x, AddOp{}, shared);
      }
      if (k < 0 || k >= a.C) {
        if (R::rank() == 0) report_bad_index(a.errors, kCrossEntropy, k, a.C);
        loss = std::numeric_limits<A>::quiet_NaN();
      } else {
        const A nll = lse - load_as<A>(row[k * a.S]);
        loss = e == 0 ? nll : (1 - e) * nll + e * (lse - sum_x / static_cast<A>(a.C));
      }
    }
    if (R::rank() == 0) {
      if (a.reduction == LossReduction::none) {
        static_cast<T*>(a.out)[p] = convert<T>(loss);
      } else {
        total += loss;
        count += k != a.ignore_index;
      }
    }
  }
  if (a.reduction != LossReduction::none) {
    total = group_all_reduce<true>(total, AddOp{}, shared);
    count = group_all_reduce<true>(count, AddOp{}, shared_count);
    if (threadIdx.x == 0) {
      static_cast<A*>(a.partial_loss)[blockIdx.x] = total;
      static_cast<int64_t*>(a.partial_count)[blockIdx.x] = count;
    }
  }
}

// out = the blocks' partial sums folded, divided by the kept positions for a mean (0 / 0 = NaN, as
// PyTorch). One block.
template <class T>
__global__ void __launch_bounds__(kThreads) cross_entropy_total_kernel(CrossEntropyArgs a, unsigned blocks) {
  using A = float_acc_t<T>;
  __shared__ A shared[kThreads / 32];
  __shared__ int64_t shared_count[kThreads / 32];
  A s = 0;
  int64_t n = 0;
  for (unsigned b = threadIdx.x; b < blocks; b += blockDim.x) {
    s += static_cast<const A*>(a.partial_loss)[b];
    n += static_cast<const int64_t*>(a.partial_count)[b];
  }
  s = group_all_reduce<true>(s, AddOp{}, shared);
  n = group_all_reduce<true>(n, AddOp{}, shared_count);
  if (threadIdx.x == 0)
    static_cast<T*>(a.out)[0] = convert<T>(a.reduction == LossReduction::mean ? s / static_cast<A>(n) : s);
}

// *count += the positions whose target is not ignore_index (integer atomics: order-independent).
template <class I>
__global__ void __launch_bounds__(kThreads) count_kept_kernel(CrossEntropyArgs a, unsigned long long* count) {
  __shared__ int64_t shared[kThreads / 32];
  const I* t = static_cast<const I*>(a.target);
  const int64_t P = a.N * a.S, step = int64_t{blockDim.x} * gridDim.x;
  int64_t n = 0;
  for (int64_t p = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; p < P; p += step)
    n += static_cast<int64_t>(t[p]) != a.ignore_index;
  n = group_all_reduce<true>(n, AddOp{}, shared);
  if (threadIdx.x == 0 && n != 0) atomicAdd(count, static_cast<unsigned long long>(n));
}

// dlogits = (softmax - (1 - e) onehot - e / C) * scale, 0 where the target is ignore_index; scale
// = g per position (none), g (sum) or g / count (mean) (CrossEntropy::vjp).
template <class T, class I, Group G>
__global__ void __launch_bounds__(kThreads) cross_entropy_backward_kernel(CrossEntropyArgs a) {
  using A = float_acc_t<T>;
  using R = RowGroup<G>;
  __shared__ A shared[kThreads / 32];
  const T* x = static_cast<const T*>(a.logits);
  const I* t = static_cast<const I*>(a.target);
  const T* g = static_cast<const T*>(a.g);
  T* dx = static_cast<T*>(a.out);
  const int64_t P = a.N * a.S;
  const A e = static_cast<A>(a.label_smoothing);
  A scale = 0;
  if (a.reduction == LossReduction::sum) scale = load_as<A>(g[0]);
  if (a.reduction == LossReduction::mean)
    scale = load_as<A>(g[0]) / static_cast<A>(*static_cast<const int64_t*>(a.partial_count));
  for (int64_t p = R::first(); p < P; p += R::stride()) {
    const auto k = static_cast<int64_t>(t[p]);
    const int64_t start = row_start(a, p);
    T* drow = dx + start;
    if (k == a.ignore_index) {
      for (int64_t c = R::rank(); c < a.C; c += R::size()) drow[c * a.S] = convert<T>(A(0));
      continue;
    }
    if ((k < 0 || k >= a.C) && R::rank() == 0) report_bad_index(a.errors, kCrossEntropy, k, a.C);
    const T* row = x + start;
    A mx, sum_exp;
    softmax_terms<G>(row, a, shared, &mx, &sum_exp);
    const A s = a.reduction == LossReduction::none ? load_as<A>(g[p]) : scale;
    const A inv = s / sum_exp, off = e / static_cast<A>(a.C) * s, hit = (1 - e) * s;
    for (int64_t c = R::rank(); c < a.C; c += R::size())
      drow[c * a.S] = convert<T>(std::exp(load_as<A>(row[c * a.S]) - mx) * inv - off - (c == k ? hit : A(0)));
  }
}

// Calls launch(group, blocks): a thread per position when S > 1, else a warp or a block per row.
template <class Launch>
void launch_positions(const CrossEntropyArgs& a, const Launch& launch) {
  const int64_t P = a.N * a.S;
  auto blocks = [](int64_t threads) {
    return static_cast<unsigned>(std::min<int64_t>(grid_blocks(threads, kThreads), kCrossEntropyMaxBlocks));
  };
  if (a.S > 1)
    launch(std::integral_constant<Group, Group::thread>{}, blocks(P));
  else if (a.C >= kBlockRowLength)
    launch(std::integral_constant<Group, Group::block>{}, blocks(P * kThreads));
  else
    launch(std::integral_constant<Group, Group::warp>{}, blocks(P * 32));
}

// f.template operator()<I>() with I the target's storage type (int64 or int32).
template <class F>
void visit_target(DType dtype, F&& f) {
  if (dtype == DType::i64) return f.template operator()<int64_t>();
  if (dtype == DType::i32) return f.template operator()<int32_t>();
  throw DTypeError(std::string("cross_entropy: expected an int64 or int32 target, got ") + dtype_name(dtype));
}

}  // namespace

void launch_cross_entropy(DType dtype, const CrossEntropyArgs& a, cudaStream_t stream) {
  const int64_t P = a.N * a.S;
  visit_floating(dtype, "cross_entropy", [&]<class T>() {
    unsigned blocks = 0;  // of partials for the total
    if (P > 0)
      visit_target(a.target_dtype, [&]<class I>() {
        launch_positions(a, [&](auto group, unsigned n) {
          cross_entropy_kernel<T, I, decltype(group)::value><<<n, kThreads, 0, stream>>>(a);
          EMBER_CUDA_LAUNCH_CHECK();
          blocks = n;
        });
      });
    if (a.reduction != LossReduction::none) {
      cross_entropy_total_kernel<T><<<1, kThreads, 0, stream>>>(a, blocks);
      EMBER_CUDA_LAUNCH_CHECK();
    }
  });
}

void launch_cross_entropy_backward(DType dtype, const CrossEntropyArgs& a, cudaStream_t stream) {
  const int64_t P = a.N * a.S;
  if (P == 0 || a.C == 0) return;
  visit_floating(dtype, "cross_entropy_backward", [&]<class T>() {
    visit_target(a.target_dtype, [&]<class I>() {
      if (a.reduction == LossReduction::mean) {
        auto* count = static_cast<unsigned long long*>(a.partial_count);
        EMBER_CUDA_CHECK(cudaMemsetAsync(count, 0, sizeof(*count), stream));
        count_kept_kernel<I><<<grid_blocks(P, kThreads), kThreads, 0, stream>>>(a, count);
        EMBER_CUDA_LAUNCH_CHECK();
      }
      launch_positions(a, [&](auto group, unsigned n) {
        cross_entropy_backward_kernel<T, I, decltype(group)::value><<<n, kThreads, 0, stream>>>(a);
        EMBER_CUDA_LAUNCH_CHECK();
      });
    });
  });
}

}  // namespace ember::cuda
