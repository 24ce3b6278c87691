#include "tensor/dtype.h"

namespace ember {

const char* dtype_name(DType d) {
  switch (d) {
    case DType::f32: return "float32";
    case DType::f16: return "float16";
    case DType::bf16: return "bfloat16";
    case DType::f64: return "float64";
    case DType::i32: return "int32";
    case DType::i64: return "int64";
    case DType::u8: return "uint8";
    case DType::boolean: return "bool";
  }
  return "?";
}

int64_t dtype_size(DType d) {
  return visit(d, []<class T>() { return static_cast<int64_t>(sizeof(T)); });
}

bool is_floating(DType d) {
  return d == DType::f32 || d == DType::f16 || d == DType::bf16 || d == DType::f64;
}

bool is_integral(DType d, bool include_bool) {
  return d == DType::i32 || d == DType::i64 || d == DType::u8 || (include_bool && d == DType::boolean);
}

bool is_reduced_float(DType d) { return d == DType::f16 || d == DType::bf16; }

DType opmath_dtype(DType d) { return is_reduced_float(d) ? DType::f32 : d; }

void check_alpha(const char* op, DType dt, Scalar alpha) {
  if (alpha.is_floating() && !is_floating(dt))
    throw DTypeError(std::string(op) + ": alpha " + std::to_string(alpha.to_double()) + " is a floating number but the " +
                     "operands are " + dtype_name(dt) + "; integer operands take an integer alpha");
}

DType promote_types(DType a, DType b) {
  if (a == b) return a;
  // Table from PyTorch's c10/core/ScalarType.cpp (promoteTypes), restricted to ember's dtypes.
  // Notable entries: f16 with bf16 gives f32; u8 with any signed int gives the signed int.
  constexpr DType f32 = DType::f32, f16 = DType::f16, b16 = DType::bf16, f64 = DType::f64,
                  i32 = DType::i32, i64 = DType::i64, u8 = DType::u8, bo = DType::boolean;
  static constexpr DType table[8][8] = {
      //        f32  f16  bf16  f64  i32  i64  u8   bool
      /* f32 */ {f32, f32, f32, f64, f32, f32, f32, f32},
      /* f16 */ {f32, f16, f32, f64, f16, f16, f16, f16},
      /* bf16*/ {f32, f32, b16, f64, b16, b16, b16, b16},
      /* f64 */ {f64, f64, f64, f64, f64, f64, f64, f64},
      /* i32 */ {f32, f16, b16, f64, i32, i64, i32, i32},
      /* i64 */ {f32, f16, b16, f64, i64, i64, i64, i64},
      /* u8  */ {f32, f16, b16, f64, i32, i64, u8, u8},
      /* bool*/ {f32, f16, b16, f64, i32, i64, u8, bo},
  };
  return table[static_cast<int>(a)][static_cast<int>(b)];
}

bool fits(Scalar v, DType d) {
  if (is_floating(d) || d == DType::boolean) return true;
  // PyTorch's bounds (c10/util/TypeCast.h, checked_convert): uint8 from the int8 minimum up.
  const double low = d == DType::u8 ? -128.0 : d == DType::i32 ? -2147483648.0 : -9223372036854775808.0;
  const double high = d == DType::u8 ? 256.0 : d == DType::i32 ? 2147483648.0 : 9223372036854775808.0;  // exclusive
  if (v.is_floating()) return v.to_double() >= low && v.to_double() < high;  // false for NaN
  const auto i = static_cast<double>(v.to_int());
  return i >= low && (d == DType::i64 || i < high);
}

void check_fits(Scalar v, DType d, const char* op) {
  if (fits(v, d)) return;
  const std::string value = v.is_floating() ? std::to_string(v.to_double()) : std::to_string(v.to_int());
  throw ValueError(std::string(op) + ": the value " + value + " does not fit in " + dtype_name(d));
}

}  // namespace ember
