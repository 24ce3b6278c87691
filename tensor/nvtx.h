// Named ranges for profiler timelines, as PyTorch's emit_nvtx gives them: each module's forward,
// each op of the backward (named after the module whose forward recorded it), the optimizer step,
// the grad scaler's passes and each collective. Off by default: EMBER_NVTX=1 or set_enabled(true)
// (the train program's --nvtx) turns them on; off, each place costs one relaxed atomic load.
// In a CUDA build they are NVTX ranges (NVTX3, header-only in the toolkit: cuda/nvtx.cpp), which
// nsys draws and `ncu --nvtx --nvtx-include "<range>/"` filters kernels by; a listener sees them in
// any build (tests, a tracer of one's own).
#pragma once

#include <atomic>
#include <functional>
#include <string>
#include <string_view>

namespace ember::nvtx {

namespace detail {
std::atomic<bool>& enabled_flag();
// The profiler's side: a push and a pop on the calling thread's range stack (no-ops without CUDA).
void push(const char* name);
void pop();
}  // namespace detail

inline bool enabled() { return detail::enabled_flag().load(std::memory_order_relaxed); }
void set_enabled(bool on);

// Called on the thread of each range with its name when it opens and with nullptr when it closes.
// Set it while no range is open; an empty function removes it.
using Listener = std::function<void(const char* name)>;
void set_listener(Listener listener);

// A range open for the object's lifetime, when ranges are enabled at its construction; the name is
// the parts joined (built only then).
class Range {
 public:
  explicit Range(std::string_view name, std::string_view suffix = {});
  ~Range();
  Range(const Range&) = delete;
  Range& operator=(const Range&) = delete;

 private:
  bool open_ = false;
};

// A module's forward: a range named `label`, which is also the thread's current module (the scope
// the backward ops recorded inside it are named after) until it closes.
class ModuleScope {
 public:
  explicit ModuleScope(const std::string& label);
  ~ModuleScope();
  ModuleScope(const ModuleScope&) = delete;
  ModuleScope& operator=(const ModuleScope&) = delete;

 private:
  Range range_;
  const std::string* outer_;
};

// The label of the innermost module forward running on this thread; "" outside any.
const std::string& current_module();

}  // namespace ember::nvtx
