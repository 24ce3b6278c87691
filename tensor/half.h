/// @file
/// 16-bit floating types stored as raw bits: f16 (IEEE 754 binary16) and bf16 (bfloat16).
/// Arithmetic always converts to float first; conversions round to nearest, ties to even.
#pragma once

#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define EMBER_HD __host__ __device__
#else
#define EMBER_HD
#endif

namespace ember {

namespace detail {
EMBER_HD inline uint32_t float_bits(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
#endif
}
EMBER_HD inline float bits_float(uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, 4);
  return f;
#endif
}
}  // namespace detail

/// bfloat16: the upper 16 bits of a float32, rounded to nearest even; NaN stays a quiet NaN.
struct bf16 {
  uint16_t bits = 0;  ///< the raw bits
  bf16() = default;
  /// The nearest bf16 to f (ties to even); NaN stays a quiet NaN.
  // A select, not a branch, so that loops writing bf16 vectorise (as f16's below).
  EMBER_HD explicit bf16(float f) {
    const uint32_t u = detail::float_bits(f);
    const uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
    const uint32_t quiet_nan = (u >> 16) | 0x40u;
    bits = static_cast<uint16_t>((u & 0x7fffffffu) > 0x7f800000u ? quiet_nan : rounded);
  }
  EMBER_HD explicit bf16(double d) : bf16(static_cast<float>(d)) {}  ///< Through float.
  /// The exact float value.
  EMBER_HD operator float() const { return detail::bits_float(static_cast<uint32_t>(bits) << 16); }
  EMBER_HD static bf16 from_bits(uint16_t b) { bf16 h; h.bits = b; return h; }  ///< The bf16 with these raw bits.
};

/// IEEE binary16: 1 sign, 5 exponent (bias 15), 10 mantissa bits; max 65504, subnormals below 2^-14.
struct f16 {
  uint16_t bits = 0;  ///< the raw bits
  f16() = default;
  /// The nearest f16 to f (ties to even); from 65520 on, infinity; NaN stays a quiet NaN.
  // Rounds to nearest even. Every case is computed and one selected, without branches, so that loops
  // writing halves vectorise (as operator float below).
  EMBER_HD explicit f16(float f) {
    const uint32_t u = detail::float_bits(f);
    const uint32_t sign = (u >> 16) & 0x8000u;
    const uint32_t abs = u & 0x7fffffffu;
    // Below 2^-14, a subnormal half (or zero): adding 0.5 in float aligns the value's bits so that
    // the float adder does the rounding.
    const uint32_t subnormal = detail::float_bits(detail::bits_float(abs) + detail::bits_float(0x3f000000u)) - 0x3f000000u;
    // Normal: rebias the exponent 127 -> 15 and round the 13 dropped mantissa bits.
    const uint32_t normal = (abs + 0xc8000fffu + ((abs >> 13) & 1u)) >> 13;  // 0xc8000000 = -(112 << 23)
    uint32_t h = abs < 0x38800000u ? subnormal : normal;
    h = abs >= 0x477ff000u ? 0x7c00u : h;  // rounds to >= 65520: overflow to infinity
    h = abs > 0x7f800000u ? 0x7e00u : h;   // NaN
    bits = static_cast<uint16_t>(sign | h);
  }
  EMBER_HD explicit f16(double d) : f16(static_cast<float>(d)) {}  ///< Through float.
  /// The exact float value.
  // Without branches, so that loops reading halves vectorise (with branches an f16 batch norm spent
  // most of its time here): exponent and mantissa move into a float's place, the exponent rebiased by
  // 112 (127 - 15); inf and NaN (exponent 31) take 112 more, to 255; a subnormal m * 2^-24 is
  // renormalised by the float unit, as 2^-14 (1 + m / 1024) - 2^-14. Selects, not branches.
  EMBER_HD operator float() const {
    const uint32_t sign = static_cast<uint32_t>(bits & 0x8000u) << 16;
    const uint32_t moved = static_cast<uint32_t>(bits & 0x7fffu) << 13;
    const uint32_t exp = moved & 0x0f800000u;
    const uint32_t normal = moved + (112u << 23) + (exp == 0x0f800000u ? 112u << 23 : 0u);
    const float subnormal = detail::bits_float(moved + (113u << 23)) - detail::bits_float(113u << 23);
    return detail::bits_float(sign | (exp == 0 ? detail::float_bits(subnormal) : normal));
  }
  EMBER_HD static f16 from_bits(uint16_t b) { f16 h; h.bits = b; return h; }  ///< The f16 with these raw bits.
};

}  // namespace ember
