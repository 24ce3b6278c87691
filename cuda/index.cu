// Kernels of index_select / gather (a read through an index) and index_add / scatter_add (an atomic
// add through an index, or in deterministic mode an ordered one). One walk serves each pair: see
// IndexWalk in cuda/kernels.h.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "cuda/loops.cuh"
#include "tensor/convert.h"

namespace ember::cuda {

namespace {

// Offsets of walk element i: into the direct operand, the indexed operand (without dim) and the index.
struct WalkOffsets {
  int64_t direct = 0, indexed = 0, index = 0;
};

__device__ __forceinline__ WalkOffsets walk_offsets(const IndexWalk& w, int64_t i) {
  WalkOffsets o;
  for (int d = w.nd - 1; d >= 0; --d) {
    const int64_t c = i % w.sizes[d];
    i /= w.sizes[d];
    o.direct += c * w.direct_strides[d];
    o.index += c * w.index_strides[d];
    if (d != w.dim) o.indexed += c * w.indexed_strides[d];
  }
  return o;
}

// The walk both index ops share: for each element of `direct`, checks its index and calls
// step(direct element, chosen element of `indexed`). D and X carry each side's constness.
template <class D, class X, class I, class Step>
__global__ void __launch_bounds__(kThreads) index_walk_kernel(D* direct, X* indexed, const I* index, IndexWalk w,
                                                              Step step) {
  const int64_t stride = int64_t{blockDim.x} * gridDim.x;
  for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < w.numel; i += stride) {
    const WalkOffsets o = walk_offsets(w, i);
    const auto k = static_cast<int64_t>(index[o.index]);
    if (k < 0 || k >= w.bound) {
      report_bad_index(w.errors, w.op, k, w.bound);
      continue;
    }
    step(direct[o.direct], indexed[o.indexed + k * w.indexed_strides[w.dim]]);
  }
}

__device__ __forceinline__ void atomic_add(float* p, float v) { atomicAdd(p, v); }
__device__ __forceinline__ void atomic_add(double* p, double v) { atomicAdd(p, v); }
__device__ __forceinline__ void atomic_add(int32_t* p, int32_t v) { atomicAdd(reinterpret_cast<int*>(p), v); }
__device__ __forceinline__ void atomic_add(int64_t* p, int64_t v) {
  // Two's-complement addition is the same operation on unsigned words.
  atomicAdd(reinterpret_cast<unsigned long long*>(p), static_cast<unsigned long long>(v));
}
// CUDA has no byte-wide atomic add: add into the aligned 32-bit word that holds the byte, by
// compare-and-swap, wrapping at 256 as uint8 addition does. The word never leaves the allocation's
// mapped memory (device allocations are 256-byte aligned); its other bytes are written back unchanged.
__device__ __forceinline__ void atomic_add(uint8_t* p, uint8_t v) {
  const auto address = reinterpret_cast<uintptr_t>(p);
  auto* word = reinterpret_cast<unsigned int*>(address & ~uintptr_t{3});
  const unsigned shift = static_cast<unsigned>(address & 3) * 8;
  unsigned old = *word, assumed;
  do {
    assumed = old;
    const unsigned sum = ((assumed >> shift) + v) & 0xffu;
    old = atomicCAS(word, assumed, (assumed & ~(0xffu << shift)) | (sum << shift));
  } while (old != assumed);
}
__device__ __forceinline__ void atomic_add(f16* p, f16 v) {
  atomicAdd(reinterpret_cast<__half*>(p), __ushort_as_half(v.bits));
}
__device__ __forceinline__ void atomic_add(bf16* p, bf16 v) {
  atomicAdd(reinterpret_cast<__nv_bfloat16*>(p), __ushort_as_bfloat16(v.bits));
}

template <class T>
constexpr bool kHasAtomicAdd = std::is_same_v<T, float> || std::is_same_v<T, double> || std::is_same_v<T, f16> ||
                               std::is_same_v<T, bf16> || std::is_same_v<T, int32_t> || std::is_same_v<T, int64_t> ||
                               std::is_same_v<T, uint8_t>;

struct GatherStep {
  template <class T>
  __device__ void operator()(T& direct, const T& indexed) const { direct = indexed; }
};
struct ScatterAddStep {
  template <class T>
  __device__ void operator()(const T& direct, T& indexed) const { atomic_add(&indexed, direct); }
};

// Deterministic scatter-add: a thread per position off `dim`, adding that fiber's elements into
// `indexed` in the order of dim, as the CPU kernel does (cpu/index.cpp). Positions off dim never
// share an output, so no atomics are needed and each output's sum has one order.
template <class T, class I>
__global__ void __launch_bounds__(kThreads) scatter_add_fibers_kernel(const T* direct, T* indexed, const I* index,
                                                                      IndexWalk w, int64_t fibers) {
  using C = compute_t<T>;
  const int64_t len = w.sizes[w.dim];
  const int64_t stride = int64_t{blockDim.x} * gridDim.x;
  for (int64_t f = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; f < fibers; f += stride) {
    WalkOffsets o;  // of the fiber's first element (coordinate 0 along dim)
    int64_t rest = f;
    for (int d = w.nd - 1; d >= 0; --d) {
      if (d == w.dim) continue;
      const int64_t c = rest % w.sizes[d];
      rest /= w.sizes[d];
      o.direct += c * w.direct_strides[d];
      o.index += c * w.index_strides[d];
      o.indexed += c * w.indexed_strides[d];
    }
    for (int64_t k = 0; k < len; ++k) {
      const auto j = static_cast<int64_t>(index[o.index + k * w.index_strides[w.dim]]);
      if (j < 0 || j >= w.bound) {
        report_bad_index(w.errors, w.op, j, w.bound);
        continue;
      }
      T& out = indexed[o.indexed + j * w.indexed_strides[w.dim]];
      out = convert<T>(static_cast<C>(out) + static_cast<C>(direct[o.direct + k * w.direct_strides[w.dim]]));
    }
  }
}

template <class D, class X, class I, class Step>
void launch_walk(D* direct, X* indexed, const I* index, const IndexWalk& w, Step step, cudaStream_t stream) {
  index_walk_kernel<<<grid_blocks(w.numel, kThreads), kThreads, 0, stream>>>(direct, indexed, index, w, step);
  EMBER_CUDA_LAUNCH_CHECK();
}

template <class F>
void visit_index(DType index_dtype, F&& f) {
  if (index_dtype == DType::i64) return f.template operator()<int64_t>();
  if (index_dtype == DType::i32) return f.template operator()<int32_t>();
  throw DTypeError(std::string("index: expected an int64 or int32 index, got ") + dtype_name(index_dtype));
}

}  // namespace

void launch_index_gather(DType dtype, DType index_dtype, void* direct, const void* indexed, const void* index,
                         const IndexWalk& w, cudaStream_t stream) {
  if (w.numel == 0) return;
  visit(dtype, [&]<class T>() {
    visit_index(index_dtype, [&]<class I>() {
      launch_walk(static_cast<T*>(direct), static_cast<const T*>(indexed), static_cast<const I*>(index), w,
                  GatherStep{}, stream);
    });
  });
}

void launch_index_scatter_add(DType dtype, DType index_dtype, const void* direct, void* indexed, const void* index,
                              const IndexWalk& w, bool in_order, cudaStream_t stream) {
  visit(dtype, [&]<class T>() {
    if constexpr (is_float_type_v<T>) {
      if (in_order) {
        if (w.numel == 0) return;
        const int64_t fibers = w.numel / w.sizes[w.dim];
        visit_index(index_dtype, [&]<class I>() {
          scatter_add_fibers_kernel<<<grid_blocks(fibers, kThreads), kThreads, 0, stream>>>(
              static_cast<const T*>(direct), static_cast<T*>(indexed), static_cast<const I*>(index), w, fibers);
          EMBER_CUDA_LAUNCH_CHECK();
        });
        return;
      }
    }
    if constexpr (kHasAtomicAdd<T>) {
      if (w.numel == 0) return;
      visit_index(index_dtype, [&]<class I>() {
        launch_walk(static_cast<const T*>(direct), static_cast<T*>(indexed), static_cast<const I*>(index), w,
                    ScatterAddStep{}, stream);
      });
    } else {
      throw NotImplementedError(std::string(w.op == kIndexAdd ? "index_add" : "scatter_add") +
                                ": no CUDA atomic add for dtype " + dtype_name(dtype) +
                                " (supported: float32, float64, float16, bfloat16, int32, int64, uint8)");
    }
  });
}

}  // namespace ember::cuda
