#include "dist/parse.h"

#include <charconv>

#include "tensor/error.h"
#include "tensor/printable.h"

namespace ember::dist {

namespace {
std::string range(int64_t min, int64_t max) {
  return " [" + std::to_string(min) + ", " + std::to_string(max) + "]";
}
}  // namespace

int64_t parse_integer(const std::string& what, const std::string& text, int64_t min, int64_t max) {
  int64_t value = 0;
  const char* end = text.data() + text.size();
  const auto [stop, ec] = std::from_chars(text.data(), end, value);
  if (text.empty() || ec == std::errc::invalid_argument || stop != end)
    throw ValueError(what + "='" + printable(text, 40) + "' is not a decimal integer");
  if (ec == std::errc::result_out_of_range || value < min || value > max)
    throw ValueError(what + "=" + printable(text, 40) + " is out of range" + range(min, max));
  return value;
}

int64_t check_in_range(const std::string& what, int64_t value, int64_t min, int64_t max) {
  if (value < min || value > max) throw ValueError(what + "=" + std::to_string(value) + " is out of range" + range(min, max));
  return value;
}

}  // namespace ember::dist
