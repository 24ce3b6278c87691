// SLEEF's deterministic functions behind tensor/math.h: the "cinz" variants (bit-wise consistent
// across platforms, no FMA) in their scalar pure-C builds, each within 1.0 ULP ("u10").
#include "tensor/math.h"

#include <sleef.h>

namespace ember::math::deterministic {

float exp(float x) { return Sleef_cinz_expf1_u10purec(x); }
double exp(double x) { return Sleef_cinz_expd1_u10purec(x); }
float log(float x) { return Sleef_cinz_logf1_u10purec(x); }
double log(double x) { return Sleef_cinz_logd1_u10purec(x); }
float log1p(float x) { return Sleef_cinz_log1pf1_u10purec(x); }
double log1p(double x) { return Sleef_cinz_log1pd1_u10purec(x); }
float sin(float x) { return Sleef_cinz_sinf1_u10purec(x); }
double sin(double x) { return Sleef_cinz_sind1_u10purec(x); }
float cos(float x) { return Sleef_cinz_cosf1_u10purec(x); }
double cos(double x) { return Sleef_cinz_cosd1_u10purec(x); }
float tanh(float x) { return Sleef_cinz_tanhf1_u10purec(x); }
double tanh(double x) { return Sleef_cinz_tanhd1_u10purec(x); }
float erf(float x) { return Sleef_cinz_erff1_u10purec(x); }
double erf(double x) { return Sleef_cinz_erfd1_u10purec(x); }
float pow(float x, float y) { return Sleef_cinz_powf1_u10purec(x, y); }
double pow(double x, double y) { return Sleef_cinz_powd1_u10purec(x, y); }

}  // namespace ember::math::deterministic
