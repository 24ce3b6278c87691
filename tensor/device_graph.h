/// @file
/// A device graph: the work one call of a function queues on a device, recorded once and replayed
/// as a whole (a CUDA graph: one launch instead of hundreds). train::CompiledStep builds on it.
/// While the function is recorded, capture::active() holds (tensor/capture.h): host reads raise
/// CaptureError, the optimizers read their learning rates and random ops their Philox offsets from
/// device memory, and memory it allocates keeps its address in every replay.
#pragma once

#include <functional>
#include <memory>

#include "tensor/device.h"

namespace ember {

namespace backend {
/// @cond INTERNAL
// cuda/graph.cpp (cuda/absent.cpp without CUDA): capture on a stream of the graph's own, made
// current for the capture; the handle owns the instantiated graph.
void* cuda_graph_capture(Device device, const std::function<void()>& body);
void cuda_graph_replay(void* graph, Device device);
void cuda_graph_destroy(void* graph);
/// @endcond
}  // namespace backend

/// Work recorded once from a function and replayed (see the file's description).
class DeviceGraph {
 public:
  /// Records the work `body` queues on `device` (its current stream), under capture::Guard, without
  /// running it: replay() runs it. CUDA: stream capture in thread-local mode, then a graph whose
  /// allocations are freed and made again, at the same addresses, by each launch. On the CPU there is
  /// no graph to record: body is kept and each replay calls it again under the same guard, so the
  /// rules of a captured step are checked on any machine. CaptureError (or the error body raised)
  /// when the work cannot be captured; nothing is left half-recorded.
  DeviceGraph(Device device, std::function<void()> body);
  ~DeviceGraph();
  DeviceGraph(const DeviceGraph&) = delete;
  DeviceGraph& operator=(const DeviceGraph&) = delete;

  /// Queues the recorded work on the device's current stream, after the work queued there so far.
  void replay();
  Device device() const { return device_; }  ///< Where the work runs.

 private:
  Device device_;
  std::function<void()> body_;  // the CPU's recording
  void* graph_ = nullptr;       // the CUDA graph
};

}  // namespace ember
