// Page-locked host memory, the CUDA side of backend::allocate_pinned. A non-blocking copy from or to
// such memory returns before the DMA has run, so a freed block must not be handed out again while a
// copy may still use it: freed blocks wait in a cache keyed by size, every non-blocking copy records
// an event on its stream against the block it uses, and a cached block is reused only once all of
// its events have completed.
#include <algorithm>
#include <bit>
#include <cstdint>
#include <map>
#include <mutex>
#include <vector>

#include "cuda/context.h"
#include "cuda/error.h"
#include "tensor/capture.h"
#include "tensor/storage.h"

namespace ember::backend {

namespace {

// Locking works on whole pages: a smaller block would lock a page all the same.
constexpr size_t kMinBlockSize = 4096;

// Powers of two, so batches of slightly different sizes (a short last batch) share blocks.
size_t block_size(size_t nbytes) { return std::bit_ceil(std::max(nbytes, kMinBlockSize)); }

uintptr_t address(const void* p) { return reinterpret_cast<uintptr_t>(p); }

// The latest copy queued on one stream that uses a block: `done` completes after it.
struct StreamUse {
  int device;
  cudaStream_t stream;  // the legacy default stream is null on every device: (device, stream) is the key
  cudaEvent_t done;
};

struct Block {
  size_t size;
  bool in_use;
  std::vector<StreamUse> uses;
};

class PinnedCache {
 public:
  void* allocate(size_t nbytes) {
    const size_t size = block_size(nbytes);
    {
      std::lock_guard lock(mu_);
      const auto [first, last] = free_by_size_.equal_range(size);
      for (auto it = first; it != last; ++it) {
        Block& block = blocks_.at(it->second);
        if (!copies_finished(block)) continue;
        forget_uses(block);
        block.in_use = true;
        void* p = reinterpret_cast<void*>(it->second);
        free_by_size_.erase(it);
        return p;
      }
    }
    // Outside the lock: cudaHostAlloc maps pages for the driver and is slow; copies need not wait.
    void* p = nullptr;
    EMBER_CUDA_CHECK(cudaHostAlloc(&p, size, cudaHostAllocPortable));  // portable: usable by every GPU
    std::lock_guard lock(mu_);
    blocks_.emplace(address(p), Block{size, true, {}});
    return p;
  }

  // Called from Storage's destructor: no CUDA calls, so it is safe at any time.
  void deallocate(void* p) {
    std::lock_guard lock(mu_);
    Block& block = blocks_.at(address(p));  // only pointers from allocate() come here
    block.in_use = false;
    free_by_size_.emplace(block.size, address(p));
  }

  void record_use(const void* host, int device, cudaStream_t stream) {
    const cuda::DeviceGuard on_device(device);  // the event belongs to the stream's device
    std::lock_guard lock(mu_);
    Block* block = live_block_holding(address(host));
    if (!block) return;  // pageable memory: the copy staged it before returning
    for (StreamUse& use : block->uses)
      if (use.device == device && use.stream == stream) {
        // Recorded again after the new copy, the event also covers the earlier ones on this stream.
        EMBER_CUDA_CHECK(cudaEventRecord(use.done, stream));
        return;
      }
    cudaEvent_t done;
    EMBER_CUDA_CHECK(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));
    block->uses.push_back({device, stream, done});
    EMBER_CUDA_CHECK(cudaEventRecord(done, stream));
  }

 private:
  Block* live_block_holding(uintptr_t p) {
    auto it = blocks_.upper_bound(p);
    if (it == blocks_.begin()) return nullptr;
    --it;
    Block& block = it->second;
    return block.in_use && p < it->first + block.size ? &block : nullptr;
  }

  static bool copies_finished(const Block& block) {
    for (const StreamUse& use : block.uses) {
      const cudaError_t status = cudaEventQuery(use.done);
      if (status == cudaErrorNotReady) {
        cudaGetLastError();  // not a failure: clear it so later checks do not see it
        return false;
      }
      if (status != cudaSuccess) cuda::throw_cuda_error(status, "cudaEventQuery", __FILE__, __LINE__);
    }
    return true;
  }

  static void forget_uses(Block& block) {
    for (const StreamUse& use : block.uses) {
      cuda::DeviceGuard guard(use.device);  // an event belongs to the device it was made on
      EMBER_CUDA_CHECK(cudaEventDestroy(use.done));
    }
    block.uses.clear();
  }

  std::mutex mu_;
  std::map<uintptr_t, Block> blocks_;              // every block, by address, to find the one holding a pointer
  std::multimap<size_t, uintptr_t> free_by_size_;  // the freed ones, ready or waiting for their copies
};

PinnedCache& cache() {
  static PinnedCache* c = new PinnedCache();  // never destroyed: tensors may be freed during static destruction
  return *c;
}

}  // namespace

bool pinned_memory_available() { return cuda_device_count() > 0; }

void* allocate_pinned(size_t nbytes) {
  // cudaHostAlloc and the cache's cudaEventQuery are illegal while a stream is captured: they would
  // invalidate the capture, so a captured step is refused before either runs.
  capture::refuse("pin_memory (cudaHostAlloc, cudaEventQuery) inside a captured step: pin host buffers before it");
  if (!pinned_memory_available())
    throw DeviceError(
        "pin_memory: page-locked host memory needs a CUDA device and none is visible (no GPU, no driver, or "
        "CUDA_VISIBLE_DEVICES hides them)");
  return cache().allocate(nbytes);
}

void deallocate_pinned(void* ptr) { cache().deallocate(ptr); }

void record_pinned_use(const void* host, int device, cudaStream_t stream) { cache().record_use(host, device, stream); }

}  // namespace ember::backend
