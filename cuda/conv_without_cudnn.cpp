// conv2d's CUDA side in a build without cuDNN (a CUDA toolkit without it, or no CUDA at all): the
// three conv primitives raise NotImplementedError on CUDA tensors, and there is no algorithm cache.
#include "tensor/cuda_settings.h"
#include "nn/primitives/conv.h"

namespace ember {

namespace {
[[noreturn]] void no_cudnn(const char* op) {
  throw NotImplementedError(std::string(op) +
                            " on CUDA: ember was built without cuDNN (meson looks for cudnn.h and libcudnn in the "
                            "CUDA toolkit's directories); run conv2d on the CPU, or install cuDNN and reconfigure");
}
}  // namespace

#define EMBER_NO_CUDNN(P) \
  void P::eval_cuda(const std::vector<Tensor>&, std::vector<Tensor>&) { no_cudnn(name()); }
EMBER_NO_CUDNN(Conv2d)
EMBER_NO_CUDNN(Conv2dBackwardInput)
EMBER_NO_CUDNN(Conv2dBackwardWeight)
#undef EMBER_NO_CUDNN

namespace cuda {
size_t conv_algorithm_cache_size() { return 0; }
void clear_conv_algorithm_cache() {}
}  // namespace cuda

}  // namespace ember
