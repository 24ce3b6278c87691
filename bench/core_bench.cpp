// ember_core_bench: the core engine's performance figures, each beside its baseline and target.
//   matmul   CPU f32 GEMM on 2 threads: ember::matmul against the GEMM library called directly in
//            the same run (cblas_sgemm, or Eigen in a build without CBLAS); target ratio >= 0.85.
//   overhead host time of a tiny op (add of two 1-element f32 tensors), without autograd and while
//            recording for backward; targets <= 1 us and <= 2 us.
// Run: build/bench/ember_core_bench
#include <cstdio>
#include <vector>

#include "autograd/grad_mode.h"
#include "bench/baseline.h"
#include "tensor/ops.h"

namespace {

constexpr int kThreads = 2;

using bench::Clock;
using bench::median;
using bench::seconds_since;

struct GemmRow {
  double ember_s, baseline_s;
};

// Median times of ember::matmul and of the direct call, each timed in a phase of its own (the two
// thread pools don't run side by side).
GemmRow time_gemm(int n, bool a_transposed, int runs) {
  const ember::Tensor a = ember::randn({n, n}), b = ember::randn({n, n});
  const ember::Tensor a_op = a_transposed ? a.t() : a;  // a strided view: ember must pass it as CblasTrans
  std::vector<float> c(static_cast<size_t>(n) * n);
  auto median_time = [runs](auto&& f) {
    std::vector<double> s;
    for (int r = -2; r < runs; ++r) {  // two warm-up rounds
      const auto start = Clock::now();
      f();
      if (r >= 0) s.push_back(seconds_since(start));
    }
    bench::settle();
    return median(s);
  };
  const double ember_s = median_time([&] { ember::matmul(a_op, b); });
  double baseline_s = 0;
  bench::with_library_threads(kThreads, [&] {
    baseline_s = median_time([&] { bench::baseline_gemm(n, n, n, a.data<float>(), a_transposed, b.data<float>(), c.data()); });
  });
  return {ember_s, baseline_s};
}

// Median microseconds per call of f over `batches` batches of `per_batch` calls.
template <class F>
double micros_per_call(int batches, int per_batch, F&& f) {
  std::vector<double> us;
  for (int i = 0; i < batches; ++i) {
    const auto start = Clock::now();
    for (int j = 0; j < per_batch; ++j) f();
    us.push_back(seconds_since(start) * 1e6 / per_batch);
  }
  return median(us);
}

const char* verdict(bool ok) { return ok ? "ok" : "MISSED"; }

}  // namespace

int main() {
  ember::set_num_threads(kThreads);
  std::printf("ember core bench: %d threads, GEMM baseline %s\n\n", kThreads, bench::kBaselineGemm);

  std::printf("CPU matmul, f32, n x n @ n x n (median of runs; GFLOP/s = 2 n^3 / time)\n");
  std::printf("  %-16s %10s %9s %15s %9s %7s %8s\n", "n", "ember ms", "GFLOP/s", "baseline ms", "GFLOP/s", "ratio",
              "target");
  struct Case {
    int n;
    bool a_transposed;
    int runs;
  };
  for (const Case& c : {Case{1024, false, 21}, Case{1024, true, 21}, Case{2048, false, 9}}) {
    const GemmRow row = time_gemm(c.n, c.a_transposed, c.runs);
    const double flop = 2.0 * c.n * c.n * static_cast<double>(c.n);
    const double ratio = row.baseline_s / row.ember_s;
    char label[32];
    std::snprintf(label, sizeof label, "%d%s", c.n, c.a_transposed ? " (a^T view)" : "");
    std::printf("  %-16s %10.2f %9.1f %15.2f %9.1f %7.3f %8s %s\n", label, row.ember_s * 1e3, flop / row.ember_s / 1e9,
                row.baseline_s * 1e3, flop / row.baseline_s / 1e9, ratio, ">= 0.85", verdict(ratio >= 0.85));
  }

  std::printf("\nHost overhead of a tiny op: add of two 1-element f32 tensors (median of 200 x 2000 calls)\n");
  std::printf("  %-36s %8s %8s\n", "mode", "us/op", "target");
  ember::Tensor x = ember::ones({1}), y = ember::ones({1});
  double no_grad_us;
  {
    ember::NoGradGuard no_grad;
    no_grad_us = micros_per_call(200, 2000, [&] { ember::add(x, y); });
  }
  std::printf("  %-36s %8.3f %8s %s\n", "no grad (NoGradGuard)", no_grad_us, "<= 1", verdict(no_grad_us <= 1.0));
  x.requires_grad_();
  y.requires_grad_();
  const double record_us = micros_per_call(200, 2000, [&] { ember::add(x, y); });
  std::printf("  %-36s %8.3f %8s %s\n", "recording (inputs require grad)", record_us, "<= 2", verdict(record_us <= 2.0));
  return 0;
}
