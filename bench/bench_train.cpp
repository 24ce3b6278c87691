// bench_train: one whole training step (forward, cross-entropy, backward, SGD step) of the model
// zoo's models on CIFAR-sized batches (3x32x32, 10 classes), per precision mode.
//   train/<device>/<precision>/<model>/<batch>: img_per_s, and peak_MiB: on a GPU ember's pool peak
//   during the case; on the CPU the process's peak resident memory so far (run one case per process,
//   --benchmark_filter=...$, for a per-model figure).
// Flags of its own (before Google Benchmark's): --precision=fp32,tf32 (default: fp32, plus tf32 on a
// GPU), --batch=N (default 16 on the CPU, 256 on a GPU).
// Run: build/bench/bench_train --benchmark_filter=train/cpu/fp32/mlp/
#include <benchmark/benchmark.h>

#include <sys/resource.h>

#include <cstdio>
#include <cstring>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "bench/compare.h"
#include "bench/precision.h"
#include "nn/loss.h"
#include "optim/sgd.h"
#include "tensor/ops.h"
#include "tensor/storage.h"
#include "train/model_zoo.h"
#if defined(EMBER_BENCH_CUDA)
#include "bench/cuda_timer.h"
#endif

namespace {

using ember::Tensor;

// A training precision mode (DESIGN.md §6 names them), as this bench runs it: the kernel switches
// it sets, on the devices where it is implemented. Modes with neither device are refused with an
// error, never run as fp32.
struct TrainPrecision {
  const char* name;
  bool cpu, cuda;
  bench::Precision kernels;
};

const std::vector<TrainPrecision>& train_precisions() {
  static const std::vector<TrainPrecision> table = {
      {"fp32", true, true, bench::Precision::f32},
      {"tf32", false, true, bench::Precision::tf32},
      // Mixed-precision modes come with the autocast / GradScaler / master-weight issue.
      {"amp_fp16", false, false, bench::Precision::f16},
      {"amp_bf16", false, false, bench::Precision::bf16},
      {"naive_fp16", false, false, bench::Precision::f16},
      {"naive_bf16", false, false, bench::Precision::bf16},
      {"pure_bf16", false, false, bench::Precision::bf16},
  };
  return table;
}

const std::vector<std::string> kModels = {"mlp", "cnn", "resnet18", "resnet50", "vit_small"};
constexpr ember::train::ImageShape kImage{3, 32, 10};

struct Options {
  std::vector<const TrainPrecision*> precisions;  // empty: the defaults
  std::optional<int64_t> batch;
};

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
        const TrainPrecision* found = nullptr;
        for (const TrainPrecision& p : train_precisions())
          if (name == p.name) found = &p;
        std::string known;
        for (const TrainPrecision& p : train_precisions()) known += std::string(known.empty() ? "" : ", ") + p.name;
        if (!found) {
          std::fprintf(stderr, "bench_train: unknown precision \"%s\" (known: %s)\n", name.c_str(), known.c_str());
          return std::nullopt;
        }
        if (!found->cpu && !found->cuda) {
          std::fprintf(stderr,
                       "bench_train: precision %s is not implemented yet (it comes with the mixed-precision issue); "
                       "implemented: fp32 (CPU, GPU), tf32 (GPU)\n",
                       found->name);
          return std::nullopt;
        }
        o.precisions.push_back(found);
        start = end + 1;
      }
    } else if (a.rfind("--batch=", 0) == 0) {
      char* end = nullptr;
      const long long b = std::strtoll(a.c_str() + 8, &end, 10);
      if (*end != '\0' || b < 1) {
        std::fprintf(stderr, "bench_train: --batch must be a positive integer, got \"%s\"\n", a.c_str() + 8);
        return std::nullopt;
      }
      o.batch = b;
    } else {
      argv[kept++] = argv[i];
    }
  }
  argc = kept;
  return o;
}

double process_peak_mib() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_maxrss) / 1024.0;  // ru_maxrss is in KiB on Linux (getrusage(2))
}

template <class Time>
void train_case(benchmark::State& state, const std::string& model_name, const TrainPrecision& precision,
                ember::Device device, int64_t batch, const Time& time) {
  if (!bench::set_ember_precision(precision.kernels)) {
    state.SkipWithError("ember's matmul has no TF32 switch yet (bench/precision.cpp): a tf32 step would be partly fp32");
    return;
  }
  ember::manual_seed(0);
  auto model = ember::train::make_model(model_name, kImage);
  model->to(device);
  model->train();
  ember::optim::SGD sgd(model->parameters(), {0.01, 0.9});
  const ember::TensorOptions on(device);
  const Tensor images = ember::randn({batch, kImage.channels, kImage.size, kImage.size}, on);
  const Tensor labels = ember::randint(0, kImage.classes, {batch}, ember::TensorOptions(ember::DType::i64).with_device(device));
  auto step = [&] {
    const Tensor loss = ember::cross_entropy(model->forward(images), labels);
    sgd.zero_grad();
    loss.backward();
    sgd.step();
  };
  step();  // first step: optimizer state, algorithm search, allocator warm-up
  ember::backend::reset_peak_memory_stats(device);
  double total = 0;
  for (auto _ : state) {
    const double s = time(step);
    state.SetIterationTime(s);
    total += s;
  }
  state.counters["img_per_s"] = static_cast<double>(batch) * static_cast<double>(state.iterations()) / total;
  state.counters["peak_MiB"] = device.is_cuda()
                                   ? static_cast<double>(ember::backend::max_memory_allocated(device)) / (1 << 20)
                                   : process_peak_mib();
}

// Registers the cases of each precision implemented on `device`; adds those precisions to `registered`.
void register_device(const char* device_name, ember::Device device, const std::vector<const TrainPrecision*>& precisions,
                     int64_t batch, std::set<std::string>& registered) {
  for (const TrainPrecision* p : precisions) {
    if (device.is_cpu() ? !p->cpu : !p->cuda) continue;
    registered.insert(p->name);
    for (const std::string& model : kModels) {
      const std::string name =
          std::string("train/") + device_name + "/" + p->name + "/" + model + "/" + std::to_string(batch);
      bench::register_case(name, [=](benchmark::State& s) {
        if (device.is_cpu()) return train_case(s, model, *p, device, batch, bench::WallTimer{});
#if defined(EMBER_BENCH_CUDA)
        const bench::CudaEventTimer timer;
        train_case(s, model, *p, device, batch, timer);
#endif
      });
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  const std::optional<Options> options = parse_flags(argc, argv);
  if (!options) return 2;
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::AddCustomContext("cpu_threads", std::to_string(ember::get_num_threads()));
  benchmark::AddCustomContext("peak_MiB", "GPU: ember's pool peak in the case; CPU: the process's peak RSS so far");
  std::vector<const TrainPrecision*> precisions = options->precisions;
  if (precisions.empty())
    for (const TrainPrecision& p : train_precisions())
      if (p.cpu || p.cuda) precisions.push_back(&p);
  std::set<std::string> registered;
  register_device("cpu", ember::kCPU, precisions, options->batch.value_or(16), registered);
#if defined(EMBER_BENCH_CUDA)
  if (ember::backend::cuda_device_count() > 0)
    register_device("cuda", ember::Device(ember::DeviceType::cuda, 0), precisions, options->batch.value_or(256),
                    registered);
#endif
  for (const TrainPrecision* p : options->precisions)
    if (!registered.count(p->name)) {
      std::fprintf(stderr, "bench_train: precision %s runs only on a GPU, and this run has none\n", p->name);
      return 2;
    }
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
