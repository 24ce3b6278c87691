// eval_cuda of the normalization and loss primitives until the CUDA backend issue brings their
// kernels: compiled in every build, each raises NotImplementedError naming the op.
#include "nn/primitives/loss.h"
#include "nn/primitives/normalization.h"

namespace ember {

#define EMBER_PENDING_CUDA(P)                                                                              \
  void P::eval_cuda(const std::vector<Tensor>&, std::vector<Tensor>&) {                                  \
    throw NotImplementedError(std::string(name()) + ": the CUDA kernel comes with the CUDA backend issue"); \
  }
EMBER_PENDING_CUDA(BatchNorm)
EMBER_PENDING_CUDA(BatchNormBackward)
EMBER_PENDING_CUDA(LayerNorm)
EMBER_PENDING_CUDA(LayerNormBackward)
EMBER_PENDING_CUDA(CrossEntropy)
EMBER_PENDING_CUDA(CrossEntropyBackward)
#undef EMBER_PENDING_CUDA

}  // namespace ember
