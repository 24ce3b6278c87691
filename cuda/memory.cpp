// Device memory for tensors: the CUDA entry points of tensor/storage.h. Allocation is stream-ordered
// (cudaMallocAsync on the current stream, from the device's default pool whose release threshold
// context.cpp raises), so freed blocks are reused without a device synchronisation.
#include <cstdio>
#include <string>

#include "cuda/context.h"
#include "cuda/error.h"
#include "tensor/host_sync.h"
#include "tensor/storage.h"

namespace ember::backend {

// Implemented by cuda/pinned_memory.cpp: `host` may point into a pinned block, which then stays out
// of reuse until the work queued so far on `stream` (of `device`) has finished.
void record_pinned_use(const void* host, int device, cudaStream_t stream);

namespace {

std::string format_bytes(size_t n) {
  const char* units[] = {"bytes", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(n);
  int u = 0;
  while (v >= 1024.0 && u < 4) {
    v /= 1024.0;
    ++u;
  }
  char buf[64];
  std::snprintf(buf, sizeof(buf), u == 0 ? "%.0f %s" : "%.2f %s", v, units[u]);
  return buf;
}

[[noreturn]] void out_of_memory(Device device, size_t requested) {
  const cuda::MemoryStats s = cuda::memory_stats(device.index);
  size_t free_bytes = 0, total_bytes = 0;
  if (cudaMemGetInfo(&free_bytes, &total_bytes) != cudaSuccess) cudaGetLastError();
  throw OutOfMemoryError("CUDA out of memory on " + device.str() + ": tried to allocate " + format_bytes(requested) +
                             "; " + format_bytes(s.allocated) + " allocated by tensors, " + format_bytes(s.reserved) +
                             " reserved by ember's pool (peak " + format_bytes(s.peak) + "), " +
                             format_bytes(free_bytes) + " free of " + format_bytes(total_bytes) + " on the device",
                         requested, s.allocated, s.reserved, s.peak);
}

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

void* cuda_allocate(Device device, size_t nbytes) {
  cuda::DeviceGuard guard(device);
  cuda::context(device.index);  // first use sets up the pool
  const cudaStream_t stream = cuda::current_stream(device.index);
  void* p = nullptr;
  cudaError_t status = cudaMallocAsync(&p, nbytes, stream);
  if (status == cudaErrorMemoryAllocation) {
    cudaGetLastError();
    // Blocks freed on other streams return to the pool only once those streams pass the free:
    // wait for the device, give back what the pool holds unused, and try once more.
    EMBER_CUDA_CHECK(cudaDeviceSynchronize());
    cudaMemPool_t pool;
    EMBER_CUDA_CHECK(cudaDeviceGetDefaultMemPool(&pool, device.index));
    EMBER_CUDA_CHECK(cudaMemPoolTrimTo(pool, 0));
    status = cudaMallocAsync(&p, nbytes, stream);
    if (status == cudaErrorMemoryAllocation) {
      cudaGetLastError();
      out_of_memory(device, nbytes);
    }
  }
  if (status != cudaSuccess) cuda::throw_cuda_error(status, "cudaMallocAsync", __FILE__, __LINE__);
  return p;
}

// Called from Storage's destructor: reports failures on stderr, never throws.
void cuda_deallocate(Device device, void* ptr) {
  int previous = -1;
  if (cudaGetDevice(&previous) != cudaSuccess) {  // the runtime is shutting down with the process
    cudaGetLastError();
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
  EMBER_CUDA_CHECK(cudaMemcpyAsync(dst, src, n, cudaMemcpyDefault, stream));
  if (non_blocking) {
    // The copy may still read or write the host side after this returns.
    if (src_device.is_cpu()) record_pinned_use(src, device.index, stream);
    if (dst_device.is_cpu()) record_pinned_use(dst, device.index, stream);
    return;
  }
  count_host_sync();
  EMBER_CUDA_CHECK(cudaStreamSynchronize(stream));
  cuda::raise_kernel_errors(device.index);
}

size_t cuda_max_memory_allocated(Device device) { return cuda::memory_stats(device.index).peak; }

void cuda_reset_peak_memory_stats(Device device) { cuda::reset_peak_memory_stats(device.index); }

}  // namespace ember::backend
