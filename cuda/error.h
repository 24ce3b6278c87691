// Status checks for the CUDA runtime and cuBLAS: a failed call becomes ember::CudaError naming the
// call, its file:line and the library's message. Used by cuda/*.cpp and the launchers in cuda/*.cu.
#pragma once

#include <cublas_api.h>
#include <cuda_runtime_api.h>

#include "tensor/error.h"

namespace ember::cuda {

[[noreturn]] void throw_cuda_error(cudaError_t status, const char* call, const char* file, int line);
[[noreturn]] void throw_cublas_error(cublasStatus_t status, const char* call, const char* file, int line);

}  // namespace ember::cuda

#define EMBER_CUDA_CHECK(call)                                                      \
  do {                                                                              \
    const cudaError_t ember_status_ = (call);                                       \
    if (ember_status_ != cudaSuccess)                                               \
      ::ember::cuda::throw_cuda_error(ember_status_, #call, __FILE__, __LINE__);    \
  } while (0)

#define EMBER_CUBLAS_CHECK(call)                                                    \
  do {                                                                              \
    const cublasStatus_t ember_status_ = (call);                                    \
    if (ember_status_ != CUBLAS_STATUS_SUCCESS)                                     \
      ::ember::cuda::throw_cublas_error(ember_status_, #call, __FILE__, __LINE__);  \
  } while (0)

// After every kernel launch: reports a bad configuration (or an earlier asynchronous fault).
#define EMBER_CUDA_LAUNCH_CHECK() EMBER_CUDA_CHECK(cudaGetLastError())
