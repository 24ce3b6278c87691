// The memory entry points of tensor/storage.h: each request goes to the device's backend, counted
// here per device; a failed allocation empties the backend's cache, retries once, then raises
// OutOfMemoryError with the device's figures.
#include <atomic>
#include <cstdio>
#include <cstring>
#include <string>

#include "tensor/capture.h"
#include "tensor/error.h"
#include "tensor/storage.h"

namespace ember::backend {

// Host memory: cpu/memory.cpp. Allocators return null when there is no memory.
void* host_allocate(size_t nbytes);
void host_deallocate(void* ptr, size_t nbytes);
size_t host_reserved();
void host_empty_cache();
void host_memory_info(size_t* free_bytes, size_t* total_bytes);
// Device memory: cuda/memory.cpp, or cuda/absent.cpp (which raises DeviceError) without CUDA.
void* cuda_allocate(Device device, size_t nbytes);
void cuda_deallocate(Device device, void* ptr);
size_t cuda_reserved(Device device);
void cuda_empty_cache(Device device);
void cuda_memory_info(Device device, size_t* free_bytes, size_t* total_bytes);
void cuda_copy_bytes(void* dst, Device dst_device, const void* src, Device src_device, size_t n, bool non_blocking);

namespace {

struct Counters {
  std::atomic<size_t> allocated{0}, peak{0};
  std::atomic<uint64_t> allocations{0}, frees{0}, retries{0}, ooms{0};
};

// The counters of `device`; DeviceError for a CUDA device that is not visible.
Counters& counters(Device device, const char* what) {
  static Counters table[1 + 128];  // the host, then every CUDA index a Device (int8_t) can hold
  if (device.is_cpu()) return table[0];
  const int count = cuda_device_count();
  if (device.index < 0 || device.index >= count)
    throw DeviceError(std::string(what) + ": " + device.str() + " is not a visible CUDA device (" +
                      std::to_string(count) + " visible" +
                      (count == 0 ? ": ember was built without CUDA, or no GPU or driver is present)" : ")"));
  return table[1 + device.index];
}

// "1.50 GiB": n in the largest binary unit that keeps it at 1 or more.
std::string format_bytes(size_t n) {
  const char* units[] = {"bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  double v = static_cast<double>(n);
  int u = 0;
  while (v >= 1024.0 && u < 6) {
    v /= 1024.0;
    ++u;
  }
  char buf[64];
  std::snprintf(buf, sizeof(buf), u == 0 ? "%.0f %s" : "%.2f %s", v, units[u]);
  return buf;
}

void* backend_allocate(Device device, size_t nbytes) {
  return device.is_cuda() ? cuda_allocate(device, nbytes) : host_allocate(nbytes);
}

[[noreturn]] void out_of_memory(Device device, size_t requested) {
  const MemoryStats s = memory_stats(device);
  size_t free_bytes = 0, total_bytes = 0;
  if (device.is_cuda())
    cuda_memory_info(device, &free_bytes, &total_bytes);
  else
    host_memory_info(&free_bytes, &total_bytes);
  std::string what = "out of memory on " + device.str() + ": tried to allocate " + format_bytes(requested) + " (" +
                     std::to_string(requested) + " bytes); " + format_bytes(s.allocated) + " allocated by tensors (peak " +
                     format_bytes(s.peak) + "), " + format_bytes(s.reserved) + " reserved";
  if (total_bytes > 0) what += "; " + format_bytes(free_bytes) + " free of " + format_bytes(total_bytes);
  throw OutOfMemoryError(what, device, requested, s.allocated, s.reserved, s.peak);
}

}  // namespace

void* allocate(Device device, size_t nbytes) {
  Counters& c = counters(device, "allocate");
  void* p = backend_allocate(device, nbytes);
  // Emptying the cache synchronises the device, which a captured step cannot do: inside one the
  // allocation fails at once.
  if (!p && !capture::active()) {
    ++c.retries;
    empty_cache(device);
    p = backend_allocate(device, nbytes);
  }
  if (!p) {
    ++c.ooms;
    out_of_memory(device, nbytes);
  }
  ++c.allocations;
  const size_t now = c.allocated += nbytes;
  size_t peak = c.peak.load();
  while (now > peak && !c.peak.compare_exchange_weak(peak, now)) {
  }
  return p;
}

void deallocate(Device device, void* ptr, size_t nbytes) {
  if (device.is_cuda())
    cuda_deallocate(device, ptr);
  else
    host_deallocate(ptr, nbytes);
  Counters& c = counters(device, "deallocate");
  c.allocated -= nbytes;
  ++c.frees;
}

void copy_bytes(void* dst, Device dst_device, const void* src, Device src_device, size_t n, bool non_blocking) {
  if (n == 0) return;
  if (dst_device.is_cpu() && src_device.is_cpu()) {
    std::memcpy(dst, src, n);
    return;
  }
  cuda_copy_bytes(dst, dst_device, src, src_device, n, non_blocking);
}

MemoryStats memory_stats(Device device) {
  const Counters& c = counters(device, "memory_stats");
  MemoryStats s;
  s.allocated = c.allocated.load();
  s.peak = c.peak.load();
  s.reserved = device.is_cuda() ? cuda_reserved(device) : host_reserved();
  const uint64_t frees = c.frees.load();  // before the allocations, which then count every freed one
  s.allocations = c.allocations.load();
  s.live_allocations = s.allocations - frees;
  s.num_alloc_retries = c.retries.load();
  s.num_ooms = c.ooms.load();
  return s;
}

size_t max_memory_allocated(Device device) { return counters(device, "max_memory_allocated").peak.load(); }

size_t host_memory_total() {
  size_t free_bytes = 0, total_bytes = 0;
  host_memory_info(&free_bytes, &total_bytes);
  return total_bytes;
}

void reset_peak_memory_stats(Device device) {
  Counters& c = counters(device, "reset_peak_memory_stats");
  c.peak = c.allocated.load();
}

void empty_cache(Device device) {
  counters(device, "empty_cache");
  if (device.is_cuda())
    cuda_empty_cache(device);
  else
    host_empty_cache();
}

}  // namespace ember::backend
