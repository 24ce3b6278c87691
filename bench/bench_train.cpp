// bench_train: one whole training step (forward, cross-entropy, backward, SGD step) of the model
// zoo's models on CIFAR-sized batches (3x32x32, 10 classes), per precision mode, as the Runner runs it
// (on the CPU also the MLP and SmallCNN on Fashion-MNIST's 1x28x28 at batch 128: mlp_28, cnn_28);
// on a GPU also ImageNet-sized steps (3x224x224, 1000 classes): ResNet-50 channels-last at batch 256
// (resnet50_224_nhwc) and ViT-B/16 at batch 128 (vit_b16_224), the shapes PyTorch is compared on.
//   train/<device>/<precision>/<model>/<batch>: img_per_s, and peak_MiB: on a GPU ember's pool peak
//   during the case; on the CPU the process's peak resident memory so far (run one case per process,
//   --benchmark_filter=...$, for a per-model figure).
// Flags of its own (before Google Benchmark's): --precision=fp32,amp_bf16,... (train/precision.h's
// names; default: fp32 on the CPU, every mode on a GPU), --batch=N (default 16 on the CPU, 256 on a GPU,
// the ImageNet-sized cases their own), --strategy=ddp|zero1|zero2|zero3|fsdp (data parallel over the ranks
// of the job that launched it; cases train/<device>/<precision>/<strategy>/<model>/<batch per rank>).
// --compile: the step captured after 3 eager warm-up steps and replayed (train::CompiledStep; CUDA
// graphs on a GPU), cases train/<device>/<precision>/compiled/<model>/<batch>.
// --activation-checkpointing: the ResNets' and ViTs' blocks recomputed in backward (nn/checkpoint.h),
// cases train/<device>/<precision>/checkpointed/<model>/<batch>; the other models are left out.
// --plain-step: fp32 only, the step as one writes it by hand (zero_grad, forward, cross_entropy,
// backward, SGD step), without the Runner's gradient norm and finite check; cases
// train/<device>/fp32/plain/<model>/<batch>, the C++ side of bench/python_overhead.py.
// Every case also reports step_peak_MiB: the allocator's peak over the timed steps (the model, its
// gradients and optimizer state included), on either device. With --batch, the CPU runs the
// ImageNet-sized cases too (slow: for memory figures).
// Data-parallel cases run a fixed number of steps (the ranks must step together), report img_per_s
// over every rank, peak_MiB of the largest rank, and how much of the communication backward hides:
//   backward_ms        backward under the strategy (its reductions included)
//   backward_local_ms  the same backward of a plain copy of the model, no communication
//   comm_ms            the strategy's reductions of one backward run alone, one after another
//   comm_hidden        1 - (backward_ms - backward_local_ms) / comm_ms, in [0, 1]
// Run: build/bench/bench_train --benchmark_filter=train/cpu/fp32/mlp/
//      ./ember launch -n 2 build/bench/bench_train --strategy=zero2 --benchmark_filter=/mlp/
#include <benchmark/benchmark.h>


#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "bench/compare.h"
#include "bench/flags.h"
#include "dist/init.h"
#include "dist/ring_all_reduce.h"
#include "nn/checkpoint.h"
#include "nn/loss.h"
#include "optim/sgd.h"
#include "tensor/layout.h"
#include "tensor/ops.h"
#include "tensor/storage.h"
#include "train/compiled_step.h"
#include "train/model_zoo.h"
#include "train/precision.h"
#include "train/strategy.h"
#if defined(EMBER_BENCH_CUDA)
#include "bench/cuda_timer.h"
#endif

namespace {

using ember::Tensor;

// The precision modes of train/precision.h, as this bench runs them. tf32 only changes GPU kernels,
// so it runs on a GPU only.
bool runs_on(ember::train::Precision p, ember::Device device) {
  return device.is_cuda() || p != ember::train::Precision::tf32;
}

// A model of the zoo on its input: the case name's model part, the zoo's name, the images.
struct Workload {
  std::string name;
  std::string model;
  ember::train::ImageShape image;
  bool channels_last = false;     // images stored NHWC (the convolutions then run NHWC)
  std::optional<int64_t> batch;   // its own batch size, else --batch or the device's default
};
constexpr ember::train::ImageShape kCifar{3, 32, 10};
constexpr ember::train::ImageShape kImageNet{3, 224, 1000};
Workload cifar(const std::string& model) { return {model, model, kCifar, false, std::nullopt}; }
const std::vector<Workload> kCifarWorkloads = {cifar("mlp"), cifar("cnn"), cifar("resnet18"), cifar("resnet50"),
                                               cifar("vit_tiny"), cifar("vit_small")};
// The main job's shapes (Fashion-MNIST, 1x28x28) at examples/train's batch: the CPU's own cases.
constexpr ember::train::ImageShape kFashion{1, 28, 10};
const std::vector<Workload> kFashionWorkloads = {{"mlp_28", "mlp", kFashion, false, 128},
                                                 {"cnn_28", "cnn", kFashion, false, 128}};
const std::vector<Workload> kImageNetWorkloads = {{"resnet50_224_nhwc", "resnet50", kImageNet, true, 256},
                                                  {"vit_b16_224", "vit_base", kImageNet, false, 128}};

struct Options {
  std::vector<ember::train::Precision> precisions;  // empty: the defaults
  std::optional<int64_t> batch;
  std::string strategy = "none";
  bool compile = false;
  bool checkpointing = false;
  bool plain_step = false;  // the step as a user writes it by hand, without the Runner's extras
};

// The job's group for a data-parallel --strategy (null: one process), and the steps each of its
// cases runs: every rank must run the same ones.
std::shared_ptr<ember::dist::ProcessGroup> g_group;
constexpr int64_t kDataParallelSteps = 10;

// Takes this bench's own flags out of argv; a bad value is an error naming it and what is known.
std::optional<Options> parse_flags(int& argc, char** argv) {
  Options o;
  int kept = 1;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a.rfind("--precision=", 0) == 0) {
      std::string list = a.substr(12);
      size_t start = 0;
      while (start <= list.size()) {
        const size_t end = std::min(list.find(',', start), list.size());
        const std::string name = list.substr(start, end - start);
        try {
          o.precisions.push_back(ember::train::parse_precision(name));
        } catch (const ember::ValueError& e) {
          std::fprintf(stderr, "bench_train: %s\n", e.what());
          return std::nullopt;
        }
        start = end + 1;
      }
    } else if (a.rfind("--strategy=", 0) == 0) {
      o.strategy = a.substr(11);
      try {
        ember::train::StrategyOptions named;
        named.name = o.strategy;
        (void)ember::train::strategy_kind(named);
      } catch (const ember::ValueError& e) {
        std::fprintf(stderr, "bench_train: --strategy: %s\n", e.what());
        return std::nullopt;
      }
    } else if (a == "--compile") {
      o.compile = true;
    } else if (a == "--activation-checkpointing") {
      o.checkpointing = true;
    } else if (a == "--plain-step") {
      o.plain_step = true;
    } else if (a.rfind("--batch=", 0) == 0) {
      const std::optional<long long> b = ember::bench::positive_flag("bench_train", a);
      if (!b) return std::nullopt;
      o.batch = *b;
    } else {
      argv[kept++] = argv[i];
    }
  }
  if (o.compile && o.checkpointing) {
    std::fprintf(stderr, "bench_train: --compile and --activation-checkpointing: a captured step cannot replay a "
                         "recompute's random numbers\n");
    return std::nullopt;
  }
  if (o.plain_step && (o.compile || o.checkpointing || o.strategy != "none" ||
                       (!o.precisions.empty() && o.precisions != std::vector{ember::train::Precision::fp32}))) {
    std::fprintf(stderr, "bench_train: --plain-step times the fp32 step of one process only: it takes no "
                         "--compile, --activation-checkpointing, --strategy or other --precision\n");
    return std::nullopt;
  }
  argc = kept;
  return o;
}

// The process's peak resident memory: VmHWM of /proc/self/status (kB), the high-water mark of this
// program's own address space. getrusage's ru_maxrss is not: exec keeps the peak of the process it
// replaced, so a bench started from a large parent (torch_compare.py, PyTorch imported) reported
// the parent's 526 MiB for every case.
double process_peak_mib() {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);)
    if (line.rfind("VmHWM:", 0) == 0) return std::stod(line.substr(6)) / 1024.0;
  return std::nan("");
}

double over_ranks_max(double v) {
  if (!g_group) return v;
  Tensor t = ember::full({1}, ember::Scalar(v), ember::DType::f64).to(g_group->device());
  g_group->all_reduce(t, ember::dist::ReduceOp::max);
  return t.item<double>();
}

// Milliseconds of `f` on the host (the GPU cases' collectives wait for the device), median of 5.
template <class F>
double median_ms(const F& f) {
  std::vector<double> ms;
  for (int i = 0; i < 5; ++i) {
    const auto start = std::chrono::steady_clock::now();
    f();
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
  }
  std::sort(ms.begin(), ms.end());
  return ms[2];
}

// The overlap counters of a data-parallel case (see the top of the file).
void measure_overlap(benchmark::State& state, const Workload& work, ember::Device device, ember::nn::UnaryModule& run,
                     const Tensor& images, const Tensor& labels, const ember::train::Strategy& strategy) {
  const auto backward_of = [&](ember::nn::UnaryModule& m) {
    return median_ms([&] {
      Tensor loss = ember::cross_entropy(m(images).to(ember::DType::f32), labels);
      for (Tensor p : m.parameters()) p.set_grad(Tensor());
      loss.backward();
    });
  };
  // Forward and backward are timed together above; the forward alone is taken off below.
  const auto forward_of = [&](ember::nn::UnaryModule& m) {
    return median_ms([&] { (void)ember::cross_entropy(m(images).to(ember::DType::f32), labels); });
  };
  ember::manual_seed(0);
  auto local = ember::train::make_model(work.model, work.image);
  local->to(device);
  local->train();
  const double dist_ms = backward_of(run) - forward_of(run);
  const double local_ms = backward_of(*local) - forward_of(*local);
  // The reductions alone: DDP's buckets through the ring, ZeRO's units reduce-scattered.
  std::vector<Tensor> flats, shards;
  if (const auto* ddp = strategy.ddp()) {
    for (const auto& b : ddp->buckets()) flats.push_back(ember::zeros({b.numel}, ember::TensorOptions(b.dtype).with_device(device)));
  } else {
    for (const auto& u : strategy.zero_partition()->units()) {
      flats.push_back(ember::zeros({u.padded}, ember::TensorOptions(u.dtype).with_device(device)));
      shards.push_back(ember::zeros({u.padded / g_group->size()}, ember::TensorOptions(u.dtype).with_device(device)));
    }
  }
  const double comm_ms = median_ms([&] {
    for (size_t i = 0; i < flats.size(); ++i) {
      if (strategy.ddp()) ember::dist::ring_all_reduce(*g_group, flats[i], ember::dist::ReduceOp::avg);
      else g_group->reduce_scatter(shards[i], flats[i], ember::dist::ReduceOp::avg);
    }
  });
  state.counters["backward_ms"] = dist_ms;
  state.counters["backward_local_ms"] = local_ms;
  state.counters["comm_ms"] = comm_ms;
  state.counters["comm_hidden"] = comm_ms > 0 ? std::clamp(1.0 - (dist_ms - local_ms) / comm_ms, 0.0, 1.0) : 0.0;
}

template <class Time>
void train_case(benchmark::State& state, const Workload& work, ember::train::Precision precision,
                ember::Device device, int64_t batch, const Options& o, const Time& time) {
  ember::manual_seed(0);
  auto model = ember::train::make_model(work.model, work.image);
  if (o.checkpointing) ember::nn::apply_activation_checkpointing(*model, ember::nn::default_checkpoint_modules(*model));
  model->to(device);
  model->train();
  ember::train::StrategyOptions named;
  named.name = o.strategy;
  named.overlap_comm = true;
  ember::train::PrecisionOptions options;
  options.precision = precision;
  options.strategy = ember::train::make_strategy(named, g_group);
  ember::train::TrainingPrecision mode(options, *model, [](std::vector<Tensor> params) {
    return std::make_unique<ember::optim::SGD>(std::move(params), ember::optim::SGDOptions{0.01, 0.9});
  });
  const std::shared_ptr<ember::nn::UnaryModule> run = options.strategy->wrap(model);
  const ember::TensorOptions on(device);
  const ember::train::ImageShape& im = work.image;
  Tensor images = ember::randn({batch, im.channels, im.size, im.size}, on).to(mode.input_dtype());
  if (work.channels_last) images = ember::to_channels_last(images);
  const Tensor labels = ember::randint(0, im.classes, {batch}, ember::TensorOptions(ember::DType::i64).with_device(device));
  auto eager_step = [&](const Tensor& x, const Tensor& y) {  // the Runner's: autocast forward, f32 logits to the loss
    if (o.plain_step) {  // without the gradients' norm and the finite check the Runner logs and steps on
      mode.optimizer().zero_grad();
      Tensor loss = ember::cross_entropy((*run)(x), y);
      loss.backward();
      mode.optimizer().step();
      return std::vector<Tensor>{loss};
    }
    mode.zero_grad();
    Tensor loss;
    {
      const auto autocast = mode.autocast(device);
      loss = ember::cross_entropy((*run)(x).to(ember::DType::f32), y);
    }
    mode.backward_and_step(loss, 0.0);
    return std::vector<Tensor>{loss};
  };
  const ember::train::CompileOptions compile_options{.warmup_steps = 3};
  std::unique_ptr<ember::train::CompiledStep> compiled;
  if (o.compile)
    compiled = std::make_unique<ember::train::CompiledStep>(
        [&](const std::vector<Tensor>& b) { return eager_step(b[0], b[1]); },
        std::vector<ember::optim::Optimizer*>{&mode.optimizer()}, std::vector<ember::Generator*>{}, compile_options);
  auto step = [&] { compiled ? (*compiled)({images, labels}) : eager_step(images, labels); };
  // Optimizer state, algorithm search, allocator warm-up; compiled: the eager steps and the capture.
  for (int64_t i = 0; i < (o.compile ? compile_options.warmup_steps + 1 : 1); ++i) step();
  ember::backend::reset_peak_memory_stats(device);
  double total = 0;
  for (auto _ : state) {
    const double s = time(step);
    state.SetIterationTime(s);
    total += s;
  }
  const double world = g_group ? g_group->size() : 1;
  state.counters["img_per_s"] = static_cast<double>(batch) * world * static_cast<double>(state.iterations()) / total;
  const double step_peak_mib = static_cast<double>(ember::backend::max_memory_allocated(device)) / (1 << 20);
  state.counters["step_peak_MiB"] = over_ranks_max(step_peak_mib);
  state.counters["peak_MiB"] = over_ranks_max(device.is_cuda() ? step_peak_mib : process_peak_mib());
  // The overlap is measured in float32 storage (the 16-bit modes would need their casts on the copy too).
  if (g_group && mode.input_dtype() == ember::DType::f32) measure_overlap(state, work, device, *run, images, labels, *options.strategy);
}

// Registers the workloads' cases of each precision that runs on `device`; adds those precisions to
// `registered`. `batch`: --batch, else the device's default for workloads without their own.
void register_device(const char* device_name, ember::Device device, const std::vector<Workload>& workloads,
                     const std::vector<ember::train::Precision>& precisions, std::optional<int64_t> batch_flag,
                     int64_t default_batch, const Options& o, std::set<ember::train::Precision>& registered) {
  for (const ember::train::Precision p : precisions) {
    if (!runs_on(p, device)) continue;
    registered.insert(p);
    for (const Workload& work : workloads) {
      if (o.checkpointing && !work.model.starts_with("resnet") && !work.model.starts_with("vit")) continue;
      const int64_t batch = batch_flag.value_or(work.batch.value_or(default_batch));
      const std::string name = std::string("train/") + device_name + "/" + ember::train::precision_name(p) + "/" +
                               (o.strategy == "none" ? "" : o.strategy + "/") + (o.compile ? "compiled/" : "") +
                               (o.checkpointing ? "checkpointed/" : "") + (o.plain_step ? "plain/" : "") + work.name +
                               "/" + std::to_string(batch);
      auto* b = bench::register_case(name, [=](benchmark::State& s) {
        if (device.is_cpu())
          return train_case(s, work, p, device, batch, o, bench::WallTimer{});
#if defined(EMBER_BENCH_CUDA)
        const bench::CudaEventTimer timer;
        train_case(s, work, p, device, batch, o, timer);
#endif
      });
      if (g_group) b->Iterations(kDataParallelSteps);
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  const std::optional<Options> options = parse_flags(argc, argv);
  if (!options) return 2;
  if (options->strategy != "none") {
    ember::dist::InitOptions io;  // NCCL where there is a GPU (one rank per GPU), else Gloo
    io.backend = ember::backend::cuda_device_count() > 0 ? "nccl" : "gloo";
    try {
      g_group = ember::dist::init_process_group(io);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "bench_train: --strategy=%s: %s\n", options->strategy.c_str(), e.what());
      return 2;
    }
    if (g_group->rank() != 0 && !std::freopen("/dev/null", "w", stdout)) return 1;  // rank 0 reports
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::AddCustomContext("cpu_threads", std::to_string(ember::get_num_threads()));
  benchmark::AddCustomContext("peak_MiB", "GPU: ember's pool peak in the case; CPU: the process's peak RSS so far");
  // Default: fp32 on the CPU (the 16-bit modes there are storage only), every mode on a GPU.
  const bool chosen = !options->precisions.empty();
  std::vector<ember::train::Precision> all;
  for (const std::string& n : ember::train::precision_names()) all.push_back(ember::train::parse_precision(n));
  std::set<ember::train::Precision> registered;
  const bool cpu_cases = !g_group || g_group->device().is_cpu();  // a data-parallel job runs on its group's device
  std::vector<Workload> cpu_workloads = kCifarWorkloads;
  cpu_workloads.insert(cpu_workloads.end(), kFashionWorkloads.begin(), kFashionWorkloads.end());
  if (options->batch) cpu_workloads.insert(cpu_workloads.end(), kImageNetWorkloads.begin(), kImageNetWorkloads.end());
  if (cpu_cases)
    register_device("cpu", ember::kCPU, cpu_workloads,
                  chosen ? options->precisions : std::vector{ember::train::Precision::fp32}, options->batch, 16,
                  *options, registered);
#if defined(EMBER_BENCH_CUDA)
  if (ember::backend::cuda_device_count() > 0 && (!g_group || g_group->device().is_cuda())) {
    std::vector<Workload> gpu_workloads = kCifarWorkloads;
    gpu_workloads.insert(gpu_workloads.end(), kImageNetWorkloads.begin(), kImageNetWorkloads.end());
    register_device("cuda", g_group ? g_group->device() : ember::Device(ember::DeviceType::cuda, 0), gpu_workloads,
                    chosen ? options->precisions : all,
                    options->batch, 256, *options, registered);
  }
#endif
  for (const ember::train::Precision p : options->precisions)
    if (!registered.count(p)) {
      std::fprintf(stderr, "bench_train: precision %s runs only on a GPU, and this run has none\n",
                   ember::train::precision_name(p));
      return 2;
    }
  return bench::run_cases("bench_train");
}
