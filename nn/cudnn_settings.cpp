// The switches of nn/cudnn_settings.h, in every build (a CPU-only program may set them too). The
// algorithm cache they steer lives with the cuDNN code: cuda/cudnn_conv.cpp, or cuda/conv_without_cudnn.cpp.
#include "nn/cudnn_settings.h"

#include <atomic>

namespace ember::cuda {

namespace {
std::atomic<bool> g_benchmark{false};
std::atomic<bool> g_conv_allow_tf32{false};
}  // namespace

void set_benchmark(bool on) { g_benchmark.store(on, std::memory_order_relaxed); }
bool benchmark() { return g_benchmark.load(std::memory_order_relaxed); }

void set_conv_allow_tf32(bool on) { g_conv_allow_tf32.store(on, std::memory_order_relaxed); }
bool conv_allow_tf32() { return g_conv_allow_tf32.load(std::memory_order_relaxed); }

}  // namespace ember::cuda
