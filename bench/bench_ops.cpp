// bench_ops: memory-bound ops and the host cost of dispatch.
//   ops/<device>/<dtype>/<op>/<numel>: elementwise (add, mul, mul_scalar, relu, exp, log, tanh, sigmoid, silu,
//     gelu, gelu_tanh), reduction (sum), softmax, log_softmax, layer_norm and cross_entropy over rows of 1024 (1000 classes for cross_entropy), and
//     training-mode batch_norm over (N, 64, 32, 32) images (f32 statistics and affine parameters).
//     GBps counts the bytes the op must read and write once; copy_GBps is the device copy of the
//     same traffic in the same case (memcpy on the CPU, cudaMemcpyAsync on a GPU), ratio = GBps / copy_GBps.
//   dispatch/<device>/f32/add/<nograd|grad>: host microseconds (us) per call of add on two
//     1-element tensors, without autograd and while recording for backward.
//   attention/<cpu/f32|cuda/f16|cuda/bf16>/<B>x<heads>x<L>x<E>/<fwd|fwdbwd>: scaled_dot_product_attention
//     (L = S, Ev = E), the fused primitive against its composition (raw_*:
//     scaled_dot_product_attention_math), forward alone or forward and backward; GFLOPS counts the
//     products' 4 B h L S E multiply-adds forward and 8 B h L S E backward (no recomputation),
//     ratio = composition time / fused time.
// Run: build/bench/bench_ops --benchmark_filter=ops/cpu/
#include <benchmark/benchmark.h>

#include <cstring>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "autograd/grad_mode.h"
#include "bench/compare.h"
#include "nn/attention.h"
#include "nn/loss.h"
#include "nn/normalization.h"
#include "tensor/ops.h"
#include "tensor/sort.h"
#include "tensor/storage.h"
#if defined(EMBER_BENCH_CUDA)
#include "bench/cuda_timer.h"
#include "cuda/context.h"
#include "cuda/error.h"
#endif

namespace {

using ember::Tensor;

constexpr int64_t kBatchNormChannels = 64;

// An op over inputs made for numel elements, and the bytes it must move (reads + writes).
struct MemoryOp {
  const char* name;
  int64_t columns;  // 0: a flat tensor; else rows of this many elements (batch_norm: C*H*W per image)
  int inputs;       // tensors of numel elements it reads
  int outputs;      // of numel elements it writes (0: a reduction)
  std::function<Tensor(const std::vector<Tensor>&)> run;
};

const std::vector<MemoryOp>& memory_ops() {
  static const std::vector<MemoryOp> ops = {
      {"add", 0, 2, 1, [](const auto& t) { return ember::add(t[0], t[1]); }},
      {"mul", 0, 2, 1, [](const auto& t) { return ember::mul(t[0], t[1]); }},
      // 0.1 is no 16-bit value: f16/bf16 take the kernel with an f32 scalar operand (opmath)
      {"mul_scalar", 0, 1, 1, [](const auto& t) { return ember::mul(t[0], 0.1); }},
      {"relu", 0, 1, 1, [](const auto& t) { return ember::relu(t[0]); }},
      {"exp", 0, 1, 1, [](const auto& t) { return ember::exp(t[0]); }},
      {"log", 0, 1, 1, [](const auto& t) { return ember::log(t[0]); }},  // of |randn| (operands())
      {"tanh", 0, 1, 1, [](const auto& t) { return ember::tanh(t[0]); }},
      {"sigmoid", 0, 1, 1, [](const auto& t) { return ember::sigmoid(t[0]); }},
      {"silu", 0, 1, 1, [](const auto& t) { return ember::silu(t[0]); }},
      {"gelu", 0, 1, 1, [](const auto& t) { return ember::gelu(t[0]); }},
      {"gelu_tanh", 0, 1, 1, [](const auto& t) { return ember::gelu(t[0], true); }},
      {"sum", 0, 1, 0, [](const auto& t) { return ember::sum(t[0]); }},
      {"softmax", 1024, 1, 1, [](const auto& t) { return ember::softmax(t[0], 1); }},
      {"log_softmax", 1024, 1, 1, [](const auto& t) { return ember::log_softmax(t[0], 1); }},
      {"layer_norm", 1024, 1, 1, [](const auto& t) { return ember::layer_norm(t[0], {1024}, t[1], t[2]); }},
      {"cross_entropy", 1000, 1, 0, [](const auto& t) { return ember::cross_entropy(t[0], t[1]); }},
      // A classifier's top-5 over 1000 classes (the bytes read only: its outputs are small), and a full
      // sort of rows of 1024 (the values and int64 indices written: in f32, three elements' bytes)
      {"topk5", 1000, 1, 0, [](const auto& t) { return ember::topk(t[0], 5, 1).values; }},
      {"sort", 1024, 1, 3, [](const auto& t) { return ember::sort(t[0], 1).values; }},
      {"batch_norm", kBatchNormChannels * 32 * 32, 1, 1,
       [](const auto& t) { return ember::batch_norm(t[0], t[1], t[2], t[3], t[4], /*training=*/true); }},
  };
  return ops;
}

// The op's operands: numel-element inputs (rows x columns when it has columns), plus layer_norm's
// weight and bias, cross_entropy's targets and batch_norm's running statistics, weight and bias.
std::vector<Tensor> operands(const MemoryOp& op, int64_t numel, ember::TensorOptions opts) {
  const bool images = std::string(op.name) == "batch_norm";
  const ember::Shape shape = images        ? ember::Shape{numel / op.columns, kBatchNormChannels, 32, 32}
                             : op.columns ? ember::Shape{numel / op.columns, op.columns}
                                          : ember::Shape{numel};
  std::vector<Tensor> t;
  for (int i = 0; i < op.inputs; ++i) t.push_back(ember::randn(shape, opts));
  if (std::string(op.name) == "log") t[0] = ember::abs(t[0]);  // NaNs take slow paths in some libraries
  if (images) {
    const ember::TensorOptions f32 = opts.with_dtype(ember::DType::f32);
    for (double fill : {0.0, 1.0, 1.0, 0.0}) t.push_back(ember::full({kBatchNormChannels}, fill, f32));
  }
  if (std::string(op.name) == "layer_norm") {
    t.push_back(ember::ones({op.columns}, opts));
    t.push_back(ember::zeros({op.columns}, opts));
  }
  if (std::string(op.name) == "cross_entropy")
    t.push_back(ember::randint(0, op.columns, {shape[0]}, ember::TensorOptions(ember::DType::i64).with_device(opts.device)));
  return t;
}

// Times the op, then a copy of the same traffic (half its bytes read, half written) with `copy`.
template <class Time>
void memory_case(benchmark::State& state, const MemoryOp& op, int64_t numel, ember::TensorOptions opts,
                 const Time& time, const std::function<void(void*, const void*, size_t)>& copy) {
  ember::NoGradGuard no_grad;
  const std::vector<Tensor> in = operands(op, numel, opts);
  const double bytes = static_cast<double>((op.inputs + op.outputs) * numel * ember::dtype_size(opts.dtype));
  const size_t half = static_cast<size_t>(bytes / 2);
  const Tensor src = ember::empty({static_cast<int64_t>(half)}, opts.with_dtype(ember::DType::u8));
  const Tensor dst = ember::empty({static_cast<int64_t>(half)}, opts.with_dtype(ember::DType::u8));
  const bench::Timing t = bench::time_against(
      state, time, bench::PlainPhase{}, [&] { benchmark::DoNotOptimize(op.run(in)); },
      [&] { copy(dst.raw_data(), src.raw_data(), half); });
  state.counters["GBps"] = bytes / 1e9 / t.ember_s;
  state.counters["copy_GBps"] = bytes / 1e9 / t.raw_s;
  state.counters["ratio"] = t.raw_s / t.ember_s;
}

// Waits for the work queued on a GPU; nothing to wait for on the CPU.
void wait_for(ember::Device device) {
#if defined(EMBER_BENCH_CUDA)
  if (device.is_cuda()) ember::cuda::synchronize(device.index);
#else
  (void)device;
#endif
}

// Host microseconds per add of two 1-element tensors on `device`, in batches of 1000 calls (a GPU
// is waited for after each batch, outside the timed part).
void dispatch_case(benchmark::State& state, ember::Device device, bool record) {
  constexpr int kCalls = 1000;
  Tensor x = ember::ones({1}, device), y = ember::ones({1}, device);
  if (record) {
    x.requires_grad_();
    y.requires_grad_();
  }
  std::optional<ember::NoGradGuard> no_grad;
  if (!record) no_grad.emplace();
  double total = 0;
  for (auto _ : state) {
    const double s = bench::WallTimer{}([&] {
      for (int i = 0; i < kCalls; ++i) benchmark::DoNotOptimize(ember::add(x, y));
    });
    wait_for(device);
    state.SetIterationTime(s);
    total += s;
  }
  state.counters["us"] = total * 1e6 / (static_cast<double>(state.iterations()) * kCalls);
}

// The fused attention against its composition on one (B, heads, L, E) shape, timed by `time`.
template <class Time>
void attention_case(benchmark::State& state, const ember::Shape& shape, bool backward, ember::TensorOptions opts,
                    const Time& time) {
  opts = opts.with_requires_grad(backward);
  const Tensor q = ember::randn(shape, opts), k = ember::randn(shape, opts), v = ember::randn(shape, opts),
               g = ember::randn(shape, opts.with_requires_grad(false));
  std::optional<ember::NoGradGuard> no_grad;
  if (!backward) no_grad.emplace();
  auto run = [&](const std::function<Tensor()>& attention) {
    const Tensor out = attention();
    if (backward) {
      for (const Tensor& t : {q, k, v}) t.set_grad({});
      out.backward(g);
    }
    benchmark::DoNotOptimize(out);
  };
  const bench::Timing t = bench::time_against(
      state, time, bench::PlainPhase{}, [&] { run([&] { return ember::scaled_dot_product_attention(q, k, v); }); },
      [&] { run([&] { return ember::scaled_dot_product_attention_math(q, k, v).output; }); });
  const double macs = static_cast<double>(shape[0] * shape[1] * shape[2] * shape[2] * shape[3]);
  bench::set_rate_counters(state, "GFLOPS", (backward ? 12 : 4) * macs / 1e9, t);
}

const char* short_name(ember::DType dtype) {
  switch (dtype) {
    case ember::DType::f16: return "f16";
    case ember::DType::bf16: return "bf16";
    default: return "f32";
  }
}

// attention/<device>/<dtype>/<B>x<heads>x<L>x<E>/<fwd|fwdbwd>
std::string attention_name(const char* device_name, ember::DType dtype, const ember::Shape& shape, bool backward) {
  std::string name = std::string("attention/") + device_name + "/" + short_name(dtype) + "/";
  for (int d = 0; d < shape.size(); ++d) {
    if (d) name += 'x';
    name += std::to_string(shape[d]);
  }
  return name + (backward ? "/fwdbwd" : "/fwd");
}

void register_device(const char* device_name, ember::Device device, const std::vector<ember::DType>& dtypes,
                     const std::vector<int64_t>& sizes) {
  for (ember::DType dtype : dtypes)
    for (const MemoryOp& op : memory_ops())
      for (int64_t numel : sizes) {
        const std::string name =
            std::string("ops/") + device_name + "/" + short_name(dtype) + "/" + op.name + "/" + std::to_string(numel);
        const ember::TensorOptions opts = ember::TensorOptions(dtype).with_device(device);
        if (device.is_cpu()) {
          bench::register_case(name, [&op, numel, opts](benchmark::State& s) {
            memory_case(s, op, numel, opts, bench::WallTimer{},
                        [](void* d, const void* src, size_t n) { std::memcpy(d, src, n); });
          });
        } else {
#if defined(EMBER_BENCH_CUDA)
          bench::register_case(name, [&op, numel, opts](benchmark::State& s) {
            const bench::CudaEventTimer timer;
            memory_case(s, op, numel, opts, timer, [](void* d, const void* src, size_t n) {
              EMBER_CUDA_CHECK(cudaMemcpyAsync(d, src, n, cudaMemcpyDeviceToDevice, ember::cuda::current_stream()));
            });
          });
#endif
        }
      }
  for (bool record : {false, true})
    bench::register_case(std::string("dispatch/") + device_name + "/f32/add/" + (record ? "grad" : "nograd"),
                         [device, record](benchmark::State& s) {
                           dispatch_case(s, device, record);
                         })
        ->Unit(benchmark::kMicrosecond);
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::AddCustomContext("cpu_threads", std::to_string(ember::get_num_threads()));
  register_device("cpu", ember::kCPU, {ember::DType::f32}, {1 << 16, 1 << 24});
  // ViT-tiny's attention (192 / 3 heads, 8 x 8 patches + the class token) and a long sequence.
  for (const ember::Shape& shape : {ember::Shape{32, 3, 65, 64}, ember::Shape{4, 8, 1024, 64}})
    for (bool backward : {false, true})
      bench::register_case(attention_name("cpu", ember::DType::f32, shape, backward),
                           [shape, backward](benchmark::State& s) {
                             attention_case(s, shape, backward, ember::TensorOptions(ember::DType::f32),
                                            bench::WallTimer{});
                           });
#if defined(EMBER_BENCH_CUDA)
  if (ember::backend::cuda_device_count() > 0) {
    const ember::Device gpu(ember::DeviceType::cuda, 0);
    register_device("cuda", gpu, {ember::DType::f32, ember::DType::f16, ember::DType::bf16}, {1 << 24, 1 << 28});
    // ViT-B/16's attention at batch 32 (12 heads of 64, 14 x 14 patches + the class token) and a long sequence.
    for (ember::DType dtype : {ember::DType::f16, ember::DType::bf16})
      for (const ember::Shape& shape : {ember::Shape{32, 12, 197, 64}, ember::Shape{4, 8, 1024, 64}})
        for (bool backward : {false, true})
          bench::register_case(attention_name("cuda", dtype, shape, backward), [=](benchmark::State& s) {
            const bench::CudaEventTimer timer;
            attention_case(s, shape, backward, ember::TensorOptions(dtype).with_device(gpu), timer);
          });
  }
#endif
  return bench::run_cases("bench_ops");
}
