#include "tensor/env_switch.h"

#include <algorithm>
#include <cstdlib>

#include "tensor/error.h"
#include "tensor/printable.h"

namespace ember {

std::string env_choice(const char* name, const std::vector<std::string>& accepted, const std::string& unset) {
  const char* value = std::getenv(name);
  if (value == nullptr || *value == '\0') return unset;
  if (std::find(accepted.begin(), accepted.end(), value) != accepted.end()) return value;
  std::string expected;
  for (size_t i = 0; i < accepted.size(); ++i)
    expected += (i == 0 ? "" : i + 1 == accepted.size() ? " or " : ", ") + accepted[i];
  throw ValueError(std::string(name) + "=" + printable(value, 40) + ": expected " + expected + " (or unset)");
}

}  // namespace ember
