// The CUDA side of a build without CUDA: no devices, and every CUDA entry point raises a
// DeviceError that says so. Linked instead of cuda/*.cu when the toolkit is absent or disabled.
#include "nn/primitives/attention.h"
#include "nn/primitives/loss.h"
#include "nn/primitives/normalization.h"
#include "nn/primitives/pooling.h"
#include "optim/amp/primitives.h"
#include "optim/primitives/steps.h"
#include "optim/primitives/total_norm.h"
#include "tensor/cuda_settings.h"
#include "tensor/cuda_stream.h"
#include "tensor/device_graph.h"
#include "tensor/nvtx.h"
#include "tensor/primitives/all.h"

namespace ember {

// Ranges reach listeners only: no profiler timeline without CUDA.
void nvtx::detail::push(const char*) {}
void nvtx::detail::pop() {}

namespace {
[[noreturn]] void no_cuda(const char* what) {
  throw DeviceError(std::string(what) + ": ember was built without CUDA (configure with -Dcuda=enabled on a "
                    "machine with the CUDA toolkit)");
}
}  // namespace

namespace backend {
int cuda_device_count() { return 0; }
void* cuda_allocate(Device, size_t) { no_cuda("allocate"); }
void cuda_deallocate(Device, void*) {}
void* cuda_graph_capture(Device, const std::function<void()>&) { no_cuda("DeviceGraph"); }
void cuda_graph_replay(void*, Device) { no_cuda("DeviceGraph::replay"); }
void cuda_graph_destroy(void*) {}
void cuda_copy_bytes(void*, Device, const void*, Device, size_t, bool) { no_cuda("copy"); }
size_t cuda_reserved(Device) { no_cuda("memory_stats"); }
void cuda_empty_cache(Device) { no_cuda("empty_cache"); }
void cuda_memory_info(Device, size_t*, size_t*) { no_cuda("memory_stats"); }
void* allocate_pinned(size_t) { no_cuda("pin_memory"); }
void deallocate_pinned(void*) {}
bool pinned_memory_available() { return false; }
}  // namespace backend

namespace cuda {
size_t matmul_plan_cache_size() { return 0; }
}  // namespace cuda

namespace cuda {
Stream::Stream(int device) : device_(device) { no_cuda("cuda::Stream"); }
Stream::~Stream() = default;
void Stream::synchronize() const {}
void Stream::wait(const Event&) const {}
void set_device(int) { no_cuda("cuda::set_device"); }
int current_device() { no_cuda("cuda::current_device"); }
Event::Event(bool enable_timing) : timing_(enable_timing) { no_cuda("cuda::Event"); }
Event::~Event() = default;
void Event::record(const Stream&) {}
void Event::record(int) {}
bool Event::query() const { return true; }
void Event::synchronize() const {}
void Event::wait(int) const {}
double Event::elapsed_ms(const Event&) const { return 0; }
StreamGuard::StreamGuard(const Stream& stream) : device_(stream.device()), previous_(nullptr) {}
StreamGuard::~StreamGuard() = default;
}  // namespace cuda

#define EMBER_NO_CUDA(P) \
  void P::eval_cuda(const std::vector<Tensor>&, std::vector<Tensor>&) { no_cuda(name()); }
EMBER_KERNEL_PRIMITIVES(EMBER_NO_CUDA)
// nn and optim primitives with CUDA kernels (conv2d's are in cuda/conv_without_cudnn.cpp, which every build
// without cuDNN links).
EMBER_NO_CUDA(MaxPool2d)
EMBER_NO_CUDA(AvgPool2d)
EMBER_NO_CUDA(AvgPool2dBackward)
EMBER_NO_CUDA(BatchNorm)
EMBER_NO_CUDA(BatchNormBackward)
EMBER_NO_CUDA(LayerNorm)
EMBER_NO_CUDA(LayerNormBackward)
EMBER_NO_CUDA(CrossEntropy)
EMBER_NO_CUDA(CrossEntropyBackward)
EMBER_NO_CUDA(SGDStep)
EMBER_NO_CUDA(AdamStep)
EMBER_NO_CUDA(LAMBStep)
EMBER_NO_CUDA(TotalNorm)
EMBER_NO_CUDA(AmpUnscale)
EMBER_NO_CUDA(FirstNonFinite)
EMBER_NO_CUDA(MasterCopyBack)
EMBER_NO_CUDA(ScaledDotProductAttention)
EMBER_NO_CUDA(ScaledDotProductAttentionBackward)
bool cuda_attention_fused(DType, int64_t, int64_t, Device) { return false; }
EMBER_NO_CUDA(GradScaleUpdate)
EMBER_NO_CUDA(LossScaleUpdate)
#undef EMBER_NO_CUDA

template <class Op>
void Unary<Op>::eval_cuda(const std::vector<Tensor>&, std::vector<Tensor>&) {
  no_cuda(name());
}
template <class Op>
void Binary<Op>::eval_cuda(const std::vector<Tensor>&, std::vector<Tensor>&) {
  no_cuda(name());
}
#define EMBER_NO_CUDA_UNARY(F, ...) template void Unary<ew::F>::eval_cuda(const std::vector<Tensor>&, std::vector<Tensor>&);
EMBER_UNARY_OPS(EMBER_NO_CUDA_UNARY)
#undef EMBER_NO_CUDA_UNARY
#define EMBER_NO_CUDA_BINARY(F, ...) template void Binary<ew::F>::eval_cuda(const std::vector<Tensor>&, std::vector<Tensor>&);
EMBER_BINARY_OPS(EMBER_NO_CUDA_BINARY)
#undef EMBER_NO_CUDA_BINARY

}  // namespace ember
