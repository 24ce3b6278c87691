// bench_comm: the collectives of a process group, and ember's ring all-reduce over its send/recv,
// in bus bandwidth, as nccl-tests reports them (docs/reference.md#bus-bandwidth).
//   comm/<backend>/<op>/<size>: op all_reduce, reduce_scatter, all_gather or ring_all_reduce on
//     f32 buffers of size S bytes (the whole buffer: reduce_scatter's input, all_gather's output).
//     algbw = S / t in GB/s; busbw = algbw * 2(N-1)/N for the all-reduces, * (N-1)/N for
//     reduce_scatter and all_gather (nccl-tests' formulas, its doc/PERFORMANCE.md): what each rank's
//     link carries, comparable across N. ratio = busbw / the backend all_reduce's busbw at the same
//     size in the same run (ring_all_reduce's ratio is ember's ring against the backend's).
// t: every iteration starts after a barrier; each rank times its own call, and the iteration's time
// is the largest over the ranks (an all_reduce max, outside the timing).
//
// Run as N ranks with torchrun's variables, e.g. `./ember bench comm -n 2` or
//   ./ember launch -n 2 build-cpu/bench/bench_comm --benchmark_filter=comm/gloo/all_reduce/
// Without them it runs as a world of one. --backend=gloo|nccl picks the group (default: gloo); with
// nccl the buffers are CUDA tensors on each rank's GPU. A world of one moves nothing (busbw 0, no ratio):
// its algbw shows the backend's fixed cost per call.
// Rank 0 prints and writes the JSON; the other ranks report nothing. Every rank runs the same cases
// with the same iteration counts (fixed from the size), or they would wait on each other forever.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "dist/init.h"
#include "dist/ring_all_reduce.h"
#include "tensor/ops.h"

namespace {

using ember::Tensor;
using ember::dist::ProcessGroup;

std::shared_ptr<ProcessGroup> g_group;
// The backend all_reduce's busbw per size in this run: what every case's ratio divides by.
std::map<int64_t, double> g_all_reduce_busbw;

enum class Op { all_reduce, reduce_scatter, all_gather, ring_all_reduce };
constexpr const char* kOpNames[] = {"all_reduce", "reduce_scatter", "all_gather", "ring_all_reduce"};

// "4KiB", "16MiB"
std::string size_name(int64_t bytes) {
  return bytes >= (1 << 20) ? std::to_string(bytes >> 20) + "MiB" : std::to_string(bytes >> 10) + "KiB";
}

// Fixed iterations, the same on every rank: about 64 MiB of traffic per case, from 3 to 100.
int64_t iterations_for(int64_t bytes) { return std::clamp<int64_t>((int64_t{64} << 20) / bytes, 3, 100); }

// busbw / algbw (nccl-tests): the all-reduces move 2(N-1)/N of the buffer per rank, the others (N-1)/N.
double bus_factor(Op op, int n) {
  const double share = static_cast<double>(n - 1) / n;
  return op == Op::all_reduce || op == Op::ring_all_reduce ? 2 * share : share;
}

void bench_comm(benchmark::State& state, Op op, int64_t requested_bytes) {
  ProcessGroup& pg = *g_group;
  const int n = pg.size();
  // f32 elements, a multiple of N so that every rank's share is whole.
  const int64_t elements = requested_bytes / 4 / n * n, bytes = elements * 4;
  const ember::TensorOptions on_device = ember::TensorOptions(ember::DType::f32).with_device(pg.device());
  Tensor whole = ember::ones({elements}, on_device), part = ember::ones({elements / n}, on_device);
  const auto run = [&] {
    switch (op) {
      case Op::all_reduce: pg.all_reduce(whole); break;
      case Op::reduce_scatter: pg.reduce_scatter(part, whole); break;
      case Op::all_gather: pg.all_gather(whole, part); break;
      case Op::ring_all_reduce: ember::dist::ring_all_reduce(pg, whole); break;
    }
  };
  pg.barrier();
  run();  // warm-up: first touch of the buffers, connections
  Tensor slowest = ember::zeros({1}, ember::TensorOptions(ember::DType::f64).with_device(pg.device()));
  double total_s = 0;
  for (auto _ : state) {
    pg.barrier();
    const auto start = std::chrono::steady_clock::now();
    run();
    ember::fill_(slowest, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    pg.all_reduce(slowest, ember::dist::ReduceOp::max);
    const double s = slowest.item<double>();
    state.SetIterationTime(s);
    total_s += s;
  }
  const double algbw = static_cast<double>(bytes) * static_cast<double>(state.iterations()) / total_s / 1e9;
  const double busbw = algbw * bus_factor(op, n);
  state.counters["algbw"] = algbw;
  state.counters["busbw"] = busbw;
  state.counters["ranks"] = n;
  if (op == Op::all_reduce) g_all_reduce_busbw[bytes] = busbw;
  if (auto it = g_all_reduce_busbw.find(bytes); it != g_all_reduce_busbw.end() && it->second > 0) state.counters["ratio"] = busbw / it->second;
  state.SetBytesProcessed(bytes * state.iterations());
}

// Each size's all_reduce first: the cases after it at that size divide by its busbw.
void register_cases(const std::string& backend) {
  for (int64_t bytes = int64_t{4} << 10; bytes <= int64_t{256} << 20; bytes *= 4)
    for (Op op : {Op::all_reduce, Op::reduce_scatter, Op::all_gather, Op::ring_all_reduce})
      benchmark::RegisterBenchmark(("comm/" + backend + "/" + kOpNames[static_cast<int>(op)] + "/" + size_name(bytes)).c_str(),
                                   bench_comm, op, bytes)
          ->Iterations(iterations_for(bytes))
          ->UseManualTime()
          ->Unit(benchmark::kMillisecond);
}

// The other ranks' reporter: they run every case in step with rank 0 and say nothing.
class QuietReporter : public benchmark::BenchmarkReporter {
 public:
  bool ReportContext(const Context&) override { return true; }
  void ReportRuns(const std::vector<Run>&) override {}
};

}  // namespace

int main(int argc, char** argv) {
  try {
    ember::dist::InitOptions options;
    std::vector<char*> args;
    for (int i = 0; i < argc; ++i) {
      if (std::strncmp(argv[i], "--backend=", 10) == 0) options.backend = argv[i] + 10;
      else args.push_back(argv[i]);
    }
    if (!std::getenv("RANK") && !std::getenv("OMPI_COMM_WORLD_RANK") && !std::getenv("SLURM_PROCID")) {
      options.rank = 0;  // no launcher: a world of one
      options.world_size = 1;
    }
    g_group = ember::dist::init_process_group(options);
    // Only rank 0 writes the JSON file: the others drop --benchmark_out.
    if (g_group->rank() != 0)
      std::erase_if(args, [](char* a) { return std::strncmp(a, "--benchmark_out", 15) == 0; });
    int count = static_cast<int>(args.size());
    benchmark::Initialize(&count, args.data());
    if (benchmark::ReportUnrecognizedArguments(count, args.data())) return 1;
    register_cases(g_group->backend_name());
    QuietReporter quiet;
    if (g_group->rank() == 0) benchmark::RunSpecifiedBenchmarks();
    else benchmark::RunSpecifiedBenchmarks(&quiet);
    g_group->barrier();  // rank 0 serves the store: it stays until every rank is done
    benchmark::Shutdown();
    g_group.reset();
  } catch (const std::exception& e) {
    std::cerr << "bench_comm: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
