// Host memory, and the backend entry points that route each request to the device's backend.
#include <array>
#include <bit>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

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

// Host blocks of kCachedMin bytes and more go back on a free list when released and are handed out
// again, up to kCacheLimit bytes kept: from the C library, each such block is mapped fresh and its
// pages faulted in and zeroed by the kernel on first touch, which took about a quarter of a training
// step of examples/train --model cnn. Sizes are rounded up to a class (four per power of two), so
// that a block serves any request of its class. The cache's blocks are page-aligned, so that
// releasing a smaller block (page-aligned only by chance) mostly skips the cache's lock and lookup.
constexpr size_t kCachedMin = size_t{128} << 10;  // glibc's threshold for mapping a block fresh
constexpr size_t kCacheLimit = size_t{1} << 30;
constexpr size_t kPage = 4096;

// The class size of a request of n >= kCachedMin bytes, and its index: 4 * log2 + which quarter.
size_t class_size(size_t n) {
  const size_t step = std::bit_floor(n) >> 2;
  return (n + step - 1) / step * step;
}
size_t class_index(size_t size) {
  const int log = std::bit_width(size) - 1;
  return 4 * static_cast<size_t>(log) + ((size >> (log - 2)) & 3);
}

class HostCache {
 public:
  // A block of `size` bytes (a class size): a free one, or a new one from the C library (after
  // handing the free ones back to it, if it has no room otherwise). Null if there is no memory.
  void* allocate(size_t size) {
    std::lock_guard<std::mutex> lock(mutex_);
    std::vector<void*>& list = free_[class_index(size)];
    if (!list.empty()) {
      void* p = list.back();
      list.pop_back();
      held_ -= size;
      return p;
    }
    void* p = std::aligned_alloc(kPage, size);
    if (!p && held_ > 0) {
      for (std::vector<void*>& blocks : free_) {
        for (void* b : blocks) {
          size_.erase(b);
          std::free(b);
        }
        blocks.clear();
      }
      held_ = 0;
      p = std::aligned_alloc(kPage, size);
    }
    if (p) size_.emplace(p, size);
    return p;
  }
  // Takes back p if it is one of the cache's blocks (keeping it, or freeing it when the cache is
  // full); false if it is not.
  bool release(void* p) {
    std::lock_guard<std::mutex> lock(mutex_);
    const auto it = size_.find(p);
    if (it == size_.end()) return false;
    const size_t size = it->second;
    if (held_ + size > kCacheLimit) {
      size_.erase(it);
      std::free(p);
    } else {
      free_[class_index(size)].push_back(p);
      held_ += size;
    }
    return true;
  }

 private:
  std::mutex mutex_;
  std::unordered_map<void*, size_t> size_;       // every block it owns, handed out or free
  std::array<std::vector<void*>, 4 * 64> free_;  // by class
  size_t held_ = 0;                              // bytes on the free lists
};

// Never destroyed: tensors released during static destruction still find it.
HostCache& host_cache() {
  static HostCache* cache = new HostCache;
  return *cache;
}

}  // namespace

void* allocate(Device device, size_t nbytes) {
  if (device.is_cuda()) return cuda_allocate(device, nbytes);
  void* p = nbytes >= kCachedMin
                ? host_cache().allocate(class_size(nbytes))
                : std::aligned_alloc(kHostAlignment, (nbytes + kHostAlignment - 1) / kHostAlignment * kHostAlignment);
  if (!p) throw Error("out of host memory allocating " + std::to_string(nbytes) + " bytes");
  return p;
}

void deallocate(Device device, void* ptr) {
  if (device.is_cuda()) return cuda_deallocate(device, ptr);
  if (reinterpret_cast<uintptr_t>(ptr) % kPage == 0 && host_cache().release(ptr)) return;
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

// Host memory keeps no statistics.
size_t max_memory_allocated(Device device) { return device.is_cuda() ? cuda_max_memory_allocated(device) : 0; }

void reset_peak_memory_stats(Device device) {
  if (device.is_cuda()) cuda_reset_peak_memory_stats(device);
}

}  // namespace ember::backend
