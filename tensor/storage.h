// A block of device or host memory shared by a tensor and its views, with the version counter
// that autograd uses to detect in-place writes to tensors saved for backward.
#pragma once

#include <cstddef>
#include <cstdint>

#include "tensor/device.h"
#include "tensor/intrusive_ptr.h"

namespace ember {

// Memory entry points each backend implements (cpu/memory.cpp, cuda/memory.cpp or cuda/absent.cpp).
namespace backend {
void* allocate(Device device, size_t nbytes);
void deallocate(Device device, void* ptr);
// Copies n bytes between any two devices; `non_blocking` lets a host<->CUDA copy return early.
void copy_bytes(void* dst, Device dst_device, const void* src, Device src_device, size_t n,
                bool non_blocking = false);
int cuda_device_count();  // 0 when ember was built without CUDA or no GPU is visible

// Page-locked host memory (cuda/pinned_memory.cpp), from which a copy to a GPU with
// non_blocking=true returns at once. Raises DeviceError when no CUDA device is visible.
void* allocate_pinned(size_t nbytes);
void deallocate_pinned(void* ptr);
bool pinned_memory_available();  // a CUDA device is visible

// Device-memory statistics for training logs, in bytes; the CPU keeps none (0, and a no-op).
// The most bytes in use by tensors at once since the last reset_peak_memory_stats, or the start.
size_t max_memory_allocated(Device device);
// Restarts the peak from the bytes in use now.
void reset_peak_memory_stats(Device device);
}  // namespace backend

class Storage final : public RefCounted {
 public:
  Storage(size_t nbytes, Device device);
  // Page-locked host memory (backend::allocate_pinned).
  struct Pinned {};
  Storage(size_t nbytes, Pinned);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() const { return data_; }
  size_t nbytes() const { return nbytes_; }
  Device device() const { return device_; }
  bool is_pinned() const { return pinned_; }
  uint64_t version() const { return version_; }
  void bump_version() { ++version_; }

 private:
  void* data_ = nullptr;
  size_t nbytes_ = 0;
  Device device_;
  bool pinned_ = false;
  uint64_t version_ = 0;
};

}  // namespace ember
