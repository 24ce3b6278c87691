// cuDNN in the CUDA backend: the status check that turns a failure into CudaError, each device's
// handle, and owners of cuDNN descriptors. Compiled only when meson finds cuDNN.
#pragma once

#include <mutex>

#include <cudnn.h>

#include "tensor/dtype.h"
#include "tensor/error.h"

namespace ember::cuda {

[[noreturn]] void throw_cudnn_error(cudnnStatus_t status, const char* call, const char* file, int line);

}  // namespace ember::cuda

#define EMBER_CUDNN_CHECK(call)                                                    \
  do {                                                                             \
    const cudnnStatus_t ember_status_ = (call);                                    \
    if (ember_status_ != CUDNN_STATUS_SUCCESS)                                     \
      ::ember::cuda::throw_cudnn_error(ember_status_, #call, __FILE__, __LINE__);  \
  } while (0)

namespace ember::cuda {

// The cuDNN handle of the current device (created on its first use), bound to this thread's
// current stream and held by this thread while the object lives: a handle must not serve two
// host threads at once (cuDNN developer guide, "Thread Safety").
class CudnnHandle {
 public:
  CudnnHandle();
  CudnnHandle(const CudnnHandle&) = delete;
  CudnnHandle& operator=(const CudnnHandle&) = delete;
  cudnnHandle_t get() const { return handle_; }

 private:
  std::unique_lock<std::mutex> in_use_;
  cudnnHandle_t handle_ = nullptr;
};

// cuDNN's data type for f32, f16, bf16 and f64; any other dtype raises DTypeError naming `op`.
cudnnDataType_t cudnn_data_type(DType dtype, const char* op);

void create_descriptor(cudnnTensorDescriptor_t* d);
void create_descriptor(cudnnFilterDescriptor_t* d);
void create_descriptor(cudnnConvolutionDescriptor_t* d);
void destroy_descriptor(cudnnTensorDescriptor_t d);
void destroy_descriptor(cudnnFilterDescriptor_t d);
void destroy_descriptor(cudnnConvolutionDescriptor_t d);

// Owns one cuDNN descriptor (a tensor, filter or convolution descriptor) for its lifetime.
template <class T>
class Descriptor {
 public:
  Descriptor() { create_descriptor(&desc_); }
  ~Descriptor() { destroy_descriptor(desc_); }
  Descriptor(const Descriptor&) = delete;
  Descriptor& operator=(const Descriptor&) = delete;
  T get() const { return desc_; }

 private:
  T desc_ = nullptr;
};

using TensorDescriptor = Descriptor<cudnnTensorDescriptor_t>;
using FilterDescriptor = Descriptor<cudnnFilterDescriptor_t>;
using ConvolutionDescriptor = Descriptor<cudnnConvolutionDescriptor_t>;

}  // namespace ember::cuda
