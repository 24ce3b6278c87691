// all_reduce: the smallest data-parallel program. Every rank of a job fills a tensor with its own
// rank + 1, all-reduces it (sum) and checks that it holds 1 + 2 + ... + N everywhere, then times a
// few more all-reduces. It reads the launcher's environment like any ember job, so it shows that
// ranks can reach each other: on one machine, across machines, through Slurm or mpirun.
//   ./ember launch -n 2 build/examples/all_reduce --numel 4194304
//   torchrun --no-python --nproc-per-node 2 build/examples/all_reduce
//   tools/netns_two_hosts.sh build/examples/all_reduce      (two network namespaces, as root)
#include <CLI/CLI.hpp>

#include <chrono>
#include <cstdio>

#include "dist/init.h"
#include "tensor/ops.h"

int main(int argc, char** argv) {
  int64_t numel = 1 << 20;
  int repeats = 5;
  CLI::App app{"All-reduce a tensor across the ranks of a job and check the sum.", "all_reduce"};
  app.add_option("--numel", numel, "f32 elements per rank")->check(CLI::Range(int64_t{1}, int64_t{1} << 30));
  app.add_option("--repeats", repeats, "timed all-reduces after the checked one")->check(CLI::Range(0, 10000));
  CLI11_PARSE(app, argc, argv);

  using namespace ember;
  try {
    const auto group = dist::init_process_group();
    const int rank = group->rank(), n = group->size();
    Tensor t = full({numel}, rank + 1.0, DType::f32);
    group->all_reduce(t);
    const double expected = n * (n + 1) / 2.0;
    const double worst = amax(abs(sub(t, expected))).item<float>();
    if (worst != 0) {
      std::fprintf(stderr, "rank %d/%d: all_reduce gave values off by up to %g from %g\n", rank, n, worst, expected);
      return 1;
    }
    group->barrier();
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < repeats; ++i) group->all_reduce(t);
    group->barrier();
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    // Bus bandwidth as nccl-tests defines it: algbw * 2(N-1)/N (docs/reference.md#bus-bandwidth).
    const double bytes = static_cast<double>(numel) * 4;
    const double busbw = repeats ? bytes * repeats / seconds * 2.0 * (n - 1) / n / 1e9 : 0.0;
    std::printf("rank %d/%d (%s): all_reduce of %lld floats = %g everywhere; %d more in %.3f s, busbw %.2f GB/s\n",
                rank, n, group->backend_name().c_str(), static_cast<long long>(numel), expected, repeats, seconds,
                busbw);
  } catch (const Error& e) {
    std::fprintf(stderr, "all_reduce: %s\n", e.what());
    return 1;
  }
  return 0;
}
