// The switches of tensor/cuda_settings.h, in every build. The caches they steer live with the
// library code: cuda/cublaslt.cpp and cuda/cudnn_conv.cpp, or their stand-ins in cuda/absent.cpp and
// cuda/conv_without_cudnn.cpp.
#include "tensor/cuda_settings.h"

#include <atomic>

namespace ember::cuda {

namespace {
std::atomic<bool> g_matmul_allow_tf32{false};
std::atomic<bool> g_benchmark{false};
std::atomic<bool> g_conv_allow_tf32{false};
}  // namespace

void set_matmul_allow_tf32(bool on) { g_matmul_allow_tf32.store(on, std::memory_order_relaxed); }
bool matmul_allow_tf32() { return g_matmul_allow_tf32.load(std::memory_order_relaxed); }

void set_benchmark(bool on) { g_benchmark.store(on, std::memory_order_relaxed); }
bool benchmark() { return g_benchmark.load(std::memory_order_relaxed); }

void set_conv_allow_tf32(bool on) { g_conv_allow_tf32.store(on, std::memory_order_relaxed); }
bool conv_allow_tf32() { return g_conv_allow_tf32.load(std::memory_order_relaxed); }

}  // namespace ember::cuda
