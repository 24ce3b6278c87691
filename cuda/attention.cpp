// The fused attention primitives' CUDA side, in every build until the GPU issue brings their
// kernels: scaled_dot_product_attention composes matmul and softmax on CUDA, so only a direct
// run of the primitives reaches these.
#include "nn/primitives/attention.h"

namespace ember {

namespace {
[[noreturn]] void not_fused(const char* op) {
  throw NotImplementedError(std::string(op) +
                            " on CUDA: no fused kernel yet; scaled_dot_product_attention composes matmul and "
                            "softmax there");
}
}  // namespace

void ScaledDotProductAttention::eval_cuda(const std::vector<Tensor>&, std::vector<Tensor>&) { not_fused(name()); }
void ScaledDotProductAttentionBackward::eval_cuda(const std::vector<Tensor>&, std::vector<Tensor>&) {
  not_fused(name());
}

}  // namespace ember
