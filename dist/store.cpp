#include "dist/store.h"

#include <limits>

#include "dist/error.h"
#include "dist/parse.h"

namespace ember::dist {

std::string Store::get(const std::string& key) {
  wait({key}, timeout_);
  return get_present(key);
}

void Store::set_timeout(milliseconds timeout) {
  if (timeout.count() <= 0)
    throw ValueError("Store::set_timeout: the timeout must be positive, got " + std::to_string(timeout.count()) + " ms");
  timeout_ = timeout;
}

void Store::throw_wait_timeout(const std::vector<std::string>& missing, milliseconds timeout) const {
  std::string keys;
  for (const auto& k : missing) keys += (keys.empty() ? "'" : ", '") + k + "'";
  throw DistributedError(describe() + ": waited " + std::to_string(timeout.count()) + " ms for key(s) " + keys +
                         ", which no rank set (did a rank exit early, or is it still starting?)");
}

std::string compare_set_result(const std::string* current, const std::string& expected, const std::string& desired,
                               bool* store_it) {
  *store_it = false;
  if (current == nullptr) {
    if (!expected.empty()) return expected;
    *store_it = true;
    return desired;
  }
  if (*current != expected) return *current;
  *store_it = true;
  return desired;
}

int64_t added_value(const std::string& key, const std::string* current, int64_t delta) {
  constexpr int64_t lo = std::numeric_limits<int64_t>::min(), hi = std::numeric_limits<int64_t>::max();
  const int64_t base = current ? parse_integer("store counter '" + key + "'", *current, lo, hi) : 0;
  int64_t sum = 0;
  if (__builtin_add_overflow(base, delta, &sum))
    throw ValueError("store counter '" + key + "': " + std::to_string(base) + " + " + std::to_string(delta) +
                     " overflows int64");
  return sum;
}

}  // namespace ember::dist
