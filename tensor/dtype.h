/// @file
/// Element types, their C++ storage types, PyTorch's type-promotion rules, and visit(), the one
/// place where a runtime dtype becomes a compile-time type.
#pragma once

#include <cstdint>
#include <string>

#include "tensor/error.h"
#include "tensor/half.h"
#include "tensor/scalar.h"

namespace ember {

/// The element types: float32, float16, bfloat16, float64, int32, int64, uint8 and bool.
enum class DType : uint8_t { f32, f16, bf16, f64, i32, i64, u8, boolean };

/// The dtype of floating tensors made without one (torch.get_default_dtype()).
inline constexpr DType kDefaultFloat = DType::f32;

const char* dtype_name(DType d);  ///< "float32", "float16", ... as PyTorch spells them
int64_t dtype_size(DType d);      ///< Bytes per element.
bool is_floating(DType d);        ///< Whether d is f32, f16, bf16 or f64.
/// Whether d is an integer type (bool counting as one when include_bool).
bool is_integral(DType d, bool include_bool);
/// f16 and bf16: stored in 16 bits, computed in f32.
bool is_reduced_float(DType d);
/// The dtype arithmetic on d computes in (PyTorch's "opmath" type): f32 for f16 and bf16, d itself
/// otherwise. Intermediate values, scalar operands, sums and divisors of 16-bit work live there and
/// round to 16 bits once, at the end.
DType opmath_dtype(DType d);

/// The smallest dtype that can represent both (PyTorch's promote_types table).
DType promote_types(DType a, DType b);
/// Whether a tensor of dtype d can take the number v: integer dtypes only their range (uint8 also
/// -128..-1, which wrap, as PyTorch allows) and never NaN or an infinity; floating dtypes and bool
/// anything (a float too large becomes inf).
bool fits(Scalar v, DType d);
/// ValueError naming `op`, the value and d when d cannot take v (see fits).
void check_fits(Scalar v, DType d, const char* op);

/// Refuses the `alpha` of add/sub/rsub/index_add that PyTorch refuses: a floating alpha for integer
/// or bool operands of dtype dt, which would be truncated. DTypeError naming op, alpha and dt.
void check_alpha(const char* op, DType dt, Scalar alpha);

/// The DType whose storage type is T (float, f16, bf16, double, int32_t, int64_t, uint8_t, bool).
template <class T> struct dtype_of;
/// @cond
template <> struct dtype_of<float> { static constexpr DType value = DType::f32; };
template <> struct dtype_of<f16> { static constexpr DType value = DType::f16; };
template <> struct dtype_of<bf16> { static constexpr DType value = DType::bf16; };
template <> struct dtype_of<double> { static constexpr DType value = DType::f64; };
template <> struct dtype_of<int32_t> { static constexpr DType value = DType::i32; };
template <> struct dtype_of<int64_t> { static constexpr DType value = DType::i64; };
template <> struct dtype_of<uint8_t> { static constexpr DType value = DType::u8; };
template <> struct dtype_of<bool> { static constexpr DType value = DType::boolean; };
/// @endcond
/// The DType whose storage type is T: `dtype_v<float>` is DType::f32.
template <class T> inline constexpr DType dtype_v = dtype_of<T>::value;

// The type arithmetic happens in: float for the 16-bit floats, the type itself otherwise.
/// @cond
template <class T> struct compute_type { using type = T; };
template <> struct compute_type<f16> { using type = float; };
template <> struct compute_type<bf16> { using type = float; };
/// @endcond
/// The type arithmetic on T happens in: float for the 16-bit floats, T itself otherwise.
template <class T> using compute_t = typename compute_type<T>::type;

/// Significand bits (with the implicit one) of the floating storage types: 24 for float, 53 for
/// double, 11 for f16, 8 for bf16.
template <class T> inline constexpr int significand_digits = 24;
/// @cond
template <> inline constexpr int significand_digits<double> = 53;
template <> inline constexpr int significand_digits<f16> = 11;
template <> inline constexpr int significand_digits<bf16> = 8;
/// @endcond

/// Whether T is f16 or bf16.
template <class T> inline constexpr bool is_reduced_float_v = std::is_same_v<T, f16> || std::is_same_v<T, bf16>;
/// Whether T is a floating storage type: float, double, f16 or bf16.
template <class T> inline constexpr bool is_float_type_v = std::is_floating_point_v<T> || is_reduced_float_v<T>;

/// Calls `f.template operator()<T>()` with T the storage type of d:
/// `visit(dt, [&]<class T>() { ... });`
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

/// Like visit, restricted to the floating types; any other dtype raises DTypeError naming `op`.
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
