/// @file
/// Whole numbers written in decimal in keys, file names and metadata ("state.3.exp_avg",
/// "epoch_12.safetensors"): parsed with their range checked, never wrapped or thrown as "stoll".
#pragma once

#include <charconv>
#include <cstdint>
#include <optional>
#include <string_view>

namespace ember {

/// The largest count a file may hold (epochs, iterations, steps): 2^53, below which a double, as
/// state dicts store counts, still holds every whole number exactly.
inline constexpr int64_t kMaxExactCount = int64_t(1) << 53;

/// The number `text` holds in plain decimal digits (no sign, space or exponent) when it is at most
/// `max`; nullopt for anything else, a number too large for int64 included.
inline std::optional<int64_t> parse_decimal(std::string_view text, int64_t max) {
  if (text.empty() || text.front() < '0' || text.front() > '9') return std::nullopt;
  int64_t v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || v > max) return std::nullopt;
  return v;
}

}  // namespace ember
