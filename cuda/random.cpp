// eval_cuda of RandomFill (kernel in cuda/random.cu).
#include "cuda/host.h"
#include "tensor/primitives/creation.h"

namespace ember {

void RandomFill::eval_cuda(const std::vector<Tensor>&, std::vector<Tensor>& out) {
  const Tensor& t = out[0];
  cuda::DeviceGuard guard(t.device());
  const int kind = kind_ == Kind::uniform ? 0 : kind_ == Kind::normal ? 1 : 2;
  cuda::launch_random(t.dtype(), kind, counter_, low_, high_, t.raw_data(), t.numel(), cuda::current_stream());
}

}  // namespace ember
