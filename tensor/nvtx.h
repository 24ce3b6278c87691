/// @file
/// Named ranges for profiler timelines, as PyTorch's emit_nvtx gives them: each module's forward,
/// each op of the backward (named after the module whose forward recorded it), the optimizer step,
/// the grad scaler's passes and each collective. Off by default: EMBER_NVTX=1 or set_enabled(true)
/// (the train program's --nvtx) turns them on; off, each place costs one relaxed atomic load.
/// In a CUDA build they are NVTX ranges (NVTX3, header-only in the toolkit: cuda/nvtx.cpp), which
/// nsys draws and ncu's --nvtx-include filters kernels by; a listener sees them in any build
/// (tests, a tracer of one's own).
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

/// Whether ranges open (EMBER_NVTX=1 at start, or set_enabled()).
inline bool enabled() { return detail::enabled_flag().load(std::memory_order_relaxed); }
/// Turns the ranges on or off for the whole process.
void set_enabled(bool on);

/// Called on the thread of each range with its name when it opens and with nullptr when it closes.
using Listener = std::function<void(const char* name)>;
/// Installs `listener` (set it while no range is open); an empty function removes it.
void set_listener(Listener listener);

/// A range open for the object's lifetime, when ranges are enabled at its construction.
class Range {
 public:
  /// Opens the range named `name` followed by `suffix` (joined only when ranges are on).
  explicit Range(std::string_view name, std::string_view suffix = {});
  ~Range();  ///< Closes the range, if it opened.
  Range(const Range&) = delete;
  Range& operator=(const Range&) = delete;

 private:
  bool open_ = false;
};

/// A module's forward: a range named `label`, which is also the thread's current module (the scope
/// the backward ops recorded inside it are named after) until it closes.
class ModuleScope {
 public:
  /// Opens the range and makes `label` (which must outlive the scope) the current module.
  explicit ModuleScope(const std::string& label);
  ~ModuleScope();  ///< Closes the range; the enclosing module is current again.
  ModuleScope(const ModuleScope&) = delete;
  ModuleScope& operator=(const ModuleScope&) = delete;

 private:
  Range range_;
  const std::string* outer_;
};

/// The label of the innermost module forward running on this thread; "" outside any.
const std::string& current_module();

}  // namespace ember::nvtx
