// Host memory, and the backend entry points that route each request to the device's backend.
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>

#include "tensor/error.h"
#include "tensor/storage.h"

namespace ember::backend {

// Implemented by cuda/memory.cpp, or by cuda/absent.cpp in a build without CUDA.
void* cuda_allocate(Device device, size_t nbytes);
void cuda_deallocate(Device device, void* ptr);
void cuda_copy_bytes(void* dst, Device dst_device, const void* src, Device src_device, size_t n, bool non_blocking);
size_t cuda_max_memory_allocated(Device device);
void cuda_reset_peak_memory_stats(Device device);

namespace {
constexpr size_t kHostAlignment = 64;  // a cache line; also what AVX-512 loads like
}

void* allocate(Device device, size_t nbytes) {
  if (device.is_cuda()) return cuda_allocate(device, nbytes);
  const size_t rounded = (nbytes + kHostAlignment - 1) / kHostAlignment * kHostAlignment;
  void* p = std::aligned_alloc(kHostAlignment, rounded);
  if (!p) throw Error("out of host memory allocating " + std::to_string(nbytes) + " bytes");
  return p;
}

void deallocate(Device device, void* ptr) {
  if (device.is_cuda()) return cuda_deallocate(device, ptr);
  std::free(ptr);
}

void copy_bytes(void* dst, Device dst_device, const void* src, Device src_device, size_t n, bool non_blocking) {
  if (n == 0) return;
  if (dst_device.is_cpu() && src_device.is_cpu()) {
    std::memcpy(dst, src, n);
    return;
  }
  cuda_copy_bytes(dst, dst_device, src, src_device, n, non_blocking);
}

// Host memory comes from the C library, which keeps no statistics.
size_t max_memory_allocated(Device device) { return device.is_cuda() ? cuda_max_memory_allocated(device) : 0; }

void reset_peak_memory_stats(Device device) {
  if (device.is_cuda()) cuda_reset_peak_memory_stats(device);
}

}  // namespace ember::backend
