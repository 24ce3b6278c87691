// The CUDA side of conv2d and pooling until the CUDA backend issue brings their kernels (cuDNN):
// compiled in every build, so both the CPU-only and the CUDA builds link, and a CUDA call says why it fails.
#include "nn/primitives/conv.h"
#include "nn/primitives/pooling.h"

namespace ember {

namespace {
[[noreturn]] void pending(const char* op) {
  throw NotImplementedError(std::string(op) + ": the CUDA kernel comes with the CUDA backend issue (cuDNN)");
}
}  // namespace

#define EMBER_PENDING_CUDA(P) \
  void P::eval_cuda(const std::vector<Tensor>&, std::vector<Tensor>&) { pending(name()); }
EMBER_PENDING_CUDA(Conv2d)
EMBER_PENDING_CUDA(Conv2dBackwardInput)
EMBER_PENDING_CUDA(Conv2dBackwardWeight)
EMBER_PENDING_CUDA(MaxPool2d)
EMBER_PENDING_CUDA(AvgPool2d)
EMBER_PENDING_CUDA(AvgPool2dBackward)
#undef EMBER_PENDING_CUDA

}  // namespace ember
