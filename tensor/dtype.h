// Element types, their C++ storage types, PyTorch's type-promotion rules, and visit(), the one
// place where a runtime dtype becomes a compile-time type.
#pragma once

#include <cstdint>
#include <string>

#include "tensor/error.h"
#include "tensor/half.h"

namespace ember {

enum class DType : uint8_t { f32, f16, bf16, f64, i32, i64, u8, boolean };

inline constexpr DType kDefaultFloat = DType::f32;

const char* dtype_name(DType d);  // "float32", "float16", ... as PyTorch spells them
int64_t dtype_size(DType d);
bool is_floating(DType d);
bool is_integral(DType d, bool include_bool);
// f16 and bf16: stored in 16 bits, computed in f32.
bool is_reduced_float(DType d);
// The dtype arithmetic on d computes in (PyTorch's "opmath" type): f32 for f16 and bf16, d itself
// otherwise. Intermediate values, scalar operands, sums and divisors of 16-bit work live there and
// round to 16 bits once, at the end.
DType opmath_dtype(DType d);

// The smallest dtype that can represent both (PyTorch's promote_types table).
DType promote_types(DType a, DType b);

template <class T> struct dtype_of;
template <> struct dtype_of<float> { static constexpr DType value = DType::f32; };
template <> struct dtype_of<f16> { static constexpr DType value = DType::f16; };
template <> struct dtype_of<bf16> { static constexpr DType value = DType::bf16; };
template <> struct dtype_of<double> { static constexpr DType value = DType::f64; };
template <> struct dtype_of<int32_t> { static constexpr DType value = DType::i32; };
template <> struct dtype_of<int64_t> { static constexpr DType value = DType::i64; };
template <> struct dtype_of<uint8_t> { static constexpr DType value = DType::u8; };
template <> struct dtype_of<bool> { static constexpr DType value = DType::boolean; };
template <class T> inline constexpr DType dtype_v = dtype_of<T>::value;

// The type arithmetic happens in: float for the 16-bit floats, the type itself otherwise.
template <class T> struct compute_type { using type = T; };
template <> struct compute_type<f16> { using type = float; };
template <> struct compute_type<bf16> { using type = float; };
template <class T> using compute_t = typename compute_type<T>::type;

// Significand bits (with the implicit one) of the floating storage types.
template <class T> inline constexpr int significand_digits = 24;
template <> inline constexpr int significand_digits<double> = 53;
template <> inline constexpr int significand_digits<f16> = 11;
template <> inline constexpr int significand_digits<bf16> = 8;

template <class T> inline constexpr bool is_reduced_float_v = std::is_same_v<T, f16> || std::is_same_v<T, bf16>;
template <class T> inline constexpr bool is_float_type_v = std::is_floating_point_v<T> || is_reduced_float_v<T>;

// Calls f.template operator()<T>() with T the storage type of d:
//   visit(dt, [&]<class T>() { ... });
template <class F>
decltype(auto) visit(DType d, F&& f) {
  switch (d) {
    case DType::f32: return f.template operator()<float>();
    case DType::f16: return f.template operator()<f16>();
    case DType::bf16: return f.template operator()<bf16>();
    case DType::f64: return f.template operator()<double>();
    case DType::i32: return f.template operator()<int32_t>();
    case DType::i64: return f.template operator()<int64_t>();
    case DType::u8: return f.template operator()<uint8_t>();
    case DType::boolean: return f.template operator()<bool>();
  }
  throw DTypeError("visit: unknown dtype");
}

// Like visit, restricted to the floating types; any other dtype raises DTypeError naming `op`.
template <class F>
decltype(auto) visit_floating(DType d, const char* op, F&& f) {
  switch (d) {
    case DType::f32: return f.template operator()<float>();
    case DType::f16: return f.template operator()<f16>();
    case DType::bf16: return f.template operator()<bf16>();
    case DType::f64: return f.template operator()<double>();
    default: break;
  }
  throw DTypeError(std::string(op) + ": expected a floating dtype, got " + dtype_name(d));
}

}  // namespace ember
