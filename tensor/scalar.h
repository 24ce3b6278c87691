/// @file
/// A C++ number passed to an op (x * 2, clamp(x, 0.0, 6.0)). It keeps whether it was integral or
/// floating, which decides the result dtype (PyTorch: a float scalar makes an int tensor float).
#pragma once

#include <cstdint>
#include <type_traits>

namespace ember {

/// A number given to an op: bool, integral (int64) or floating (double).
class Scalar {
 public:
  /// Any C++ arithmetic value; bool, integers and floating types keep their kind.
  template <class T, std::enable_if_t<std::is_arithmetic_v<T>, int> = 0>
  Scalar(T v) {  // NOLINT: implicit on purpose, so ops take plain numbers
    if constexpr (std::is_same_v<T, bool>) {
      kind_ = Kind::boolean;
      i_ = v;
    } else if constexpr (std::is_integral_v<T>) {
      kind_ = Kind::integral;
      i_ = static_cast<int64_t>(v);
    } else {
      kind_ = Kind::floating;
      d_ = static_cast<double>(v);
    }
  }
  bool is_floating() const { return kind_ == Kind::floating; }  ///< Whether it was a floating value.
  bool is_bool() const { return kind_ == Kind::boolean; }       ///< Whether it was a bool.
  /// The value as a double.
  double to_double() const { return kind_ == Kind::floating ? d_ : static_cast<double>(i_); }
  /// The value as an int64 (a floating value truncated toward zero).
  int64_t to_int() const { return kind_ == Kind::floating ? static_cast<int64_t>(d_) : i_; }

 private:
  enum class Kind { integral, floating, boolean } kind_;
  double d_ = 0;
  int64_t i_ = 0;
};

}  // namespace ember
