// What the conv and pooling primitives share: a pair of per-dim sizes (height, width) of a window,
// how messages show one, and the largest a kernel, stride, padding or dilation may be.
#pragma once

#include <array>
#include <cstdint>
#include <string>

namespace ember {

using Pair = std::array<int64_t, 2>;

/// "(3, 3)". Appended piece by piece: GCC 12 warns (-Wrestrict, wrongly) on "(" + std::string once inlined.
inline std::string pair_str(Pair p) {
  std::string text = "(";
  text += std::to_string(p[0]);
  text += ", ";
  text += std::to_string(p[1]);
  text += ")";
  return text;
}

/// At most 2^31 - 1, so that the window arithmetic (dilation * kernel, kernel * kernel, input + 2 *
/// padding) stays far inside int64.
inline constexpr int64_t kMaxWindowArgument = (int64_t(1) << 31) - 1;

}  // namespace ember
