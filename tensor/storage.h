/// @file
/// A block of device or host memory shared by a tensor and its views, with the version counter
/// that autograd uses to detect in-place writes to tensors saved for backward.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>

#include "tensor/device.h"
#include "tensor/intrusive_ptr.h"

namespace ember {

// Memory entry points (tensor/memory.cpp), which route each request to the device's backend
// (cpu/memory.cpp, cuda/memory.cpp or cuda/absent.cpp) and keep its statistics.
namespace backend {
/// nbytes of memory on `device`. When the backend has none, its cache is emptied and the request
/// tried once more; then OutOfMemoryError. Nothing is leaked and later requests work.
void* allocate(Device device, size_t nbytes);
/// Gives back what allocate returned, with the nbytes it was asked for.
void deallocate(Device device, void* ptr, size_t nbytes);
/// Copies n bytes between any two devices; `non_blocking` lets a host<->CUDA copy return early.
void copy_bytes(void* dst, Device dst_device, const void* src, Device src_device, size_t n,
                bool non_blocking = false);
int cuda_device_count();  ///< 0 when ember was built without CUDA or no GPU is visible

/// Page-locked host memory (cuda/pinned_memory.cpp), from which a copy to a GPU with
/// non_blocking=true returns at once. Raises DeviceError when no CUDA device is visible.
void* allocate_pinned(size_t nbytes);
void deallocate_pinned(void* ptr);  ///< Gives back what allocate_pinned returned.
bool pinned_memory_available();     ///< a CUDA device is visible

/// The memory figures of one device, for the host (tensors' memory, not pinned memory) as for a
/// GPU. Named after the keys of PyTorch's torch.cuda.memory_stats
/// (https://docs.pytorch.org/docs/stable/generated/torch.cuda.memory.memory_stats.html).
struct MemoryStats {
  size_t allocated = 0;            ///< "allocated_bytes.all.current": bytes requested by live tensors' storage
  size_t peak = 0;                 ///< "allocated_bytes.all.peak", since the start or reset_peak_memory_stats
  size_t reserved = 0;             ///< "reserved_bytes.all.current": held from the driver (the CUDA pool) or the
                                   ///< C library (the host): in use, or cached for reuse
  uint64_t allocations = 0;        ///< "allocation.all.allocated": allocations made since the start
  uint64_t live_allocations = 0;   ///< "allocation.all.current": allocations not yet freed
  uint64_t num_alloc_retries = 0;  ///< "num_alloc_retries": failed allocations retried after emptying the cache
  uint64_t num_ooms = 0;           ///< "num_ooms": OutOfMemoryError raised
};
/// The memory figures of `device`; DeviceError for a CUDA device that is not visible.
MemoryStats memory_stats(Device device);
/// memory_stats(device).peak: the Runner's `memory:` figure.
size_t max_memory_allocated(Device device);
/// Restarts the peak from the bytes in use now.
void reset_peak_memory_stats(Device device);
/// Hands the cached, unused memory of `device` back to the driver or the C library (lowers
/// `reserved`), once the frees still queued on its streams have run.
void empty_cache(Device device);
/// The machine's physical memory in bytes (0 when unknown): the bound of what a reader may allocate.
size_t host_memory_total();
}  // namespace backend

/// A block of memory on one device, shared by a tensor and its views, with the version counter of
/// the in-place writes into it.
class Storage final : public RefCounted {
 public:
  /// `nbytes` of memory on `device` (backend::allocate; OutOfMemoryError when it runs out).
  Storage(size_t nbytes, Device device);
  /// The tag that asks for page-locked host memory (backend::allocate_pinned).
  struct Pinned {};
  Storage(size_t nbytes, Pinned);  ///< `nbytes` of page-locked host memory; DeviceError when no CUDA device is visible.
  /// `nbytes` at `data` on `device`, memory another library owns (a NumPy array, a DLPack producer's
  /// buffer: PyTorch's from_blob). ember reads and writes it in place and never frees it: `release`
  /// (which must not throw; it may be empty) runs once, when the last tensor viewing it is gone. It
  /// is not counted in memory_stats.
  Storage(void* data, size_t nbytes, Device device, std::function<void()> release);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  /// The memory's address; StateError while the memory is released.
  void* data() const {
    if (released_) throw_released();
    return data_;
  }
  size_t nbytes() const { return nbytes_; }   ///< Size in bytes.
  Device device() const { return device_; }   ///< Where the memory lives.
  bool is_pinned() const { return pinned_; }  ///< Whether it is page-locked host memory.
  bool is_borrowed() const { return borrowed_; }  ///< Whether another library owns the memory.
  /// Bumped by every in-place write; autograd compares it with the version a saved tensor had.
  uint64_t version() const { return version_; }
  void bump_version() { ++version_; }  ///< Marks an in-place write.

  /// Frees the memory but keeps the Storage, and so every tensor that views it, alive (PyTorch's
  /// untyped_storage().resize_(0), which FSDP uses to drop a layer's gathered parameters between its
  /// forward and its backward). Not for pinned or borrowed memory (ValueError).
  void release_memory();
  /// Allocates nbytes() again after release_memory() (contents undefined); a no-op otherwise.
  void restore_memory();
  bool is_released() const { return released_; }  ///< Whether release_memory() freed the memory.
  /// Puts the version counter back, after writes that restored the very values tensors saved for
  /// backward hold (a parameter gathered again before its backward).
  void restore_version(uint64_t version) { version_ = version; }

 private:
  [[noreturn]] static void throw_released();

  void* data_ = nullptr;
  size_t nbytes_ = 0;
  bool released_ = false;
  Device device_;
  bool pinned_ = false;
  bool borrowed_ = false;
  std::function<void()> release_;  // of borrowed memory: hands it back to its owner
  uint64_t version_ = 0;
};

}  // namespace ember
