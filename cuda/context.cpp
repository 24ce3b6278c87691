// Per-device CUDA contexts: created once per device under std::call_once and kept for the life of
// the process (destroying handles during static destruction races the driver's own teardown).
#include "cuda/context.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>

#include "cuda/error.h"
#include "cuda/launch_config.h"
#include "tensor/host_sync.h"
#include "tensor/storage.h"

namespace ember::cuda {

namespace {

constexpr int kMaxDevices = 64;

struct Registry {
  std::array<std::once_flag, kMaxDevices> once;
  std::array<std::unique_ptr<DeviceContext>, kMaxDevices> contexts;
  std::array<std::once_flag, kMaxDevices> cublaslt_once;
};

Registry& registry() {
  static Registry* r = new Registry();  // never destroyed: see the note at the top
  return *r;
}

thread_local std::array<cudaStream_t, kMaxDevices> t_streams{};

}  // namespace

void check_index(int device) {
  const int count = backend::cuda_device_count();
  if (device >= 0 && device < count && device < kMaxDevices) return;
  if (count == 0)
    throw DeviceError("cuda:" + std::to_string(device) +
                      " requested but no CUDA device is visible (no GPU, no driver, or CUDA_VISIBLE_DEVICES hides them)");
  throw DeviceError("cuda:" + std::to_string(device) + " requested but only " + std::to_string(count) +
                    " CUDA device(s) are visible");
}

namespace {

std::unique_ptr<DeviceContext> create_context(int device) {
  DeviceGuard guard(device);
  auto ctx = std::make_unique<DeviceContext>();
  ctx->device = device;
  EMBER_CUDA_CHECK(cudaDeviceGetAttribute(&ctx->sm_count, cudaDevAttrMultiProcessorCount, device));
  EMBER_CUDA_CHECK(cudaDeviceGetAttribute(&ctx->max_threads_per_sm, cudaDevAttrMaxThreadsPerMultiProcessor, device));

  // The stream-ordered pool keeps freed memory for reuse instead of returning it at each sync.
  cudaMemPool_t pool;
  EMBER_CUDA_CHECK(cudaDeviceGetDefaultMemPool(&pool, device));
  uint64_t threshold = UINT64_MAX;
  EMBER_CUDA_CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &threshold));

  void* slot = nullptr;
  EMBER_CUDA_CHECK(cudaHostAlloc(&slot, sizeof(KernelErrorSlot), cudaHostAllocMapped | cudaHostAllocPortable));
  std::memset(slot, 0, sizeof(KernelErrorSlot));
  ctx->errors_host = static_cast<KernelErrorSlot*>(slot);
  void* dslot = nullptr;
  EMBER_CUDA_CHECK(cudaHostGetDevicePointer(&dslot, slot, 0));
  ctx->errors_device = static_cast<KernelErrorSlot*>(dslot);
  return ctx;
}

const char* kernel_op_name(int32_t op) {
  switch (op) {
    case kIndexSelect: return "index_select";
    case kIndexAdd: return "index_add";
    case kGather: return "gather";
    case kScatterAdd: return "scatter_add";
    case kCrossEntropy: return "cross_entropy (target)";
    default: return "an indexing kernel";
  }
}

}  // namespace

DeviceContext& context(int device) {
  check_index(device);
  Registry& r = registry();
  std::call_once(r.once[device], [&] { r.contexts[device] = create_context(device); });
  return *r.contexts[device];
}

int current_device() {
  int d = 0;
  const cudaError_t status = cudaGetDevice(&d);
  if (status == cudaSuccess) return d;  // every launch asks: the check below is for failures only
  // Without a GPU cudaGetDevice answers with a driver error; say what is wrong instead.
  if (backend::cuda_device_count() == 0)
    throw DeviceError("cuda::current_device: no CUDA device is visible (no GPU, no driver, or CUDA_VISIBLE_DEVICES "
                      "hides them)");
  throw_cuda_error(status, "cudaGetDevice(&d)", __FILE__, __LINE__);
}

cudaStream_t current_stream(int device) {
  check_index(device);
  return t_streams[device];
}

void set_current_stream(int device, cudaStream_t stream) {
  check_index(device);
  t_streams[device] = stream;
}

cublasLtHandle_t cublaslt_handle() {
  const int device = current_device();
  DeviceContext& ctx = context(device);
  std::call_once(registry().cublaslt_once[device], [&] { EMBER_CUBLAS_CHECK(cublasLtCreate(&ctx.cublaslt)); });
  return ctx.cublaslt;
}

unsigned grid_blocks(int64_t n, int threads) {
  const DeviceContext& ctx = context(current_device());
  return grid_blocks_for(n, threads, ctx.sm_count, ctx.max_threads_per_sm);
}

KernelErrorSlot* kernel_error_slot() { return context(current_device()).errors_device; }

void synchronize(int device) {
  DeviceGuard guard(device);
  count_host_sync("cuda::synchronize");
  EMBER_CUDA_CHECK(cudaStreamSynchronize(current_stream(device)));
  raise_kernel_errors(device);
}

void raise_kernel_errors(int device) {
  volatile KernelErrorSlot* slot = context(device).errors_host;
  const int32_t op = slot->op;
  if (op == 0) return;
  const int64_t index = slot->index, bound = slot->bound;
  slot->index = 0;
  slot->bound = 0;
  slot->op = 0;
  throw IndexError(std::string(kernel_op_name(op)) + " on cuda:" + std::to_string(device) + ": index " +
                   std::to_string(index) + " is out of bounds for a dimension of size " + std::to_string(bound) +
                   " (found by the kernel, reported at the next synchronisation)");
}

namespace {
int cuda_index(Device device) {
  if (!device.is_cuda()) throw DeviceError("expected a CUDA device, got " + device.str());
  return device.index;
}
}  // namespace

DeviceGuard::DeviceGuard(Device device) : DeviceGuard(cuda_index(device)) {}

DeviceGuard::DeviceGuard(int device) : device_(device) {
  check_index(device);
  EMBER_CUDA_CHECK(cudaGetDevice(&previous_));
  if (previous_ != device) EMBER_CUDA_CHECK(cudaSetDevice(device));
}

DeviceGuard::~DeviceGuard() {
  if (previous_ >= 0 && previous_ != device_) cudaSetDevice(previous_);  // best effort: never throws
}

}  // namespace ember::cuda
