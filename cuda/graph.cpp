// CUDA graphs for tensor/device_graph.h. A graph is captured on a stream of its own (capture cannot
// use the legacy default stream), made current for the capture so that every kernel, copy and
// allocation of the body lands in the graph, and launched there; events order each capture and
// launch after the work queued on the device's current stream and that stream after each launch,
// without a host wait. Instantiated with auto-free-on-launch: allocations a launch leaves alive
// (the gradients, the step's outputs) are freed and made again, at the same addresses, by the next.
#include <memory>

#include "cuda/capture_memory.h"
#include "cuda/context.h"
#include "cuda/cublaslt.h"
#include "cuda/error.h"
#include "tensor/device_graph.h"

namespace ember::backend {

namespace {

struct Graph {
  int device = 0;
  cudaStream_t stream = nullptr;
  cudaGraphExec_t exec = nullptr;
  cudaEvent_t before = nullptr, after = nullptr;
  cuda::HeldMemory held;  // memory from before the capture that the step dropped: replays may read it

  ~Graph() {  // teardown: failures are not worth an exception here
    if (exec) cudaGraphExecDestroy(exec);
    if (before) cudaEventDestroy(before);
    if (after) cudaEventDestroy(after);
    if (!stream) return;
    cuda::free_held_memory(held, stream);
    cuda::release_workspace(device, stream);  // the runtime may hand the stream's handle out again
    cudaStreamDestroy(stream);
  }
};

// Work queued on `to` from now on waits for the work queued on `from` so far.
void order_after(cudaStream_t from, cudaStream_t to, cudaEvent_t event) {
  EMBER_CUDA_CHECK(cudaEventRecord(event, from));
  EMBER_CUDA_CHECK(cudaStreamWaitEvent(to, event, 0));
}

}  // namespace

void* cuda_graph_capture(Device device, const std::function<void()>& body) {
  const cuda::DeviceGuard guard(device);
  auto g = std::make_unique<Graph>();
  g->device = device.index;
  EMBER_CUDA_CHECK(cudaStreamCreateWithFlags(&g->stream, cudaStreamNonBlocking));
  EMBER_CUDA_CHECK(cudaEventCreateWithFlags(&g->before, cudaEventDisableTiming));
  EMBER_CUDA_CHECK(cudaEventCreateWithFlags(&g->after, cudaEventDisableTiming));
  const cudaStream_t outer = cuda::current_stream(device.index);
  order_after(outer, g->stream, g->before);
  cuda::reserve_workspace(device.index, g->stream);  // before the capture: the graph keeps its address
  // Thread-local mode: calls that are unsafe during capture fail on this thread only, and other
  // threads keep working.
  EMBER_CUDA_CHECK(cudaStreamBeginCapture(g->stream, cudaStreamCaptureModeThreadLocal));
  cuda::set_current_stream(device.index, g->stream);
  cuda::begin_capture_memory();
  cudaGraph_t graph = nullptr;
  auto finish_capture = [&] {
    const cudaError_t ended = cudaStreamEndCapture(g->stream, &graph);
    cuda::set_current_stream(device.index, outer);
    g->held = cuda::end_capture_memory();  // freed with the graph (or with g, if the capture fails)
    return ended;
  };
  try {
    body();
  } catch (...) {
    if (finish_capture() != cudaSuccess) cudaGetLastError();  // an invalidated capture: its error is not the news
    if (graph) cudaGraphDestroy(graph);
    throw;
  }
  const cudaError_t ended = finish_capture();
  if (ended != cudaSuccess && graph) cudaGraphDestroy(graph);
  EMBER_CUDA_CHECK(ended);
  const cudaError_t made = cudaGraphInstantiateWithFlags(&g->exec, graph, cudaGraphInstantiateFlagAutoFreeOnLaunch);
  cudaGraphDestroy(graph);  // the executable graph keeps what it needs
  EMBER_CUDA_CHECK(made);
  return g.release();
}

void cuda_graph_replay(void* handle, Device device) {
  Graph& g = *static_cast<Graph*>(handle);
  const cuda::DeviceGuard guard(device);
  const cudaStream_t outer = cuda::current_stream(device.index);
  order_after(outer, g.stream, g.before);
  EMBER_CUDA_CHECK(cudaGraphLaunch(g.exec, g.stream));
  order_after(g.stream, outer, g.after);
}

void cuda_graph_destroy(void* handle) {
  Graph* g = static_cast<Graph*>(handle);
  {
    const cuda::DeviceGuard guard(g->device);
    cudaStreamSynchronize(g->stream);  // teardown, never inside a capture: a running launch keeps its graph
    cudaGetLastError();
  }
  delete g;
}

}  // namespace ember::backend
