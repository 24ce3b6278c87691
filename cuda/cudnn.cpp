// cuDNN handles, status messages and descriptor ownership. Handles live outside DeviceContext so
// that cuda/context.h builds without cuDNN; like the contexts they are kept for the whole process.
#include "cuda/cudnn.h"

#include <array>
#include <string>

#include "cuda/context.h"

namespace ember::cuda {

namespace {

constexpr int kMaxDevices = 64;  // cuda/context.cpp's limit; context() has checked the index

struct Handles {
  std::array<std::once_flag, kMaxDevices> once;
  std::array<cudnnHandle_t, kMaxDevices> handle{};
  std::array<std::mutex, kMaxDevices> in_use;
};

Handles& handles() {
  static Handles* h = new Handles();  // never destroyed: see cuda/context.cpp
  return *h;
}

}  // namespace

void throw_cudnn_error(cudnnStatus_t status, const char* call, const char* file, int line) {
  char detail[512] = {};
  cudnnGetLastErrorString(detail, sizeof(detail));  // cuDNN 9: what the status leaves out
  std::string message = "cuDNN error " + std::string(cudnnGetErrorString(status));
  if (detail[0] != '\0') message += " (" + std::string(detail) + ")";
  throw CudaError(message + " in " + call + " at " + file + ":" + std::to_string(line));
}

CudnnHandle::CudnnHandle() {
  const int device = current_device();
  context(device);
  Handles& h = handles();
  in_use_ = std::unique_lock<std::mutex>(h.in_use[device]);
  std::call_once(h.once[device], [&] { EMBER_CUDNN_CHECK(cudnnCreate(&h.handle[device])); });
  handle_ = h.handle[device];
  EMBER_CUDNN_CHECK(cudnnSetStream(handle_, current_stream(device)));
}

cudnnDataType_t cudnn_data_type(DType dtype, const char* op) {
  switch (dtype) {
    case DType::f32: return CUDNN_DATA_FLOAT;
    case DType::f16: return CUDNN_DATA_HALF;
    case DType::bf16: return CUDNN_DATA_BFLOAT16;
    case DType::f64: return CUDNN_DATA_DOUBLE;
    default: break;
  }
  throw DTypeError(std::string(op) + " on CUDA: cuDNN takes float32, float16, bfloat16 or float64, got " +
                   dtype_name(dtype));
}

void create_descriptor(cudnnTensorDescriptor_t* d) { EMBER_CUDNN_CHECK(cudnnCreateTensorDescriptor(d)); }
void create_descriptor(cudnnFilterDescriptor_t* d) { EMBER_CUDNN_CHECK(cudnnCreateFilterDescriptor(d)); }
void create_descriptor(cudnnConvolutionDescriptor_t* d) { EMBER_CUDNN_CHECK(cudnnCreateConvolutionDescriptor(d)); }
// Destruction runs in destructors, where a failure has no one left to report to.
void destroy_descriptor(cudnnTensorDescriptor_t d) { cudnnDestroyTensorDescriptor(d); }
void destroy_descriptor(cudnnFilterDescriptor_t d) { cudnnDestroyFilterDescriptor(d); }
void destroy_descriptor(cudnnConvolutionDescriptor_t d) { cudnnDestroyConvolutionDescriptor(d); }

}  // namespace ember::cuda
