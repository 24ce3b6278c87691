// cuDNN convolution (cuda/cudnn_conv.h): problem, descriptors, algorithm choice and its cache. Each
// direction's cuDNN calls sit in one traits struct (Forward, BackwardData, BackwardFilter); the
// choice, the cache and the run are written once over them.
// These are cuDNN's legacy convolution calls (cudnnGet*Algorithm_v7, cudnnFind*AlgorithmEx,
// cudnnSetConvolutionMathType), deprecated in cuDNN 9 but still built and supported there. Their
// replacement is the graph API (cudnnBackend* descriptors: an operation graph of one convolution,
// engine configurations from the heuristics, an execution plan per shape), which also fuses the bias
// and activation epilogues; the traits structs below are the one place such a move would change.
#include "cuda/cudnn_conv.h"

#include <algorithm>
#include <array>
#include <climits>
#include <compare>
#include <cstdint>
#include <exception>
#include <initializer_list>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "cuda/context.h"
#include "cuda/cudnn.h"
#include "cuda/error.h"
#include "tensor/capture.h"
#include "tensor/cuda_settings.h"
#include "tensor/deterministic.h"
#include "tensor/storage.h"

namespace ember::cuda {

namespace {

// Everything the algorithm choice depends on, hence the cache key. Dims in NCHW order.
struct ConvProblem {
  ConvDirection direction = ConvDirection::forward;
  int device = 0;
  cudnnDataType_t dtype = CUDNN_DATA_FLOAT;
  cudnnMathType_t math = CUDNN_DEFAULT_MATH;  // the most the problem permits
  bool nhwc = false;
  bool benchmark = false;
  bool deterministic = false;  // only algorithms cuDNN marks CUDNN_DETERMINISTIC (tensor/deterministic.h)
  int alignment = 1;  // bytes (up to 16) that every buffer's address is a multiple of
  std::array<int, 4> x{}, w{}, y{};
  std::array<int, 2> padding{}, stride{}, dilation{};
  int groups = 1;
  auto operator<=>(const ConvProblem&) const = default;
};

struct ConvAlgorithm {
  int algo = 0;                               // a cudnnConvolution{Fwd,BwdData,BwdFilter}Algo_t
  cudnnMathType_t math = CUDNN_DEFAULT_MATH;  // the math it runs with
  size_t workspace = 0;                       // bytes
};

struct ConvBuffers {
  void* x;
  void* w;
  void* y;
};

struct ConvDescriptors {
  TensorDescriptor x, y;
  FilterDescriptor w;
  ConvolutionDescriptor conv;

  explicit ConvDescriptors(const ConvProblem& p) {
    const cudnnTensorFormat_t format = p.nhwc ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW;
    EMBER_CUDNN_CHECK(cudnnSetTensor4dDescriptor(x.get(), format, p.dtype, p.x[0], p.x[1], p.x[2], p.x[3]));
    EMBER_CUDNN_CHECK(cudnnSetTensor4dDescriptor(y.get(), format, p.dtype, p.y[0], p.y[1], p.y[2], p.y[3]));
    // An NHWC filter is (K, R, S, C) in memory; its dims are still given as (K, C, R, S).
    EMBER_CUDNN_CHECK(cudnnSetFilter4dDescriptor(w.get(), p.dtype, format, p.w[0], p.w[1], p.w[2], p.w[3]));
    // f16/bf16 accumulate in f32 (cuDNN's PSEUDO_HALF and PSEUDO_BFLOAT16 configurations), f64 in f64.
    const cudnnDataType_t compute = p.dtype == CUDNN_DATA_DOUBLE ? CUDNN_DATA_DOUBLE : CUDNN_DATA_FLOAT;
    EMBER_CUDNN_CHECK(cudnnSetConvolution2dDescriptor(conv.get(), p.padding[0], p.padding[1], p.stride[0], p.stride[1],
                                                      p.dilation[0], p.dilation[1], CUDNN_CROSS_CORRELATION, compute));
    EMBER_CUDNN_CHECK(cudnnSetConvolutionGroupCount(conv.get(), p.groups));
    set_math(p.math);
  }
  void set_math(cudnnMathType_t math) const { EMBER_CUDNN_CHECK(cudnnSetConvolutionMathType(conv.get(), math)); }
};

// ---- the cuDNN calls of each direction

struct Forward {
  using Perf = cudnnConvolutionFwdAlgoPerf_t;
  using Algo = cudnnConvolutionFwdAlgo_t;
  static constexpr int kAlgorithms = CUDNN_CONVOLUTION_FWD_ALGO_COUNT;
  static int max_count(cudnnHandle_t h) {
    int n = 0;
    EMBER_CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithmMaxCount(h, &n));
    return n;
  }
  static int heuristics(cudnnHandle_t h, const ConvDescriptors& d, std::vector<Perf>& perf) {
    int n = 0;
    EMBER_CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithm_v7(h, d.x.get(), d.w.get(), d.conv.get(), d.y.get(),
                                                             static_cast<int>(perf.size()), &n, perf.data()));
    return n;
  }
  static int find(cudnnHandle_t h, const ConvDescriptors& d, const ConvBuffers& b, void* ws, size_t bytes,
                  std::vector<Perf>& perf) {
    int n = 0;
    EMBER_CUDNN_CHECK(cudnnFindConvolutionForwardAlgorithmEx(h, d.x.get(), b.x, d.w.get(), b.w, d.conv.get(), d.y.get(),
                                                             b.y, static_cast<int>(perf.size()), &n, perf.data(), ws,
                                                             bytes));
    return n;
  }
  static cudnnStatus_t workspace(cudnnHandle_t h, const ConvDescriptors& d, int algo, size_t* bytes) {
    return cudnnGetConvolutionForwardWorkspaceSize(h, d.x.get(), d.w.get(), d.conv.get(), d.y.get(), Algo(algo), bytes);
  }
  static void run(cudnnHandle_t h, const ConvDescriptors& d, const ConvBuffers& b, int algo, void* ws, size_t bytes,
                  const void* one, const void* zero) {
    EMBER_CUDNN_CHECK(cudnnConvolutionForward(h, one, d.x.get(), b.x, d.w.get(), b.w, d.conv.get(), Algo(algo), ws,
                                              bytes, zero, d.y.get(), b.y));
  }
};

// x is the input gradient (written), y the output gradient.
struct BackwardData {
  using Perf = cudnnConvolutionBwdDataAlgoPerf_t;
  using Algo = cudnnConvolutionBwdDataAlgo_t;
  static constexpr int kAlgorithms = CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT;
  static int max_count(cudnnHandle_t h) {
    int n = 0;
    EMBER_CUDNN_CHECK(cudnnGetConvolutionBackwardDataAlgorithmMaxCount(h, &n));
    return n;
  }
  static int heuristics(cudnnHandle_t h, const ConvDescriptors& d, std::vector<Perf>& perf) {
    int n = 0;
    EMBER_CUDNN_CHECK(cudnnGetConvolutionBackwardDataAlgorithm_v7(h, d.w.get(), d.y.get(), d.conv.get(), d.x.get(),
                                                                  static_cast<int>(perf.size()), &n, perf.data()));
    return n;
  }
  static int find(cudnnHandle_t h, const ConvDescriptors& d, const ConvBuffers& b, void* ws, size_t bytes,
                  std::vector<Perf>& perf) {
    int n = 0;
    EMBER_CUDNN_CHECK(cudnnFindConvolutionBackwardDataAlgorithmEx(h, d.w.get(), b.w, d.y.get(), b.y, d.conv.get(),
                                                                  d.x.get(), b.x, static_cast<int>(perf.size()), &n,
                                                                  perf.data(), ws, bytes));
    return n;
  }
  static cudnnStatus_t workspace(cudnnHandle_t h, const ConvDescriptors& d, int algo, size_t* bytes) {
    return cudnnGetConvolutionBackwardDataWorkspaceSize(h, d.w.get(), d.y.get(), d.conv.get(), d.x.get(), Algo(algo),
                                                        bytes);
  }
  static void run(cudnnHandle_t h, const ConvDescriptors& d, const ConvBuffers& b, int algo, void* ws, size_t bytes,
                  const void* one, const void* zero) {
    EMBER_CUDNN_CHECK(cudnnConvolutionBackwardData(h, one, d.w.get(), b.w, d.y.get(), b.y, d.conv.get(), Algo(algo), ws,
                                                   bytes, zero, d.x.get(), b.x));
  }
};

// w is the filter gradient (written), y the output gradient.
struct BackwardFilter {
  using Perf = cudnnConvolutionBwdFilterAlgoPerf_t;
  using Algo = cudnnConvolutionBwdFilterAlgo_t;
  static constexpr int kAlgorithms = CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT;
  static int max_count(cudnnHandle_t h) {
    int n = 0;
    EMBER_CUDNN_CHECK(cudnnGetConvolutionBackwardFilterAlgorithmMaxCount(h, &n));
    return n;
  }
  static int heuristics(cudnnHandle_t h, const ConvDescriptors& d, std::vector<Perf>& perf) {
    int n = 0;
    EMBER_CUDNN_CHECK(cudnnGetConvolutionBackwardFilterAlgorithm_v7(h, d.x.get(), d.y.get(), d.conv.get(), d.w.get(),
                                                                    static_cast<int>(perf.size()), &n, perf.data()));
    return n;
  }
  static int find(cudnnHandle_t h, const ConvDescriptors& d, const ConvBuffers& b, void* ws, size_t bytes,
                  std::vector<Perf>& perf) {
    int n = 0;
    EMBER_CUDNN_CHECK(cudnnFindConvolutionBackwardFilterAlgorithmEx(h, d.x.get(), b.x, d.y.get(), b.y, d.conv.get(),
                                                                    d.w.get(), b.w, static_cast<int>(perf.size()), &n,
                                                                    perf.data(), ws, bytes));
    return n;
  }
  static cudnnStatus_t workspace(cudnnHandle_t h, const ConvDescriptors& d, int algo, size_t* bytes) {
    return cudnnGetConvolutionBackwardFilterWorkspaceSize(h, d.x.get(), d.y.get(), d.conv.get(), d.w.get(), Algo(algo),
                                                          bytes);
  }
  static void run(cudnnHandle_t h, const ConvDescriptors& d, const ConvBuffers& b, int algo, void* ws, size_t bytes,
                  const void* one, const void* zero) {
    EMBER_CUDNN_CHECK(cudnnConvolutionBackwardFilter(h, one, d.x.get(), b.x, d.y.get(), b.y, d.conv.get(), Algo(algo),
                                                     ws, bytes, zero, d.w.get(), b.w));
  }
};

// ---- the problem

int as_int(int64_t v, const char* what) {
  if (v > INT_MAX)
    throw NotImplementedError(std::string("conv2d on CUDA: ") + what + " " + std::to_string(v) +
                              " exceeds cuDNN's 32-bit range");
  return static_cast<int>(v);
}

std::array<int, 4> dims(const Tensor& t) {
  if (t.numel() > INT_MAX)
    throw NotImplementedError("conv2d on CUDA: a tensor of shape " + to_string(t.shape()) +
                              " has more than 2^31 - 1 elements, beyond cuDNN's 32-bit indexing; split the batch");
  return {static_cast<int>(t.size(0)), static_cast<int>(t.size(1)), static_cast<int>(t.size(2)),
          static_cast<int>(t.size(3))};
}

int alignment(std::initializer_list<const void*> buffers) {
  int a = 16;
  for (const void* p : buffers)
    while (a > 1 && reinterpret_cast<uintptr_t>(p) % static_cast<uintptr_t>(a) != 0) a /= 2;
  return a;
}

// f16/bf16 may use tensor cores. f32 runs FMA kernels unless TF32 is allowed: from Ampere on,
// CUDNN_DEFAULT_MATH permits TF32 for f32 data and CUDNN_FMA_MATH does not (cuDNN API reference, cudnnMathType_t).
cudnnMathType_t permitted_math(cudnnDataType_t dtype) {
  switch (dtype) {
    case CUDNN_DATA_HALF:
    case CUDNN_DATA_BFLOAT16: return CUDNN_TENSOR_OP_MATH;
    case CUDNN_DATA_FLOAT: return conv_allow_tf32() ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH;
    default: return CUDNN_DEFAULT_MATH;
  }
}

// The math a candidate cuDNN proposed (or timed) runs with: its own, within what the problem
// permits; nullopt when it needs more (tensor ops for an FMA-only problem, or f32 rounded to f16).
std::optional<cudnnMathType_t> run_math(const ConvProblem& p, cudnnMathType_t proposed) {
  if (proposed == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION) return std::nullopt;
  if (p.math == CUDNN_FMA_MATH) {
    if (proposed == CUDNN_TENSOR_OP_MATH) return std::nullopt;
    return CUDNN_FMA_MATH;
  }
  return proposed;
}

std::string describe(const ConvProblem& p) {
  auto four = [](const std::array<int, 4>& a) {
    // std::string("("): "(" + std::string&& trips GCC 12's -Wrestrict false positive (GCC bug 105329).
    return std::string("(") + std::to_string(a[0]) + ", " + std::to_string(a[1]) + ", " + std::to_string(a[2]) + ", " +
           std::to_string(a[3]) + ")";
  };
  const char* direction = p.direction == ConvDirection::forward         ? "forward"
                          : p.direction == ConvDirection::backward_data ? "backward data"
                                                                        : "backward filter";
  return std::string(direction) + ", input " + four(p.x) + ", weight " + four(p.w) + ", output " + four(p.y) +
         ", groups " + std::to_string(p.groups) + (p.nhwc ? ", NHWC" : ", NCHW");
}

// ---- workspace and the cache

// Scratch memory from ember's stream-ordered pool: when the tensor dies, the memory returns to the
// pool in stream order, after the cuDNN call queued on the same stream.
Tensor scratch(size_t bytes, int device) {
  if (bytes == 0) return {};
  const Device d(DeviceType::cuda, device);
  return Tensor::empty({static_cast<int64_t>(bytes)}, TensorOptions(DType::u8).with_device(d));
}

void* data_of(const Tensor& t) { return t.defined() ? t.raw_data() : nullptr; }

// Device memory a search may use now: what the driver has free plus what the pool holds unused.
size_t spare_bytes(int device) {
  size_t free_bytes = 0, total_bytes = 0;
  EMBER_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
  const backend::MemoryStats s = backend::memory_stats(Device(DeviceType::cuda, device));
  return free_bytes + (s.reserved > s.allocated ? s.reserved - s.allocated : 0);
}

struct AlgorithmCache {
  std::mutex mutex;
  std::map<ConvProblem, ConvAlgorithm> choices;
};

AlgorithmCache& algorithm_cache() {
  static AlgorithmCache cache;
  return cache;
}

std::optional<ConvAlgorithm> cached(const ConvProblem& p) {
  AlgorithmCache& c = algorithm_cache();
  std::lock_guard<std::mutex> lock(c.mutex);
  const auto it = c.choices.find(p);
  if (it == c.choices.end()) return std::nullopt;
  return it->second;
}

void remember(const ConvProblem& p, const ConvAlgorithm& a) {
  AlgorithmCache& c = algorithm_cache();
  std::lock_guard<std::mutex> lock(c.mutex);
  c.choices.emplace(p, a);  // keeps another thread's choice if it came first: either serves
}

// ---- the choice

struct Choice {
  ConvAlgorithm algorithm;
  Tensor workspace;
};

// The first of cuDNN's candidates (in its order) whose math the problem permits, that is
// deterministic when the problem asks for it, that needs at most `most` bytes and whose workspace
// the pool can supply now. An out-of-memory error on the way
// is kept in `oom` for when no candidate fits.
template <class Api>
std::optional<Choice> first_fitting(cudnnHandle_t h, const ConvProblem& p, const ConvDescriptors& d,
                                    const std::vector<typename Api::Perf>& perf, int n, size_t most,
                                    std::exception_ptr& oom) {
  for (int i = 0; i < n; ++i) {
    if (perf[i].status != CUDNN_STATUS_SUCCESS || perf[i].memory > most) continue;
    if (p.deterministic && perf[i].determinism != CUDNN_DETERMINISTIC) continue;
    const std::optional<cudnnMathType_t> math = run_math(p, perf[i].mathType);
    if (!math) continue;
    d.set_math(*math);
    const int algo = static_cast<int>(perf[i].algo);
    size_t bytes = 0;
    if (Api::workspace(h, d, algo, &bytes) != CUDNN_STATUS_SUCCESS) continue;
    try {
      return Choice{{algo, *math, bytes}, scratch(bytes, p.device)};
    } catch (const OutOfMemoryError&) {
      oom = std::current_exception();
    }
  }
  return std::nullopt;
}

Choice chosen_or_throw(std::optional<Choice> choice, const std::exception_ptr& oom, const ConvProblem& p) {
  if (choice) return std::move(*choice);
  if (oom) std::rethrow_exception(oom);
  const std::string problem = describe(p);
  if (p.deterministic) alert_not_deterministic("conv2d on CUDA, " + problem);
  throw NotImplementedError("conv2d on CUDA: cuDNN offers no algorithm for this convolution (" + problem + ")");
}

// Default mode: cuDNN's heuristics rank the algorithms without running any.
template <class Api>
Choice propose(cudnnHandle_t h, const ConvProblem& p, const ConvDescriptors& d) {
  std::vector<typename Api::Perf> perf(static_cast<size_t>(Api::max_count(h)));
  const int n = Api::heuristics(h, d, perf);
  std::exception_ptr oom;
  return chosen_or_throw(first_fitting<Api>(h, p, d, perf, n, SIZE_MAX, oom), oom, p);
}

// Benchmark mode: cuDNN times the algorithms on the real buffers (overwriting the direction's
// output, which the chosen algorithm then writes again). It tries only those whose workspace fits
// the one it is given: the largest any algorithm needs, within what the device can spare, halved
// while the pool cannot supply it.
template <class Api>
Choice measure(cudnnHandle_t h, const ConvProblem& p, const ConvDescriptors& d, const ConvBuffers& b) {
  size_t most = 0;
  for (int algo = 0; algo < Api::kAlgorithms; ++algo) {
    size_t bytes = 0;
    if (Api::workspace(h, d, algo, &bytes) == CUDNN_STATUS_SUCCESS) most = std::max(most, bytes);
  }
  most = std::min(most, spare_bytes(p.device));
  Tensor ws;
  while (true) {
    try {
      ws = scratch(most, p.device);
      break;
    } catch (const OutOfMemoryError&) {
      most /= 2;  // scratch(0) allocates nothing, so this ends
    }
  }
  std::vector<typename Api::Perf> perf(static_cast<size_t>(Api::max_count(h)));
  const int n = Api::find(h, d, b, data_of(ws), most, perf);
  ws = Tensor();  // back to the pool before the chosen algorithm's workspace is taken
  std::exception_ptr oom;
  return chosen_or_throw(first_fitting<Api>(h, p, d, perf, n, most, oom), oom, p);
}

template <class Api>
void convolve(cudnnHandle_t h, const ConvProblem& p, const ConvDescriptors& d, const ConvBuffers& b) {
  const std::optional<ConvAlgorithm> hit = cached(p);
  Choice c;
  if (hit)
    c = {*hit, scratch(hit->workspace, p.device)};
  else if (p.benchmark && capture::active())  // the search runs and times kernels and waits for them
    throw CaptureError("captured step: conv2d " + describe(p) +
                       " has no cuDNN algorithm chosen yet, and the benchmark search cannot run inside a CUDA "
                       "graph; the eager warm-up steps choose one for each shape they meet");
  else
    c = p.benchmark ? measure<Api>(h, p, d, b) : propose<Api>(h, p, d);
  d.set_math(c.algorithm.math);
  // Scaling factors are double for double data and float otherwise (cuDNN API reference, "Scaling Parameters").
  const float one_f = 1.0f, zero_f = 0.0f;
  const double one_d = 1.0, zero_d = 0.0;
  const bool f64 = p.dtype == CUDNN_DATA_DOUBLE;
  const void* one = f64 ? static_cast<const void*>(&one_d) : static_cast<const void*>(&one_f);
  const void* zero = f64 ? static_cast<const void*>(&zero_d) : static_cast<const void*>(&zero_f);
  Api::run(h, d, b, c.algorithm.algo, data_of(c.workspace), c.algorithm.workspace, one, zero);
  if (!hit) remember(p, c.algorithm);  // once cuDNN has taken it
}

}  // namespace

void cudnn_convolution(ConvDirection direction, const Tensor& x, const Tensor& w, const Tensor& y, bool nhwc,
                       const Conv2dParams& params) {
  ConvProblem p;
  p.direction = direction;
  p.device = y.device().index;
  p.dtype = cudnn_data_type(y.dtype(), "conv2d");
  p.math = permitted_math(p.dtype);
  p.nhwc = nhwc;
  // Deterministic mode takes the heuristics' choice: a timed one can differ from run to run, and
  // two deterministic algorithms need not give the same bits.
  p.deterministic = is_deterministic();
  p.benchmark = benchmark() && !p.deterministic;
  const ConvBuffers b{x.raw_data(), w.raw_data(), y.raw_data()};
  p.alignment = alignment({b.x, b.w, b.y});
  p.x = dims(x);
  p.w = dims(w);
  p.y = dims(y);
  for (int i = 0; i < 2; ++i) {
    p.padding[i] = as_int(params.padding[i], "padding");
    p.stride[i] = as_int(params.stride[i], "stride");
    p.dilation[i] = as_int(params.dilation[i], "dilation");
  }
  p.groups = as_int(params.groups, "groups");

  const CudnnHandle handle;
  const ConvDescriptors d(p);
  switch (direction) {
    case ConvDirection::forward: return convolve<Forward>(handle.get(), p, d, b);
    case ConvDirection::backward_data: return convolve<BackwardData>(handle.get(), p, d, b);
    case ConvDirection::backward_filter: return convolve<BackwardFilter>(handle.get(), p, d, b);
  }
}

size_t conv_algorithm_cache_size() {
  AlgorithmCache& c = algorithm_cache();
  std::lock_guard<std::mutex> lock(c.mutex);
  return c.choices.size();
}

void clear_conv_algorithm_cache() {
  AlgorithmCache& c = algorithm_cache();
  std::lock_guard<std::mutex> lock(c.mutex);
  c.choices.clear();
}

}  // namespace ember::cuda
