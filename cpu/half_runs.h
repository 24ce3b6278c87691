// Dense runs of 16-bit floats widened to f32 and narrowed back, for kernels that compute on f32
// blocks: F16C's conversions (cpu/simd_math.h) for f16, loops the compiler vectorises for bf16 (a
// shift one way, tensor/half.h's branch-free rounding the other).
#pragma once

#include <cstdint>
#include <type_traits>

#include "cpu/simd_math.h"
#include "tensor/half.h"

namespace ember::cpu {

template <class T>
constexpr bool kHalf = std::is_same_v<T, f16> || std::is_same_v<T, bf16>;

template <class T>
  requires kHalf<T>
void widen_run(const simd::Kernels& k, const T* x, float* y, int64_t n) {
  if constexpr (std::is_same_v<T, f16>)
    k.f16_to_f32(reinterpret_cast<const uint16_t*>(x), y, n);
  else
    for (int64_t i = 0; i < n; ++i) y[i] = static_cast<float>(x[i]);
}

template <class T>
  requires kHalf<T>
void narrow_run(const simd::Kernels& k, const float* x, T* y, int64_t n) {
  if constexpr (std::is_same_v<T, f16>)
    k.f32_to_f16(x, reinterpret_cast<uint16_t*>(y), n);
  else
    for (int64_t i = 0; i < n; ++i) y[i] = T(x[i]);
}

}  // namespace ember::cpu
