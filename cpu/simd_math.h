// Vectorised f32 kernels for the transcendental ops and the row passes of softmax, log_softmax,
// cross entropy, layer norm and batch norm, compiled once per x86-64 instruction set (AVX2 with FMA, AVX-512) and chosen
// at run time from the CPU's features, so one binary built for generic x86-64 runs at the speed of
// the machine it lands on. The functions are SLEEF's vector versions (within 1.0 ULP, "u10"), the
// library PyTorch's CPU kernels use for the same ops.
#pragma once

#include <cstdint>

namespace ember::cpu::simd {

// The instruction sets with kernels, narrowest first. avx2 means AVX2, FMA and F16C together.
enum class Isa : uint8_t { none, avx2, avx512 };

const char* isa_name(Isa isa);

// The kernels of one instruction set. Every function reads n dense floats; y may equal x.
struct Kernels {
  using Map = void (*)(const float* x, float* y, int64_t n);
  Map exp, log, log1p, sin, cos, tanh, erf, sigmoid, gelu_erf, gelu_tanh, silu;
  // The activations' backward (tensor/elementwise_ops.h): dx[i] = g[i] * f'(x[i]).
  using Map2 = void (*)(const float* g, const float* x, float* dx, int64_t n);
  Map2 gelu_erf_backward, gelu_tanh_backward, silu_backward;
  // IEEE half <-> float, rounding to nearest even (F16C's instructions: the same bits as tensor/half.h's).
  void (*f16_to_f32)(const uint16_t* x, float* y, int64_t n);
  void (*f32_to_f16)(const float* x, uint16_t* y, int64_t n);
  // The largest of x[0, n), NaNs skipped as std::fmax skips them; -inf when n is 0.
  float (*max)(const float* x, int64_t n);
  // The sum of x[0, n), accumulated in double.
  double (*sum)(const float* x, int64_t n);
  // The sum of (x[i] - center)^2, in double.
  double (*sum_squared_deviations)(const float* x, double center, int64_t n);
  // The sum of g[i] (x[i] - center), in double.
  double (*sum_products_about)(const float* g, const float* x, double center, int64_t n);
  // The sum of exp(x[i] - shift) in double; each exp is also stored in y[i] unless y is null.
  double (*exp_sum)(const float* x, float shift, float* y, int64_t n);
  // y[i] = exp(x[i] - shift) * scale.
  void (*exp_scale)(const float* x, float shift, float scale, float* y, int64_t n);
  // Max pooling of a row pair by 2x2 windows at stride 2: y[j] is the largest of a[2j], a[2j+1],
  // b[2j], b[2j+1] and tap[j] which one (0 to 3 in that order), the first of equal values, or the
  // first NaN, winning (as cpu/pooling.cpp's scalar loop). Reads a[0, 2n) and b[0, 2n).
  void (*max_pool_2x2)(const float* a, const float* b, float* y, float* tap, int64_t n);
};

// Whether this CPU (and the OS, which must save the wider registers) can run isa's kernels.
bool cpu_supports(Isa isa);

// isa's kernels (nullptr for none); the CPU must support isa.
const Kernels* kernels_for(Isa isa);

// The widest instruction set this CPU supports, or the one the environment variable EMBER_CPU_ISA
// (none, avx2, avx512) names, to measure or test a narrower one; naming one the CPU lacks is an error.
// GLIBC_TUNABLES=glibc.cpu.hwcaps=-AVX512F,... lowers what the CPU is taken to support, as for libm.
Isa active_isa();

// The kernels ember's CPU ops use: active_isa()'s, or nullptr when there are none or the
// deterministic mode is on (its results must be the same bits on every CPU: the scalar
// functions of tensor/math.h give them).
const Kernels* active_kernels();

}  // namespace ember::cpu::simd
