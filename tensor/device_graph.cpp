#include "tensor/device_graph.h"

#include "tensor/capture.h"

namespace ember {

DeviceGraph::DeviceGraph(Device device, std::function<void()> body) : device_(device) {
  if (device.is_cpu()) {
    body_ = std::move(body);
    return;
  }
  graph_ = backend::cuda_graph_capture(device, [&] {
    const capture::Guard capturing;
    body();
  });
}

DeviceGraph::~DeviceGraph() {
  if (graph_ != nullptr) backend::cuda_graph_destroy(graph_);
}

void DeviceGraph::replay() {
  if (graph_ != nullptr) {
    backend::cuda_graph_replay(graph_, device_);
    return;
  }
  const capture::Guard capturing;
  body_();
}

}  // namespace ember
