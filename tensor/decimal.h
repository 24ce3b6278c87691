/// @file
/// Numbers written in decimal: whole numbers in keys, file names and metadata ("state.3.exp_avg",
/// "epoch_12.safetensors"), parsed with their range checked, never wrapped or thrown as "stoll"; and
/// any double as messages and metadata show it, in the fewest digits that read back as it.
#pragma once

#include <charconv>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace ember {

/// The largest count a file may hold (epochs, iterations, steps): 2^53, below which a double, as
/// state dicts store counts, still holds every whole number exactly.
inline constexpr int64_t kMaxExactCount = int64_t(1) << 53;

/// Whether v, a count a file holds as a double, is a whole number from `low` to kMaxExactCount
/// (NaN and infinities are not).
inline bool is_exact_count(double v, double low = 0) {
  return v >= low && v <= static_cast<double>(kMaxExactCount) && v == std::floor(v);
}

/// The number `text` holds in plain decimal digits (no sign, space or exponent) when it is at most
/// `max`; nullopt for anything else, a number too large for int64 included.
inline std::optional<int64_t> parse_decimal(std::string_view text, int64_t max) {
  if (text.empty() || text.front() < '0' || text.front() > '9') return std::nullopt;
  int64_t v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || v > max) return std::nullopt;
  return v;
}

/// v in the fewest digits that read back as v ("1e-08", "0.1", "inf"): what an error message shows,
/// where std::to_string would print 1e-8 as "0.000000".
inline std::string decimal_text(double v) {
  char buf[32];
  const auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, ec == std::errc() ? end : buf);
}

}  // namespace ember
