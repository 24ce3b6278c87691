#include "tensor/host_sync.h"

#include <atomic>

#include "tensor/capture.h"

namespace ember {

namespace {
std::atomic<int64_t> host_syncs{0};
}  // namespace

int64_t host_sync_count() { return host_syncs.load(std::memory_order_relaxed); }

void count_host_sync(const char* what) {
  capture::check_host_wait(what);
  host_syncs.fetch_add(1, std::memory_order_relaxed);
}

}  // namespace ember
