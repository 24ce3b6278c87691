// The deterministic mode's switch (tensor/deterministic.h).
#include "tensor/deterministic.h"

#include "tensor/error.h"

namespace ember {

void set_deterministic(bool on) { detail::g_deterministic.store(on, std::memory_order_relaxed); }

void alert_not_deterministic(const std::string& op) {
  if (is_deterministic())
    throw NotDeterministicError(op +
                                " does not have a deterministic implementation, but you set set_deterministic(true)");
}

}  // namespace ember
