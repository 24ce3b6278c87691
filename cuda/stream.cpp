// The user streams and events of tensor/cuda_stream.h over the CUDA runtime.
#include "tensor/cuda_stream.h"

#include <cuda_runtime_api.h>

#include "cuda/context.h"
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
  cudaStreamDestroy(as_stream(stream_));  // queued work still completes
}

void Stream::synchronize() const {
  count_host_sync("Stream::synchronize");
  EMBER_CUDA_CHECK(cudaStreamSynchronize(as_stream(stream_)));
}

void Stream::wait(const Event& event) const {
  EMBER_CUDA_CHECK(cudaStreamWaitEvent(as_stream(stream_), as_event(event.handle()), 0));
}

Event::Event(bool enable_timing) : timing_(enable_timing) {
  if (backend::cuda_device_count() == 0) throw DeviceError("cuda::Event: no CUDA device is visible");
  cudaEvent_t e = nullptr;
  EMBER_CUDA_CHECK(cudaEventCreateWithFlags(&e, enable_timing ? cudaEventDefault : cudaEventDisableTiming));
  event_ = e;
}

Event::~Event() {
  if (event_) cudaEventDestroy(as_event(event_));
}

void Event::record(const Stream& stream) {
  EMBER_CUDA_CHECK(cudaEventRecord(as_event(event_), as_stream(stream.handle())));
  recorded_ = true;
}

void Event::record(int device) {
  DeviceGuard guard(device);
  EMBER_CUDA_CHECK(cudaEventRecord(as_event(event_), current_stream(device)));
  recorded_ = true;
}

bool Event::query() const {
  const cudaError_t status = cudaEventQuery(as_event(event_));
  if (status == cudaErrorNotReady) {
    cudaGetLastError();
    return false;
  }
  EMBER_CUDA_CHECK(status);
  return true;
}

void Event::synchronize() const {
  count_host_sync("Event::synchronize");
  EMBER_CUDA_CHECK(cudaEventSynchronize(as_event(event_)));
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
