// Value conversion between any two element types (host and device), as PyTorch's casts do:
// through float for the 16-bit floats, "non-zero" for bool.
#pragma once

#include <type_traits>

#include "tensor/dtype.h"

namespace ember {

template <class To, class From>
EMBER_HD inline To convert(From x) {
  using C = compute_t<From>;
  const C v = static_cast<C>(x);
  if constexpr (std::is_same_v<To, bool>) {
    return v != C(0);
  } else if constexpr (std::is_same_v<To, f16> || std::is_same_v<To, bf16>) {
    return To(static_cast<float>(v));
  } else {
    return static_cast<To>(v);
  }
}

}  // namespace ember
