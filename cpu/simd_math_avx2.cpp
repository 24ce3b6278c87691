// cpu/simd_math.h's kernels for AVX2 with FMA and F16C (compiled with -mavx2 -mfma -mf16c: meson.build), 8 floats a vector.
#include <immintrin.h>
#include <sleef.h>

#include "cpu/simd_math_kernels.h"

namespace ember::cpu::simd {

namespace {

struct Avx2 {
  using V = __m256;
  static constexpr int64_t width = 8;
  static V load(const float* p) { return _mm256_loadu_ps(p); }
  static void store(float* p, V v) { _mm256_storeu_ps(p, v); }
  static V broadcast(float a) { return _mm256_set1_ps(a); }
  static V add(V a, V b) { return _mm256_add_ps(a, b); }
  static V sub(V a, V b) { return _mm256_sub_ps(a, b); }
  static V mul(V a, V b) { return _mm256_mul_ps(a, b); }
  static V mul_add(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }  // a * b + c, rounded once
  static V div(V a, V b) { return _mm256_div_ps(a, b); }
  static V neg(V a) { return _mm256_xor_ps(a, _mm256_set1_ps(-0.0f)); }
  static V abs(V a) { return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), a); }
  // |a| with b's sign.
  static V copy_sign(V a, V b) {
    const V sign = _mm256_set1_ps(-0.0f);
    return _mm256_or_ps(_mm256_andnot_ps(sign, a), _mm256_and_ps(sign, b));
  }
  // p[0], p[2], ..., p[14] and p[1], p[3], ..., p[15]: shuffled within 128-bit halves, then the
  // 64-bit pairs put in order.
  static V even_lanes(const float* p) {
    const V mixed = _mm256_shuffle_ps(load(p), load(p + 8), _MM_SHUFFLE(2, 0, 2, 0));
    return _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(mixed), _MM_SHUFFLE(3, 1, 2, 0)));
  }
  static V odd_lanes(const float* p) {
    const V mixed = _mm256_shuffle_ps(load(p), load(p + 8), _MM_SHUFFLE(3, 1, 3, 1));
    return _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(mixed), _MM_SHUFFLE(3, 1, 2, 0)));
  }
  using Mask = V;  // all bits set in the lanes where the comparison holds
  static Mask less(V a, V b) { return _mm256_cmp_ps(a, b, _CMP_LT_OQ); }
  // a > b, or a NaN, where b is not NaN.
  static Mask greater_unless_nan(V a, V b) { return _mm256_and_ps(_mm256_cmp_ps(a, b, _CMP_NLE_UQ), _mm256_cmp_ps(b, b, _CMP_ORD_Q)); }
  static V select(Mask m, V if_set, V otherwise) { return _mm256_blendv_ps(otherwise, if_set, m); }
  // vmaxps returns its second operand when either is NaN, so a NaN in v leaves m as it was.
  static V max_skip_nan(V v, V m) { return _mm256_max_ps(v, m); }
  static float lane_max(V m) {
    __m128 r = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
    r = _mm_max_ps(r, _mm_movehl_ps(r, r));
    return _mm_cvtss_f32(_mm_max_ss(r, _mm_movehdup_ps(r)));
  }
  struct Sum {
    __m256d low, high;
  };
  static Sum zero_sum() { return {_mm256_setzero_pd(), _mm256_setzero_pd()}; }
  static void accumulate(Sum& s, V v) {
    s.low = _mm256_add_pd(s.low, _mm256_cvtps_pd(_mm256_castps256_ps128(v)));
    s.high = _mm256_add_pd(s.high, _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1)));
  }
  static void accumulate_squared_deviations(Sum& s, V v, double center) {
    const __m256d c = _mm256_set1_pd(center);
    const __m256d low = _mm256_sub_pd(_mm256_cvtps_pd(_mm256_castps256_ps128(v)), c);
    const __m256d high = _mm256_sub_pd(_mm256_cvtps_pd(_mm256_extractf128_ps(v, 1)), c);
    s.low = _mm256_fmadd_pd(low, low, s.low);
    s.high = _mm256_fmadd_pd(high, high, s.high);
  }
  static void accumulate_products_about(Sum& s, V g, V v, double center) {
    const __m256d c = _mm256_set1_pd(center);
    const auto low = [](V a) { return _mm256_cvtps_pd(_mm256_castps256_ps128(a)); };
    const auto high = [](V a) { return _mm256_cvtps_pd(_mm256_extractf128_ps(a, 1)); };
    s.low = _mm256_fmadd_pd(low(g), _mm256_sub_pd(low(v), c), s.low);
    s.high = _mm256_fmadd_pd(high(g), _mm256_sub_pd(high(v), c), s.high);
  }
  static double total(const Sum& s) {
    const __m256d t = _mm256_add_pd(s.low, s.high);
    const __m128d h = _mm_add_pd(_mm256_castpd256_pd128(t), _mm256_extractf128_pd(t, 1));
    return _mm_cvtsd_f64(_mm_add_sd(h, _mm_unpackhi_pd(h, h)));
  }
  static V load_half(const uint16_t* p) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }
  static void store_half(uint16_t* p, V v) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  }
  static float half_to_float(uint16_t h) { return _cvtsh_ss(h); }
  static uint16_t float_to_half(float f) { return _cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
  static V exp(V v) { return Sleef_expf8_u10avx2(v); }
  static V log(V v) { return Sleef_logf8_u10avx2(v); }
  static V log1p(V v) { return Sleef_log1pf8_u10avx2(v); }
  static V sin(V v) { return Sleef_sinf8_u10avx2(v); }
  static V cos(V v) { return Sleef_cosf8_u10avx2(v); }
  static V tanh(V v) { return Sleef_tanhf8_u10avx2(v); }
  static V erf(V v) { return Sleef_erff8_u10avx2(v); }
};

}  // namespace

extern constinit const Kernels kAvx2Kernels = make_kernels<Avx2>();

}  // namespace ember::cpu::simd
