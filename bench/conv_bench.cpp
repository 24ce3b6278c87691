// ember_conv_bench: CPU conv2d forward + backward (input and weight gradients) on ResNet-18
// small-stem layer shapes, beside the GEMM library running the GEMMs of the same sizes in the same
// run: forward (O x N*OH*OW x C*kh*kw), backward-input and backward-weight each the same count of
// FLOPs. The ratio is what im2col/col2im and the framework cost on top of raw GEMM.
// Run: build/bench/ember_conv_bench
#include <cstdio>
#include <vector>

#include "bench/baseline.h"
#include "nn/conv.h"
#include "tensor/ops.h"

namespace {

constexpr int kThreads = 2;

struct Shape4 {
  int n, c, h, w, o, k;
};

struct Row {
  double conv_s, gemm_s;
};

// Median over `runs` of one forward + backward of conv2d (stride 1, same padding), and of the three
// GEMMs it amounts to (as one GEMM per pass over the whole batch), each timed in a phase of its own
// (the two thread pools don't run side by side).
Row time_conv(const Shape4& s, int runs) {
  using ember::Tensor;
  const Tensor x = ember::randn({s.n, s.c, s.h, s.w}).requires_grad_();
  const Tensor w = ember::randn({s.o, s.c, s.k, s.k}).requires_grad_();
  const int m = s.o, cols = s.n * s.h * s.w, depth = s.c * s.k * s.k;
  std::vector<float> a(static_cast<size_t>(m) * depth, 1.0f), b(static_cast<size_t>(depth) * cols, 1.0f),
      c(static_cast<size_t>(m) * cols);
  std::vector<float> bt(static_cast<size_t>(cols) * depth, 1.0f), ct(static_cast<size_t>(depth) * cols);
  auto median_time = [runs](auto&& f) {
    std::vector<double> t;
    for (int r = -1; r < runs; ++r) {  // one warm-up round
      const auto start = bench::Clock::now();
      f();
      if (r >= 0) t.push_back(bench::seconds_since(start));
    }
    bench::settle();
    return bench::median(t);
  };
  const double conv_s = median_time([&] {
    const Tensor y = ember::conv2d(x, w, {}, {1, 1}, {s.k / 2, s.k / 2});
    y.backward(ember::ones_like(y));
    x.set_grad({});
    w.set_grad({});
  });
  double gemm_s = 0;
  bench::with_library_threads(kThreads, [&] {
    gemm_s = median_time([&] {
      bench::baseline_gemm(m, cols, depth, a.data(), false, b.data(), c.data());   // y = W @ cols
      bench::baseline_gemm(depth, cols, m, a.data(), true, c.data(), ct.data());   // dcols = W^T @ dy
      bench::baseline_gemm(m, depth, cols, c.data(), false, bt.data(), a.data());  // dW = dy @ cols^T
    });
  });
  return {conv_s, gemm_s};
}

}  // namespace

int main() {
  ember::set_num_threads(kThreads);
  std::printf("ember conv bench: %d threads, f32 NCHW, GEMM baseline %s (same FLOPs, same run)\n", kThreads,
              bench::kBaselineGemm);
  std::printf("  %-28s %10s %9s %12s %9s %7s\n", "input x weight (fwd+bwd)", "conv ms", "GFLOP/s", "GEMMs ms",
              "GFLOP/s", "ratio");
  // ResNet-18 with the small-image stem on 28x28 inputs: layer1 and layer2 3x3 convs, batch 32.
  for (const Shape4& s : {Shape4{32, 64, 28, 28, 64, 3}, Shape4{32, 128, 14, 14, 128, 3}}) {
    const Row row = time_conv(s, 5);
    const double flop = 3.0 * 2.0 * s.o * static_cast<double>(s.n) * s.h * s.w * s.c * s.k * s.k;
    char label[64];
    std::snprintf(label, sizeof label, "(%d,%d,%d,%d) x (%d,%d,%d,%d)", s.n, s.c, s.h, s.w, s.o, s.c, s.k, s.k);
    std::printf("  %-28s %10.1f %9.1f %12.1f %9.1f %7.3f\n", label, row.conv_s * 1e3, flop / row.conv_s / 1e9,
                row.gemm_s * 1e3, flop / row.gemm_s / 1e9, row.gemm_s / row.conv_s);
  }
  return 0;
}
