// Per-device CUDA state, created on first use: properties, the current stream, the cuBLASLt handle,
// the memory pool's setup, and the mapped slot where kernels report out-of-range indices.
#pragma once

#include <cstddef>
#include <cstdint>

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include "tensor/device.h"

namespace ember::cuda {

// Written by a kernel that met an index out of range (mapped host memory, read after a sync).
struct KernelErrorSlot {
  int32_t op;     // 0 while no error; else a KernelOp code
  int32_t pad;
  int64_t index;  // the offending index
  int64_t bound;  // the size it had to stay below
};
enum KernelOp : int32_t { kIndexSelect = 1, kIndexAdd, kGather, kScatterAdd, kCrossEntropy };

struct DeviceContext {
  int device = 0;
  int sm_count = 1;
  int max_threads_per_sm = 2048;
  cublasLtHandle_t cublaslt = nullptr;      // created on first matmul
  KernelErrorSlot* errors_host = nullptr;   // mapped: the host's view
  KernelErrorSlot* errors_device = nullptr; // and the kernels'
};

// DeviceError naming the device unless cuda:`device` is visible.
void check_index(int device);
// The context of `device` (a valid index), created on first use.
DeviceContext& context(int device);
// The device current on this thread (cudaGetDevice).
int current_device();

// The stream ember's kernels on `device` run on, for this thread: the legacy default stream until
// set_current_stream is called.
cudaStream_t current_stream(int device);
inline cudaStream_t current_stream() { return current_stream(current_device()); }
void set_current_stream(int device, cudaStream_t stream);

// The cuBLASLt handle of the current device. It may serve several host threads at once: the stream
// is an argument of each cublasLtMatmul, not state of the handle.
cublasLtHandle_t cublaslt_handle();

// Blocks for a grid-stride loop over n items with `threads` per block on the current device:
// enough to fill every SM, no more.
unsigned grid_blocks(int64_t n, int threads);
// Where kernels on the current device report bad indices.
KernelErrorSlot* kernel_error_slot();

// Waits for the current stream of `device`, then raises what its kernels reported (IndexError).
void synchronize(int device);
// Raises IndexError if a kernel on `device` reported a bad index; call after a synchronisation.
void raise_kernel_errors(int device);

// Makes `device` current for its scope and restores the previous device after. Raises DeviceError
// for an index no GPU answers to.
class DeviceGuard {
 public:
  explicit DeviceGuard(Device device);
  explicit DeviceGuard(int device);
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = -1;
  int device_ = 0;
};

}  // namespace ember::cuda
