/// @file
/// The order sort and topk use, as unsigned integers: comparing two keys compares the values, on
/// the CPU and in CUDA kernels alike. NaN is above every number (PyTorch sorts it last, and topk
/// counts it largest), -0 equals +0, and a descending order is the complement of the key.
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "tensor/half.h"

namespace ember {

/// The ascending-order key of v.
template <class T>
EMBER_HD inline uint64_t sort_key(T v) {
  constexpr uint64_t kSign = uint64_t{1} << 63;
  if constexpr (std::is_same_v<T, bool> || std::is_same_v<T, uint8_t>) {
    return static_cast<uint64_t>(v);
  } else if constexpr (std::is_integral_v<T>) {
    return static_cast<uint64_t>(static_cast<int64_t>(v)) ^ kSign;  // two's complement, shifted to unsigned
  } else if constexpr (std::is_same_v<T, double>) {
    if (v != v) return ~uint64_t{0};
    const double d = v == 0 ? 0.0 : v;  // -0 sorts with +0
    uint64_t bits;
    std::memcpy(&bits, &d, sizeof bits);
    // IEEE order: negatives reversed below the positives.
    return (bits & kSign) ? ~bits : bits | kSign;
  } else {
    // float, f16 and bf16 through float's bits: a 32-bit key, zero-extended (the keys of one dtype
    // compare among themselves), and NaN above all of them.
    const float f = static_cast<float>(v);
    if (f != f) return ~uint64_t{0};
    uint32_t bits;
    const float g = f == 0 ? 0.0f : f;
    std::memcpy(&bits, &g, sizeof bits);
    constexpr uint32_t kSign32 = uint32_t{1} << 31;
    return (bits & kSign32) ? ~bits : bits | kSign32;
  }
}

}  // namespace ember
