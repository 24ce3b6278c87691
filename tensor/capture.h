/// @file
/// Whole-step capture (train::CompiledStep over CUDA graphs): the state the engine consults while a
/// step is being recorded rather than run. A graph replays each kernel with the arguments it had at
/// capture, so inside a captured step nothing may wait for device values on the host, and what
/// changes from step to step (the learning rate, the Philox offset) is read by the kernels from
/// device memory that the host rewrites before each replay.
#pragma once

#include <string_view>

namespace ember::capture {

/// Whether the calling thread is capturing a step.
bool active();

/// Marks the calling thread as capturing for the object's lifetime (CompiledStep holds one while it
/// records; tests hold one to check what a captured step refuses).
class Guard {
 public:
  Guard();   ///< Starts capturing on this thread.
  ~Guard();  ///< Restores the state before construction (guards nest).
  Guard(const Guard&) = delete;
  Guard& operator=(const Guard&) = delete;

 private:
  bool was_active_;
};

/// Raises CaptureError when capturing: `what` (e.g. "item() of a float32 tensor of shape []") waits
/// for the device on the host, which a graph cannot replay. The message names the primitive running
/// at the time, if any. Called by every host synchronisation point (tensor/host_sync.h).
void check_host_wait(std::string_view what);

/// Raises CaptureError when capturing, for a step that does `what` ("DynamicLossScaler.update with
/// raise_error_at_min_scale reads found_inf on the host"), which a graph cannot replay. Callers that
/// build `what` at run time test active() first, so that steps outside a capture pay nothing.
void refuse(std::string_view what);

/// The primitive whose kernel runs on this thread for the object's lifetime (detail::dispatch), so
/// that a refusal names it; nullptr outside kernels.
class RunningOp {
 public:
  explicit RunningOp(const char* name);  ///< Marks `name` as running until destruction.
  ~RunningOp();
  RunningOp(const RunningOp&) = delete;
  RunningOp& operator=(const RunningOp&) = delete;
  /// The innermost running primitive's name, or nullptr.
  static const char* current();

 private:
  const char* previous_;
};

}  // namespace ember::capture
