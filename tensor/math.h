// The transcendental functions of ember's kernels and host code, for host and device. On the host
// in deterministic mode they are SLEEF's "cinz" functions, which give the same bits on every
// platform (SLEEF's reference, "Function naming convention": cinz = bit-wise consistent, no FMA);
// otherwise the C library's. glibc's are not the same on every x86-64 CPU: its libm picks FMA
// variants at load time (ifunc), and on this Zen 4 exp, log, sin, cos, tanh, log1p, erf and pow in
// double gave different bits for some of 4M random inputs with and without
// GLIBC_TUNABLES=glibc.cpu.hwcaps=-AVX2,-FMA (the float versions agreed on all of them).
#pragma once

#include <cmath>

#include "tensor/half.h"  // EMBER_HD

#if !defined(__CUDA_ARCH__)
#include "tensor/deterministic.h"
#endif

namespace ember::math {

// X(name) for each function of one argument; pow takes two.
#define EMBER_MATH_UNARY(X) X(exp) X(log) X(log1p) X(sin) X(cos) X(tanh) X(erf)

// SLEEF's deterministic versions (tensor/math.cpp), for float and double.
namespace deterministic {
#define EMBER_DECLARE(f) \
  float f(float x);      \
  double f(double x);
EMBER_MATH_UNARY(EMBER_DECLARE)
#undef EMBER_DECLARE
float pow(float x, float y);
double pow(double x, double y);
}  // namespace deterministic

#if defined(__CUDA_ARCH__)
#define EMBER_MATH_PICK(f, ...) std::f(__VA_ARGS__)
#else
#define EMBER_MATH_PICK(f, ...) (is_deterministic() ? deterministic::f(__VA_ARGS__) : std::f(__VA_ARGS__))
#endif

#define EMBER_DEFINE(f) \
  template <class T>    \
  EMBER_HD T f(T x) {   \
    return EMBER_MATH_PICK(f, x); \
  }
EMBER_MATH_UNARY(EMBER_DEFINE)
#undef EMBER_DEFINE

template <class T>
EMBER_HD T pow(T x, T y) {
  return EMBER_MATH_PICK(pow, x, y);
}

#undef EMBER_MATH_PICK

}  // namespace ember::math
