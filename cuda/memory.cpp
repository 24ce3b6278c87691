// Device memory for tensors: the CUDA side of tensor/memory.cpp. Allocation is stream-ordered
// (cudaMallocAsync on the current stream, from the device's default pool whose release threshold
// context.cpp raises), so freed blocks are reused without a device synchronisation.
#include <cstdio>

#include <unordered_set>
#include <utility>
#include <vector>

#include "cuda/capture_memory.h"
#include "cuda/context.h"
#include "cuda/error.h"
#include "tensor/capture.h"
#include "tensor/host_sync.h"
#include "tensor/storage.h"

namespace ember::backend {

// Implemented by cuda/pinned_memory.cpp: `host` may point into a pinned block, which then stays out
// of reuse until the work queued so far on `stream` (of `device`) has finished.
void record_pinned_use(const void* host, int device, cudaStream_t stream);

namespace {
// This thread's open capture: the graph allocations it made, and the frees of other memory it met.
struct CaptureMemory {
  bool open = false;
  std::unordered_set<void*> allocated;
  std::vector<std::pair<Device, void*>> held_back;
};
thread_local CaptureMemory t_capture;
}  // namespace

int cuda_device_count() {
  static const int count = [] {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {  // no driver, no GPU: a CPU-only machine
      cudaGetLastError();
      return 0;
    }
    return n;
  }();
  return count;
}

// Null when the pool cannot grow: tensor/memory.cpp then empties the cache and asks once more.
void* cuda_allocate(Device device, size_t nbytes) {
  cuda::DeviceGuard guard(device);
  cuda::context(device.index);  // first use sets up the pool
  void* p = nullptr;
  const cudaError_t status = cudaMallocAsync(&p, nbytes, cuda::current_stream(device.index));
  if (status == cudaErrorMemoryAllocation) {
    cudaGetLastError();  // not sticky: the context stays usable
    return nullptr;
  }
  if (status != cudaSuccess) cuda::throw_cuda_error(status, "cudaMallocAsync", __FILE__, __LINE__);
  if (t_capture.open) t_capture.allocated.insert(p);
  return p;
}

// Called from Storage's destructor: reports failures on stderr, never throws.
void cuda_deallocate(Device device, void* ptr) {
  int previous = -1;
  if (cudaGetDevice(&previous) != cudaSuccess) {  // the runtime is shutting down with the process
    cudaGetLastError();
    return;
  }
  if (t_capture.open && t_capture.allocated.erase(ptr) == 0) {  // older memory: freed when the capture ends
    t_capture.held_back.emplace_back(device, ptr);
    return;
  }
  if (previous != device.index) cudaSetDevice(device.index);
  cudaStream_t stream = nullptr;
  try {
    stream = cuda::current_stream(device.index);
  } catch (...) {
  }
  const cudaError_t status = cudaFreeAsync(ptr, stream);
  if (status != cudaSuccess) {
    cudaGetLastError();
    if (status != cudaErrorCudartUnloading && status != cudaErrorContextIsDestroyed)
      std::fprintf(stderr, "ember: cudaFreeAsync on %s failed: %s\n", device.str().c_str(), cudaGetErrorString(status));
  }
  if (previous != device.index) cudaSetDevice(previous);
}

void cuda_copy_bytes(void* dst, Device dst_device, const void* src, Device src_device, size_t n, bool non_blocking) {
  const Device device = dst_device.is_cuda() ? dst_device : src_device;
  cuda::DeviceGuard guard(device);
  // Another device's pending writes to src must land before this device reads it.
  if (dst_device.is_cuda() && src_device.is_cuda() && !(dst_device == src_device)) cuda::synchronize(src_device.index);
  const cudaStream_t stream = cuda::current_stream(device.index);
  // A blocking copy waits below: inside a captured step it is refused before the copy is issued (a
  // pageable memcpy would invalidate the capture).
  if (!non_blocking) capture::check_host_wait("a blocking copy between the host and a GPU");
  EMBER_CUDA_CHECK(cudaMemcpyAsync(dst, src, n, cudaMemcpyDefault, stream));
  if (non_blocking) {
    // The copy may still read or write the host side after this returns.
    if (src_device.is_cpu()) record_pinned_use(src, device.index, stream);
    if (dst_device.is_cpu()) record_pinned_use(dst, device.index, stream);
    return;
  }
  count_host_sync("a blocking copy between the host and a GPU");
  EMBER_CUDA_CHECK(cudaStreamSynchronize(stream));
  cuda::raise_kernel_errors(device.index);
}

namespace {
cudaMemPool_t default_pool(Device device) {
  cuda::context(device.index);  // raises DeviceError for a device that is not visible
  cudaMemPool_t pool;
  EMBER_CUDA_CHECK(cudaDeviceGetDefaultMemPool(&pool, device.index));
  return pool;
}
}  // namespace

size_t cuda_reserved(Device device) {
  uint64_t reserved = 0;
  EMBER_CUDA_CHECK(cudaMemPoolGetAttribute(default_pool(device), cudaMemPoolAttrReservedMemCurrent, &reserved));
  return static_cast<size_t>(reserved);
}

// The pool hands back only blocks whose frees the host has seen complete (cudaMemPoolTrimTo's
// notes in the CUDA runtime API reference): a freed block counts as outstanding until then. The
// frees may sit on any stream of the device (other threads', set_current_stream), so wait for them
// all. The same wait lets the retry in tensor/memory.cpp reuse blocks freed on other streams.
void cuda_empty_cache(Device device) {
  const cudaMemPool_t pool = default_pool(device);
  cuda::DeviceGuard guard(device);
  count_host_sync("empty_cache (cudaDeviceSynchronize)");  // refused inside a captured step, before the call
  EMBER_CUDA_CHECK(cudaDeviceSynchronize());
  EMBER_CUDA_CHECK(cudaMemPoolTrimTo(pool, 0));
  // Graph memory that no live graph holds (the pools of destroyed CompiledSteps) goes back too.
  EMBER_CUDA_CHECK(cudaDeviceGraphMemTrim(device.index));
}

// The driver's free and total bytes on the device; zeros if it cannot say.
void cuda_memory_info(Device device, size_t* free_bytes, size_t* total_bytes) {
  cuda::DeviceGuard guard(device);
  *free_bytes = *total_bytes = 0;
  if (cudaMemGetInfo(free_bytes, total_bytes) != cudaSuccess) cudaGetLastError();
}

}  // namespace ember::backend

namespace ember::cuda {

void begin_capture_memory() {
  backend::t_capture = {};
  backend::t_capture.open = true;
}

HeldMemory end_capture_memory() {
  backend::CaptureMemory& c = backend::t_capture;
  c.open = false;
  c.allocated.clear();
  HeldMemory held = std::move(c.held_back);
  c.held_back.clear();
  return held;
}

void free_held_memory(const HeldMemory& held, cudaStream_t stream) {
  for (const auto& [device, ptr] : held) {
    const DeviceGuard guard(device);
    const cudaError_t status = cudaFreeAsync(ptr, stream);
    if (status != cudaSuccess) {
      cudaGetLastError();
      std::fprintf(stderr, "ember: cudaFreeAsync on %s of memory a captured step dropped failed: %s\n",
                   device.str().c_str(), cudaGetErrorString(status));
    }
  }
}

}  // namespace ember::cuda
