// Times one call on ember's current CUDA stream with a pair of CUDA events (CUDA builds only): the
// GPU time between what was queued before and after, waited for before it returns.
#pragma once

#include "cuda/context.h"
#include "tensor/cuda_stream.h"

namespace bench {

class CudaEventTimer {
 public:
  template <class F>
  double operator()(F&& f) const {
    const int device = ember::cuda::current_device();
    start_.record(device);
    f();
    stop_.record(device);
    stop_.synchronize();
    return start_.elapsed_ms(stop_) * 1e-3;
  }

 private:
  mutable ember::cuda::Event start_{true}, stop_{true};  // created on the device of their first record
};

}  // namespace bench
