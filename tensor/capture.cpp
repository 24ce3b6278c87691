#include "tensor/capture.h"

#include <string>

#include "tensor/error.h"

namespace ember::capture {

namespace {
// Per thread: CUDA captures a stream in thread-local mode, so another thread's work is not recorded.
thread_local bool t_active = false;
thread_local const char* t_running_op = nullptr;
}  // namespace

bool active() { return t_active; }

Guard::Guard() : was_active_(t_active) { t_active = true; }
Guard::~Guard() { t_active = was_active_; }

RunningOp::RunningOp(const char* name) : previous_(t_running_op) { t_running_op = name; }
RunningOp::~RunningOp() { t_running_op = previous_; }
const char* RunningOp::current() { return t_running_op; }

void refuse(std::string_view what) {
  if (!t_active) return;
  throw CaptureError("captured step: " + std::string(what) + ", which a CUDA graph cannot replay; move it out of the step (read "
                     "values after the step returns) or run the step eagerly");
}

void check_host_wait(std::string_view what) {
  if (!t_active) return;
  const std::string in = t_running_op ? std::string(" (in ") + t_running_op + ")" : std::string();
  refuse(std::string(what) + in + " waits for device values on the host");
}

}  // namespace ember::capture
