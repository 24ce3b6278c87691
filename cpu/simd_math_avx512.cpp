// cpu/simd_math.h's kernels for AVX-512 (compiled with -mavx512f -mf16c: meson.build), 16 floats a vector.
// GCC 12's AVX-512 intrinsics leave lanes undefined by initialising a variable with itself, which its
// own -Wuninitialized reports (GCC bug 105593, fixed in GCC 13).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#include <sleef.h>

#include "cpu/simd_math_kernels.h"

namespace ember::cpu::simd {

namespace {

struct Avx512 {
  using V = __m512;
  static constexpr int64_t width = 16;
  static V load(const float* p) { return _mm512_loadu_ps(p); }
  static void store(float* p, V v) { _mm512_storeu_ps(p, v); }
  static V broadcast(float a) { return _mm512_set1_ps(a); }
  static V add(V a, V b) { return _mm512_add_ps(a, b); }
  static V sub(V a, V b) { return _mm512_sub_ps(a, b); }
  static V mul(V a, V b) { return _mm512_mul_ps(a, b); }
  static V mul_add(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }  // a * b + c, rounded once
  static V div(V a, V b) { return _mm512_div_ps(a, b); }
  static V neg(V a) { return _mm512_castsi512_ps(_mm512_xor_si512(_mm512_castps_si512(a), _mm512_set1_epi32(INT32_MIN))); }
  static V abs(V a) { return _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(a), _mm512_set1_epi32(INT32_MAX))); }
  // |a| with b's sign.
  static V copy_sign(V a, V b) {
    const __m512i sign = _mm512_set1_epi32(INT32_MIN);
    return _mm512_castsi512_ps(_mm512_or_si512(_mm512_andnot_si512(sign, _mm512_castps_si512(a)),
                                               _mm512_and_si512(sign, _mm512_castps_si512(b))));
  }
  // p[0], p[2], ..., p[30] and p[1], p[3], ..., p[31].
  static V even_lanes(const float* p) {
    return _mm512_permutex2var_ps(load(p), _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0), load(p + 16));
  }
  static V odd_lanes(const float* p) {
    return _mm512_permutex2var_ps(load(p), _mm512_set_epi32(31, 29, 27, 25, 23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3, 1), load(p + 16));
  }
  using Mask = __mmask16;
  static Mask less(V a, V b) { return _mm512_cmp_ps_mask(a, b, _CMP_LT_OQ); }
  // a > b, or a NaN, where b is not NaN.
  static Mask greater_unless_nan(V a, V b) { return _mm512_mask_cmp_ps_mask(_mm512_cmp_ps_mask(b, b, _CMP_ORD_Q), a, b, _CMP_NLE_UQ); }
  static V select(Mask m, V if_set, V otherwise) { return _mm512_mask_blend_ps(m, otherwise, if_set); }
  // vmaxps returns its second operand when either is NaN, so a NaN in v leaves m as it was.
  static V max_skip_nan(V v, V m) { return _mm512_max_ps(v, m); }
  static float lane_max(V m) { return _mm512_reduce_max_ps(m); }
  struct Sum {
    __m512d low, high;
  };
  static Sum zero_sum() { return {_mm512_setzero_pd(), _mm512_setzero_pd()}; }
  static void accumulate(Sum& s, V v) {
    s.low = _mm512_add_pd(s.low, _mm512_cvtps_pd(_mm512_castps512_ps256(v)));
    s.high = _mm512_add_pd(s.high, _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1))));
  }
  static void accumulate_squared_deviations(Sum& s, V v, double center) {
    const __m512d c = _mm512_set1_pd(center);
    const __m512d low = _mm512_sub_pd(_mm512_cvtps_pd(_mm512_castps512_ps256(v)), c);
    const __m512d high = _mm512_sub_pd(_mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1))), c);
    s.low = _mm512_fmadd_pd(low, low, s.low);
    s.high = _mm512_fmadd_pd(high, high, s.high);
  }
  static void accumulate_products_about(Sum& s, V g, V v, double center) {
    const __m512d c = _mm512_set1_pd(center);
    const auto low = [](V a) { return _mm512_cvtps_pd(_mm512_castps512_ps256(a)); };
    const auto high = [](V a) { return _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(a), 1))); };
    s.low = _mm512_fmadd_pd(low(g), _mm512_sub_pd(low(v), c), s.low);
    s.high = _mm512_fmadd_pd(high(g), _mm512_sub_pd(high(v), c), s.high);
  }
  static double total(const Sum& s) { return _mm512_reduce_add_pd(_mm512_add_pd(s.low, s.high)); }
  static V load_half(const uint16_t* p) { return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))); }
  static void store_half(uint16_t* p, V v) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  }
  static float half_to_float(uint16_t h) { return _cvtsh_ss(h); }
  static uint16_t float_to_half(float f) { return _cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
  static V exp(V v) { return Sleef_expf16_u10avx512f(v); }
  static V log(V v) { return Sleef_logf16_u10avx512f(v); }
  static V log1p(V v) { return Sleef_log1pf16_u10avx512f(v); }
  static V sin(V v) { return Sleef_sinf16_u10avx512f(v); }
  static V cos(V v) { return Sleef_cosf16_u10avx512f(v); }
  static V tanh(V v) { return Sleef_tanhf16_u10avx512f(v); }
  static V erf(V v) { return Sleef_erff16_u10avx512f(v); }
};

}  // namespace

extern constinit const Kernels kAvx512Kernels = make_kernels<Avx512>();

}  // namespace ember::cpu::simd
