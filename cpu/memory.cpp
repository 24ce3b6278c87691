// Host memory for tensors: the CPU side of tensor/memory.cpp. Blocks of 128 KiB and more come from a
// cache that keeps them for reuse; smaller ones from the C library, the smallest through a per-thread
// cache.
#include <unistd.h>

#include <array>
#include <atomic>
#include <bit>
#include <cstdint>
#include <cstdlib>
#include <mutex>
#include <new>
#include <unordered_map>
#include <vector>

namespace ember::backend {

namespace {

constexpr size_t kHostAlignment = 64;  // a cache line; also what AVX-512 loads like

// Host blocks of kCachedMin bytes and more go back on a free list when released and are handed out
// again, up to kCacheLimit bytes kept: from the C library, each such block is mapped fresh and its
// pages faulted in and zeroed by the kernel on first touch, which took about a quarter of a training
// step of examples/train --model cnn. Sizes are rounded up to a class (four per power of two), so
// that a block serves any request of its class.
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

size_t small_size(size_t n) { return (n + kHostAlignment - 1) / kHostAlignment * kHostAlignment; }

class HostCache {
 public:
  // A block of `size` bytes (a class size): a free one, or a new one from the C library. Null if
  // there is no memory.
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
    if (!p) return nullptr;
    try {
      size_.emplace(p, size);
    } catch (const std::bad_alloc&) {
      std::free(p);
      return nullptr;
    }
    owned_ += size;
    return p;
  }
  // Takes back a block of `size` bytes: keeps it, or frees it when the cache is full.
  void release(void* p, size_t size) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (held_ + size <= kCacheLimit) {
      try {
        free_[class_index(size)].push_back(p);
        held_ += size;
        return;
      } catch (const std::bad_alloc&) {  // no room to remember it: free it instead
      }
    }
    size_.erase(p);
    owned_ -= size;
    std::free(p);
  }
  // Frees every block on the free lists.
  void empty() {
    std::lock_guard<std::mutex> lock(mutex_);
    for (std::vector<void*>& blocks : free_) {
      for (void* b : blocks) {
        size_.erase(b);
        std::free(b);
      }
      blocks.clear();
      blocks.shrink_to_fit();
    }
    owned_ -= held_;
    held_ = 0;
  }
  // Bytes of the blocks it owns, handed out or free.
  size_t owned() {
    std::lock_guard<std::mutex> lock(mutex_);
    return owned_;
  }

 private:
  std::mutex mutex_;
  std::unordered_map<void*, size_t> size_;       // every block it owns, handed out or free
  std::array<std::vector<void*>, 4 * 64> free_;  // by class
  size_t held_ = 0;                              // bytes on the free lists
  size_t owned_ = 0;                             // bytes of every block in size_
};

// Never destroyed: tensors released during static destruction still find it.
HostCache& host_cache() {
  static HostCache* cache = new HostCache;
  return *cache;
}

std::atomic<size_t> small_bytes{0};  // held by blocks below kCachedMin, as rounded up

// Blocks of up to kThreadCachedMax bytes are also kept after release, up to kThreadCachedPerSize of
// each size per thread, and handed out again without a lock: glibc serves 64-byte-aligned requests
// through memalign, which splits a chunk and frees its head each time, a third of the instructions
// of a one-element add (callgrind). Under AddressSanitizer nothing is kept, so that it sees every
// use after free.
constexpr size_t kThreadCachedMax = 1024;
#if defined(__SANITIZE_ADDRESS__)
constexpr size_t kThreadCachedPerSize = 0;
#else
constexpr size_t kThreadCachedPerSize = 32;
#endif

struct ThreadBlockCache {
  std::array<std::array<void*, kThreadCachedPerSize>, kThreadCachedMax / kHostAlignment> blocks{};
  std::array<size_t, kThreadCachedMax / kHostAlignment> count{};
  void free_all() {
    for (size_t c = 0; c < count.size(); ++c) {
      for (size_t i = 0; i < count[c]; ++i) std::free(blocks[c][i]);
      small_bytes -= count[c] * (c + 1) * kHostAlignment;
      count[c] = 0;
    }
  }
  ~ThreadBlockCache();
};
thread_local ThreadBlockCache thread_blocks;
thread_local bool thread_blocks_gone = false;  // trivially destroyed: still readable after thread_blocks

ThreadBlockCache::~ThreadBlockCache() {
  free_all();
  thread_blocks_gone = true;
}

// The thread cache's slot for blocks of `size` bytes, or -1 where it keeps none.
int thread_slot(size_t size) {
  return size > 0 && size <= kThreadCachedMax && !thread_blocks_gone ? static_cast<int>(size / kHostAlignment) - 1 : -1;
}

}  // namespace

void* host_allocate(size_t nbytes) {
  if (nbytes >= kCachedMin) return host_cache().allocate(class_size(nbytes));
  const size_t size = small_size(nbytes);
  if (const int c = thread_slot(size); c >= 0 && thread_blocks.count[c] > 0)
    return thread_blocks.blocks[c][--thread_blocks.count[c]];
  void* p = std::aligned_alloc(kHostAlignment, size);
  if (p) small_bytes += size;
  return p;
}

void host_deallocate(void* ptr, size_t nbytes) {
  if (nbytes >= kCachedMin) return host_cache().release(ptr, class_size(nbytes));
  const size_t size = small_size(nbytes);
  if (const int c = thread_slot(size); c >= 0 && thread_blocks.count[c] < kThreadCachedPerSize) {
    thread_blocks.blocks[c][thread_blocks.count[c]++] = ptr;
    return;
  }
  small_bytes -= size;
  std::free(ptr);
}

size_t host_reserved() { return host_cache().owned() + small_bytes.load(); }

// The calling thread's small blocks too (other threads' go when they end).
void host_empty_cache() {
  host_cache().empty();
  if (!thread_blocks_gone) thread_blocks.free_all();
}

// The machine's free and total physical memory, as sysconf counts them.
void host_memory_info(size_t* free_bytes, size_t* total_bytes) {
  const long page = sysconf(_SC_PAGESIZE), avail = sysconf(_SC_AVPHYS_PAGES), phys = sysconf(_SC_PHYS_PAGES);
  *free_bytes = page > 0 && avail > 0 ? static_cast<size_t>(avail) * static_cast<size_t>(page) : 0;
  *total_bytes = page > 0 && phys > 0 ? static_cast<size_t>(phys) * static_cast<size_t>(page) : 0;
}

}  // namespace ember::backend
