// The user streams and events of tensor/cuda_stream.h over the CUDA runtime.
#include "tensor/cuda_stream.h"

#include <cuda_runtime_api.h>

#include "cuda/context.h"
#include "cuda/cublaslt.h"
#include "cuda/error.h"
#include "tensor/error.h"
#include "tensor/host_sync.h"
#include "tensor/storage.h"

namespace ember::cuda {

namespace {
cudaStream_t as_stream(void* s) { return static_cast<cudaStream_t>(s); }
cudaEvent_t as_event(void* e) { return static_cast<cudaEvent_t>(e); }
}  // namespace

Stream::Stream(int device) : device_(device) {
  DeviceGuard guard(device);  // DeviceError for an index no GPU answers to
  cudaStream_t s = nullptr;
  EMBER_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  stream_ = s;
}

Stream::~Stream() {
  if (!stream_) return;
  DeviceGuard guard(device_);
  release_workspace(device_, as_stream(stream_));  // the handle may be reused by the next stream
  cudaStreamDestroy(as_stream(stream_));  // queued work still completes
}

void Stream::synchronize() const {
  count_host_sync("Stream::synchronize");
  EMBER_CUDA_CHECK(cudaStreamSynchronize(as_stream(stream_)));
}

void Stream::wait(const Event& event) const {
  if (!event.handle()) return;  // never recorded: nothing to wait for, as in PyTorch
  EMBER_CUDA_CHECK(cudaStreamWaitEvent(as_stream(stream_), as_event(event.handle()), 0));
}

void set_device(int device) {
  check_index(device);
  EMBER_CUDA_CHECK(cudaSetDevice(device));
}

Event::Event(bool enable_timing) : timing_(enable_timing) {
  if (backend::cuda_device_count() == 0) throw DeviceError("cuda::Event: no CUDA device is visible");
}

Event::~Event() {
  if (event_) cudaEventDestroy(as_event(event_));
}

void Event::create_on(int device) {
  if (event_) {
    if (device != device_)
      throw DeviceError("cuda::Event: created on cuda:" + std::to_string(device_) +
                        ", cannot be recorded on a stream of cuda:" + std::to_string(device));
    return;
  }
  // An event belongs to the device current at its creation: cudaEventRecord of it on another
  // device's stream fails with cudaErrorInvalidResourceHandle.
  DeviceGuard guard(device);
  cudaEvent_t e = nullptr;
  EMBER_CUDA_CHECK(cudaEventCreateWithFlags(&e, timing_ ? cudaEventDefault : cudaEventDisableTiming));
  event_ = e;
  device_ = device;
}

void Event::record(const Stream& stream) {
  create_on(stream.device());
  EMBER_CUDA_CHECK(cudaEventRecord(as_event(event_), as_stream(stream.handle())));
  recorded_ = true;
}

void Event::record(int device) {
  DeviceGuard guard(device);
  create_on(device);
  EMBER_CUDA_CHECK(cudaEventRecord(as_event(event_), current_stream(device)));
  recorded_ = true;
}

bool Event::query() const {
  if (!event_) return true;
  const cudaError_t status = cudaEventQuery(as_event(event_));
  if (status == cudaErrorNotReady) {
    cudaGetLastError();
    return false;
  }
  EMBER_CUDA_CHECK(status);
  return true;
}

void Event::synchronize() const {
  if (!event_) return;
  count_host_sync("Event::synchronize");
  EMBER_CUDA_CHECK(cudaEventSynchronize(as_event(event_)));
}

void Event::wait(int device) const {
  if (!event_) return;
  DeviceGuard guard(device);
  EMBER_CUDA_CHECK(cudaStreamWaitEvent(current_stream(device), as_event(event_), 0));
}

double Event::elapsed_ms(const Event& end) const {
  if (!timing_ || !end.timing_) throw ValueError("Event::elapsed_ms: both events need enable_timing = true");
  if (!recorded_ || !end.recorded_) throw ValueError("Event::elapsed_ms: both events must be recorded first");
  float ms = 0;
  EMBER_CUDA_CHECK(cudaEventElapsedTime(&ms, as_event(event_), as_event(end.event_)));
  return ms;
}

StreamGuard::StreamGuard(const Stream& stream)
    : device_(stream.device()), previous_(current_stream(stream.device())) {
  set_current_stream(device_, as_stream(stream.handle()));
}

StreamGuard::~StreamGuard() { set_current_stream(device_, as_stream(previous_)); }

}  // namespace ember::cuda
