#include "bench/flags.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>

namespace ember::bench {

std::optional<long long> positive_flag(const char* program, const std::string& argument) {
  const size_t eq = argument.find('=');
  const std::string name = argument.substr(0, eq), text = eq == std::string::npos ? "" : argument.substr(eq + 1);
  errno = 0;
  char* end = nullptr;
  const long long value = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || errno == ERANGE || value < 1) {
    std::fprintf(stderr, "%s: %s must be a positive whole number, got \"%s\"\n", program, name.c_str(), text.c_str());
    return std::nullopt;
  }
  return value;
}

}  // namespace ember::bench
