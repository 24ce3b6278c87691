// a + b in the stored element type, as PyTorch adds: integers wrap (computed unsigned, so overflow
// is defined), bool adds as "or", 16-bit floats add in float and round once. Shared by the CPU's
// scatter-style kernels and dist/'s reductions, so every sum in ember wraps the same way.
#pragma once

#include <type_traits>

#include "tensor/convert.h"

namespace ember {

template <class T>
inline T add_stored(T a, T b) {
  if constexpr (std::is_same_v<T, bool>) {
    return a || b;
  } else if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b)));
  } else {
    return convert<T>(static_cast<compute_t<T>>(a) + static_cast<compute_t<T>>(b));
  }
}

}  // namespace ember
