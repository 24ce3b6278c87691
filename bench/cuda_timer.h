// Times one call on ember's current CUDA stream with a pair of CUDA events (CUDA builds only): the
// GPU time between what was queued before and after, waited for before it returns.
#pragma once

#include <cuda_runtime_api.h>

#include "cuda/context.h"
#include "cuda/error.h"

namespace bench {

class CudaEventTimer {
 public:
  CudaEventTimer() {
    EMBER_CUDA_CHECK(cudaEventCreate(&start_));
    EMBER_CUDA_CHECK(cudaEventCreate(&stop_));
  }
  ~CudaEventTimer() {
    cudaEventDestroy(start_);
    cudaEventDestroy(stop_);
  }
  CudaEventTimer(const CudaEventTimer&) = delete;
  CudaEventTimer& operator=(const CudaEventTimer&) = delete;

  template <class F>
  double operator()(F&& f) const {
    const cudaStream_t stream = ember::cuda::current_stream();
    EMBER_CUDA_CHECK(cudaEventRecord(start_, stream));
    f();
    EMBER_CUDA_CHECK(cudaEventRecord(stop_, stream));
    EMBER_CUDA_CHECK(cudaEventSynchronize(stop_));
    float ms = 0;
    EMBER_CUDA_CHECK(cudaEventElapsedTime(&ms, start_, stop_));
    return ms * 1e-3;
  }

 private:
  cudaEvent_t start_ = nullptr, stop_ = nullptr;
};

}  // namespace bench
