// The GPU half of bench_conv. ember runs in benchmark mode (cuda::set_benchmark): its first call of
// each problem times cuDNN's algorithms. The raw side searches the same way, on its own cuDNN handle
// and ember's stream: cudnnFind*AlgorithmEx with the largest workspace any algorithm asks for (within
// what the device has free), then the fastest candidate whose math the precision permits (tensor ops
// for f16/bf16; for f32 FMA only, or any math with TF32 allowed; never a down-conversion to f16).
#include "bench/conv_cuda.h"

#include <algorithm>
#include <vector>

#include <cudnn.h>

#include "autograd/grad_mode.h"
#include "bench/compare.h"
#include "bench/conv_case.h"
#include "bench/cuda_timer.h"
#include "bench/gpu_peak.h"
#include "cuda/context.h"
#include "cuda/cudnn.h"
#include "cuda/error.h"
#include "tensor/cuda_settings.h"
#include "tensor/ops.h"
#include "tensor/storage.h"

namespace bench {

namespace {

using ember::Tensor;
using ember::cuda::ConvolutionDescriptor;
using ember::cuda::FilterDescriptor;
using ember::cuda::TensorDescriptor;

cudnnDataType_t cudnn_type(Precision p) {
  switch (p) {
    case Precision::f16: return CUDNN_DATA_HALF;
    case Precision::bf16: return CUDNN_DATA_BFLOAT16;
    default: return CUDNN_DATA_FLOAT;
  }
}

cudnnMathType_t permitted_math(Precision p) {
  switch (p) {
    case Precision::f32: return CUDNN_FMA_MATH;
    case Precision::tf32: return CUDNN_DEFAULT_MATH;
    default: return CUDNN_TENSOR_OP_MATH;
  }
}

// One convolution pass through cuDNN: own handle, descriptors, the searched algorithm and its workspace.
class RawConv {
 public:
  // x, w, y: the case's input, filter and output (gradient) buffers; the pass writes one of them.
  RawConv(const ConvCase& c, Precision p, void* x, void* w, void* y) : c_(c), x_ptr_(x), w_ptr_(w), y_ptr_(y) {
    EMBER_CUDNN_CHECK(cudnnCreate(&handle_));
    EMBER_CUDNN_CHECK(cudnnSetStream(handle_, ember::cuda::current_stream()));
    const cudnnTensorFormat_t format = c.nhwc ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW;
    const cudnnDataType_t type = cudnn_type(p);
    auto i = [](int64_t v) { return static_cast<int>(v); };
    EMBER_CUDNN_CHECK(cudnnSetTensor4dDescriptor(x_.get(), format, type, i(c.n), i(c.c), i(c.h), i(c.w)));
    EMBER_CUDNN_CHECK(cudnnSetTensor4dDescriptor(y_.get(), format, type, i(c.n), i(c.o), i(c.out_h()), i(c.out_w())));
    EMBER_CUDNN_CHECK(cudnnSetFilter4dDescriptor(w_.get(), type, format, i(c.o), i(c.c), i(c.k), i(c.k)));
    EMBER_CUDNN_CHECK(cudnnSetConvolution2dDescriptor(conv_.get(), i(c.pad), i(c.pad), i(c.stride), i(c.stride), 1, 1,
                                                      CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
    EMBER_CUDNN_CHECK(cudnnSetConvolutionMathType(conv_.get(), permitted_math(p)));
    search(p);
  }
  ~RawConv() { cudnnDestroy(handle_); }
  RawConv(const RawConv&) = delete;
  RawConv& operator=(const RawConv&) = delete;

  void run() const {
    const float one = 1.0f, zero = 0.0f;
    void* ws = workspace_.defined() ? workspace_.raw_data() : nullptr;
    switch (c_.pass) {
      case ConvPass::fwd:
        EMBER_CUDNN_CHECK(cudnnConvolutionForward(handle_, &one, x_.get(), x_ptr_, w_.get(), w_ptr_, conv_.get(),
                                                  cudnnConvolutionFwdAlgo_t(algo_), ws, bytes_, &zero, y_.get(), y_ptr_));
        break;
      case ConvPass::bwd_data:
        EMBER_CUDNN_CHECK(cudnnConvolutionBackwardData(handle_, &one, w_.get(), w_ptr_, y_.get(), y_ptr_, conv_.get(),
                                                       cudnnConvolutionBwdDataAlgo_t(algo_), ws, bytes_, &zero,
                                                       x_.get(), x_ptr_));
        break;
      case ConvPass::bwd_filter:
        EMBER_CUDNN_CHECK(cudnnConvolutionBackwardFilter(handle_, &one, x_.get(), x_ptr_, y_.get(), y_ptr_,
                                                         conv_.get(), cudnnConvolutionBwdFilterAlgo_t(algo_), ws,
                                                         bytes_, &zero, w_.get(), w_ptr_));
        break;
    }
  }

 private:
  size_t workspace_size(int algo) const {
    size_t bytes = 0;
    cudnnStatus_t s = CUDNN_STATUS_NOT_SUPPORTED;
    switch (c_.pass) {
      case ConvPass::fwd:
        s = cudnnGetConvolutionForwardWorkspaceSize(handle_, x_.get(), w_.get(), conv_.get(), y_.get(),
                                                    cudnnConvolutionFwdAlgo_t(algo), &bytes);
        break;
      case ConvPass::bwd_data:
        s = cudnnGetConvolutionBackwardDataWorkspaceSize(handle_, w_.get(), y_.get(), conv_.get(), x_.get(),
                                                         cudnnConvolutionBwdDataAlgo_t(algo), &bytes);
        break;
      case ConvPass::bwd_filter:
        s = cudnnGetConvolutionBackwardFilterWorkspaceSize(handle_, x_.get(), y_.get(), conv_.get(), w_.get(),
                                                           cudnnConvolutionBwdFilterAlgo_t(algo), &bytes);
        break;
    }
    return s == CUDNN_STATUS_SUCCESS ? bytes : 0;
  }

  static Tensor device_bytes(size_t n) {
    if (n == 0) return {};
    return Tensor::empty({static_cast<int64_t>(n)},
                         ember::TensorOptions(ember::DType::u8).with_device(ember::Device(ember::DeviceType::cuda, 0)));
  }

  // cuDNN times every algorithm on the real buffers; the first usable one in its (fastest-first) order wins.
  template <class Perf>
  bool pick(const std::vector<Perf>& perf, int found, cudnnMathType_t permitted, size_t most) {
    for (int i = 0; i < found; ++i) {
      const Perf& r = perf[i];
      if (r.status != CUDNN_STATUS_SUCCESS || r.memory > most) continue;
      if (r.mathType == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION) continue;
      if (permitted == CUDNN_FMA_MATH && r.mathType == CUDNN_TENSOR_OP_MATH) continue;
      algo_ = static_cast<int>(r.algo);
      EMBER_CUDNN_CHECK(
          cudnnSetConvolutionMathType(conv_.get(), permitted == CUDNN_FMA_MATH ? CUDNN_FMA_MATH : r.mathType));
      return true;
    }
    return false;
  }

  int algorithm_count() const {
    switch (c_.pass) {
      case ConvPass::fwd: return CUDNN_CONVOLUTION_FWD_ALGO_COUNT;
      case ConvPass::bwd_data: return CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT;
      case ConvPass::bwd_filter: return CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT;
    }
    return 0;
  }

  void search(Precision p) {
    const cudnnMathType_t permitted = permitted_math(p);
    const int count = algorithm_count();
    size_t most = 0;
    for (int a = 0; a < count; ++a) most = std::max(most, workspace_size(a));
    size_t free_bytes = 0, total_bytes = 0;
    EMBER_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
    most = std::min(most, free_bytes / 2);
    Tensor scratch = device_bytes(most);
    void* ws = scratch.defined() ? scratch.raw_data() : nullptr;
    int found = 0;
    bool ok = false;
    switch (c_.pass) {
      case ConvPass::fwd: {
        std::vector<cudnnConvolutionFwdAlgoPerf_t> perf(count);
        EMBER_CUDNN_CHECK(cudnnFindConvolutionForwardAlgorithmEx(handle_, x_.get(), x_ptr_, w_.get(), w_ptr_,
                                                                 conv_.get(), y_.get(), y_ptr_, count, &found,
                                                                 perf.data(), ws, most));
        ok = pick(perf, found, permitted, most);
        break;
      }
      case ConvPass::bwd_data: {
        std::vector<cudnnConvolutionBwdDataAlgoPerf_t> perf(count);
        EMBER_CUDNN_CHECK(cudnnFindConvolutionBackwardDataAlgorithmEx(handle_, w_.get(), w_ptr_, y_.get(), y_ptr_,
                                                                      conv_.get(), x_.get(), x_ptr_, count, &found,
                                                                      perf.data(), ws, most));
        ok = pick(perf, found, permitted, most);
        break;
      }
      case ConvPass::bwd_filter: {
        std::vector<cudnnConvolutionBwdFilterAlgoPerf_t> perf(count);
        EMBER_CUDNN_CHECK(cudnnFindConvolutionBackwardFilterAlgorithmEx(handle_, x_.get(), x_ptr_, y_.get(), y_ptr_,
                                                                        conv_.get(), w_.get(), w_ptr_, count,
                                                                        &found, perf.data(), ws, most));
        ok = pick(perf, found, permitted, most);
        break;
      }
    }
    if (!ok) throw ember::NotImplementedError("cuDNN offers no algorithm for " + conv_case_name("cuda", p, c_));
    scratch = Tensor();
    bytes_ = workspace_size(algo_);
    workspace_ = device_bytes(bytes_);
  }

  ConvCase c_;
  void *x_ptr_, *w_ptr_, *y_ptr_;
  cudnnHandle_t handle_ = nullptr;
  TensorDescriptor x_, y_;
  FilterDescriptor w_;
  ConvolutionDescriptor conv_;
  int algo_ = 0;
  size_t bytes_ = 0;
  Tensor workspace_;
};

void cuda_conv(benchmark::State& state, const ConvCase& c, Precision p) {
  ember::NoGradGuard no_grad;
  set_ember_precision(p);
  ember::cuda::set_benchmark(true);
  const ember::TensorOptions opts =
      ember::TensorOptions(precision_dtype(p)).with_device(ember::Device(ember::DeviceType::cuda, 0));
  const ConvTensors t = make_conv_tensors(c, opts);
  // The raw pass reads ember's operands and writes a buffer of its own, in the case's layout.
  const ConvTensors raw_out = make_conv_tensors(c, opts);
  void* x = c.pass == ConvPass::bwd_data ? raw_out.x.raw_data() : t.x.raw_data();
  void* w = c.pass == ConvPass::bwd_filter ? raw_out.w.raw_data() : t.w.raw_data();
  void* y = c.pass == ConvPass::fwd ? raw_out.dy.raw_data() : t.dy.raw_data();
  const RawConv raw(c, p, x, w, y);
  const CudaEventTimer timer;
  const Timing timing = time_against(
      state, timer, PlainPhase{}, [&] { ember_conv_pass(c, t); }, [&] { raw.run(); });
  report_flop_case(state, c.flop(), timing, c.source);
  set_pct_peak(state, p);
}

}  // namespace

void register_cuda_conv_cases(const std::vector<int64_t>& batches) {
  if (ember::backend::cuda_device_count() == 0) return;
  benchmark::AddCustomContext("gpu", cuda_device_name());
  for (Precision p : all_precisions())
    for (int64_t n : batches)
      for (const ConvCase& c : resnet50_conv_cases(n, /*both_layouts=*/true))
        register_case(conv_case_name("cuda", p, c), [c, p](benchmark::State& s) { cuda_conv(s, c, p); });
}

}  // namespace bench
