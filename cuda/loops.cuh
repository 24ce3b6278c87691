// Device side of the elementwise kernels: one grid-stride loop over N strided operands (operand 0
// is the output), with a 16-byte vector path for contiguous aligned operands, and its launcher.
// Included by cuda/*.cu only.
#pragma once

#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <utility>

#include "cuda/error.h"
#include "cuda/kernels.h"

namespace ember::cuda {

inline constexpr int kVectorBytes = 16;  // the widest load one thread issues (ld.global.v4.u32)

// The types of an elementwise functor's operands, operand 0 (the output) first. Their sizes fix
// the vector path's width: kWidth elements per step, so that the widest operand moves 16 bytes.
template <class... T>
struct OperandList {
  static constexpr int kCount = sizeof...(T);
  static constexpr int kSize[kCount] = {static_cast<int>(sizeof(T))...};
  static constexpr int kWidth = kVectorBytes / static_cast<int>(std::max({sizeof(T)...}));
};

// An unsigned word of B bytes (1 to 16): moved by a single load or store.
template <int B> struct WordOf;
template <> struct WordOf<16> { using type = uint4; };
template <> struct WordOf<8> { using type = uint2; };
template <> struct WordOf<4> { using type = uint32_t; };
template <> struct WordOf<2> { using type = uint16_t; };
template <> struct WordOf<1> { using type = uint8_t; };
template <int B>
using Word = typename WordOf<B>::type;

// Whether the vector path may serve `a`: one dim after coalescing, the output contiguous, each
// input contiguous or a broadcast scalar (stride 0), and every contiguous operand aligned to the
// bytes it moves per step (an offset view such as x[1:] is not, and takes the 1-D path).
template <class Ops, int N>
bool vectorisable(const Strided<N>& a) {
  static_assert(Ops::kCount == N, "the functor's operand list and the walk disagree");
  if (a.nd != 1) return false;
  for (int k = 0; k < N; ++k) {
    const int64_t stride = a.strides[k][0];
    if (k > 0 && stride == 0) continue;
    if (stride != Ops::kSize[k] || reinterpret_cast<uintptr_t>(a.data[k]) % (Ops::kWidth * Ops::kSize[k]) != 0)
      return false;
  }
  return true;
}

// fn(std::integral_constant<int, K>{}) for K = 0 .. N-1: operand indices usable as constants.
template <int N, class Fn>
__device__ __forceinline__ void for_each_operand(Fn&& fn) {
  [&]<int... K>(std::integer_sequence<int, K...>) { (fn(std::integral_constant<int, K>{}), ...); }(
      std::make_integer_sequence<int, N>{});
}

// The vector path: steps of kWidth elements, each input loaded as one word into registers (a
// broadcast scalar once, repeated across its word), f applied to each element there, the output
// stored as one word. Returns where this thread's share of the tail (the last numel % kWidth
// elements) begins.
template <int N, class F>
__device__ __forceinline__ int64_t vector_loop(const Strided<N>& a, const F& f, int64_t thread, int64_t step) {
  using Ops = typename F::Operands;
  constexpr int W = Ops::kWidth;
  uint4 reg[N];  // operand k's W elements, packed from its first byte
  bool scalar[N] = {};
  for_each_operand<N>([&](auto k) {
    constexpr int K = decltype(k)::value, S = Ops::kSize[K];
    if constexpr (K > 0) {
      scalar[K] = a.strides[K][0] == 0;
      if (scalar[K]) {
        const Word<S> x = *reinterpret_cast<const Word<S>*>(a.data[K]);
#pragma unroll
        for (int j = 0; j < W; ++j) reinterpret_cast<Word<S>*>(&reg[K])[j] = x;
      }
    }
  });
  const int64_t steps = a.numel / W;
#pragma unroll 1  // memory-bound: more steps in flight come from more threads, not from more code
  for (int64_t s = thread; s < steps; s += step) {
    for_each_operand<N>([&](auto k) {
      constexpr int K = decltype(k)::value, B = W * Ops::kSize[K];
      if constexpr (K > 0)
        if (!scalar[K]) *reinterpret_cast<Word<B>*>(&reg[K]) = reinterpret_cast<const Word<B>*>(a.data[K])[s];
    });
#pragma unroll
    for (int j = 0; j < W; ++j) {
      char* p[N];
      for_each_operand<N>([&](auto k) {
        constexpr int K = decltype(k)::value, S = Ops::kSize[K];
        p[K] = reinterpret_cast<char*>(&reg[K]) + j * S;
      });
      f(p);
    }
    constexpr int B = W * Ops::kSize[0];
    reinterpret_cast<Word<B>*>(a.data[0])[s] = *reinterpret_cast<const Word<B>*>(&reg[0]);
  }
  return steps * W + thread;
}

// f(p) computes one element; p[k] points at operand k's element. F::Operands lists the operand
// types. `vectorised` says vectorisable<F::Operands>(a) held.
template <int N, class F>
__global__ void __launch_bounds__(kThreads) elementwise_kernel(Strided<N> a, F f, bool vectorised) {
  const int64_t step = int64_t{blockDim.x} * gridDim.x;
  int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  if (vectorised) i = vector_loop(a, f, i, step);
  if (a.nd == 1) {  // contiguous, misaligned, broadcast or evenly strided: no index arithmetic
#pragma unroll 1
    for (; i < a.numel; i += step) {
      char* p[N];
#pragma unroll
      for (int k = 0; k < N; ++k) p[k] = a.data[k] + i * a.strides[k][0];
      f(p);
    }
    return;
  }
  for (; i < a.numel; i += step) {
    char* p[N];
#pragma unroll
    for (int k = 0; k < N; ++k) p[k] = a.data[k];
    int64_t rest = i;
    for (int d = a.nd - 1; d >= 0; --d) {
      const int64_t idx = rest % a.sizes[d];
      rest /= a.sizes[d];
#pragma unroll
      for (int k = 0; k < N; ++k) p[k] += idx * a.strides[k][d];
    }
    f(p);
  }
}

template <int N, class F>
void launch_elementwise(const Strided<N>& a, const F& f, cudaStream_t stream) {
  if (a.numel == 0) return;
  const bool vectorised = vectorisable<typename F::Operands>(a);
  const int64_t items = vectorised ? std::max<int64_t>(a.numel / F::Operands::kWidth, 1) : a.numel;
  elementwise_kernel<N, F><<<grid_blocks(items, kThreads), kThreads, 0, stream>>>(a, f, vectorised);
  EMBER_CUDA_LAUNCH_CHECK();
}

template <class T>
__device__ __forceinline__ const T& at(const char* p) {
  return *reinterpret_cast<const T*>(p);
}
template <class T>
__device__ __forceinline__ T& at(char* p) {
  return *reinterpret_cast<T*>(p);
}

// Raised on the host when a kernel leaves an unsupported dtype behind (the .cpp checks first).
[[noreturn]] inline void unsupported(const char* what, DType dtype) {
  throw DTypeError(std::string(what) + ": not supported for dtype " + dtype_name(dtype) + " on CUDA");
}

// Records the first out-of-range index any kernel meets (op, index, bound) in the mapped slot the
// host reads after a synchronisation; later ones are dropped.
__device__ inline void report_bad_index(KernelErrorSlot* errors, int32_t op, int64_t index, int64_t bound) {
  volatile KernelErrorSlot* slot = errors;
  if (slot->op != 0) return;
  slot->index = index;
  slot->bound = bound;
  __threadfence_system();  // the fields are visible before op says they are set
  slot->op = op;
}

}  // namespace ember::cuda
