// The checks of the example programs' flags (CLI11 validators): a value out of range, a number that is
// not finite, an integer read as a bool or an empty path is refused naming the flag and the value,
// where CLI11's own Range lets "nan" through and its conversions saturate or wrap.
#pragma once

#include <CLI/CLI.hpp>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <set>
#include <string>

namespace ember_examples {

// A CLI11 check that a flag's value is a finite number in [low, high], with a message naming both
// (CLI11's own Range lets "nan" and "inf" through).
inline CLI::Validator number_in(double low, double high = HUGE_VAL) {
  const auto text_of = [](double v) {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%g", v);
    return std::string(buf);
  };
  const std::string range = std::isinf(high) ? ">=" + text_of(low) : "in [" + text_of(low) + ", " + text_of(high) + "]";
  const std::string need = std::isinf(high) ? "must be at least " + text_of(low)
                                            : "must be from " + text_of(low) + " to " + text_of(high);
  return CLI::Validator(
      [low, high, need](std::string& text) -> std::string {
        char* end = nullptr;
        const double v = std::strtod(text.c_str(), &end);
        if (end == text.c_str() || *end != '\0') return "\"" + text + "\" is not a number";
        // strtod's ERANGE also flags an underflow ("1e-320"), which is a number: only inf is refused.
        if (!std::isfinite(v)) return need + ", got " + text + " (not a finite number)";
        return v >= low && v <= high ? "" : need + ", got " + text;
      },
      range);
}
inline CLI::Validator at_least(double low) { return number_in(low); }

// The same for a whole-number flag of type Int: digits that fit Int and lie in [low, high] (CLI11's
// own conversion saturates 20-digit numbers and wraps "-1" for unsigned types).
template <class Int>
inline CLI::Validator whole_in(Int low, Int high = std::numeric_limits<Int>::max()) {
  const bool open = high == std::numeric_limits<Int>::max();
  const std::string range = open ? ">=" + std::to_string(low) : "in [" + std::to_string(low) + ", " + std::to_string(high) + "]";
  const std::string need = open ? "must be at least " + std::to_string(low)
                                : "must be from " + std::to_string(low) + " to " + std::to_string(high);
  return CLI::Validator(
      [low, high, need](std::string& text) -> std::string {
        Int v{};
        const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
        if (ec == std::errc::result_out_of_range) return need + ", got " + text + " (too large to count)";
        if (ec != std::errc() || end != text.data() + text.size() || text.empty())
          return "\"" + text + "\" is not a whole number";
        return v >= low && v <= high ? "" : need + ", got " + text;
      },
      range);
}

// A true/false flag's value: CLI11 itself reads any integer as a bool (2 and -5 as true).
inline CLI::Validator boolean_value() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        static const std::set<std::string> words = {"true", "false", "1", "0", "yes", "no", "on", "off"};
        std::string lower = text;
        std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
        return words.count(lower) ? "" : "\"" + text + "\" is not true or false";
      },
      "BOOLEAN");
}

// A path flag given a value: an empty one ("--work-dir \"$UNSET\"") is refused rather than read as
// "not given", which would silently pick the default place.
inline CLI::Validator non_empty_path() {
  return CLI::Validator([](std::string& text) -> std::string { return text.empty() ? "an empty path" : ""; }, "PATH");
}

}  // namespace ember_examples
