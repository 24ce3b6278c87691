// The exceptions behind EMBER_CUDA_CHECK and EMBER_CUBLAS_CHECK.
#include "cuda/error.h"

#include <string>

namespace ember::cuda {

namespace {
std::string where(const char* call, const char* file, int line) {
  return std::string(call) + " at " + file + ":" + std::to_string(line);
}
}  // namespace

void throw_cuda_error(cudaError_t status, const char* call, const char* file, int line) {
  cudaGetLastError();  // clear a non-sticky error so the next call starts clean
  throw CudaError("CUDA error " + std::string(cudaGetErrorName(status)) + " (" + cudaGetErrorString(status) +
                  ") in " + where(call, file, line));
}

void throw_cublas_error(cublasStatus_t status, const char* call, const char* file, int line) {
  throw CudaError("cuBLAS error " + std::string(cublasGetStatusName(status)) + " (" +
                  cublasGetStatusString(status) + ") in " + where(call, file, line));
}

}  // namespace ember::cuda
