// bench_gemm: ember::matmul against the raw library in the same case: BLAS on the CPU (f32, and
// f32_deterministic: ember's deterministic GEMM, set_deterministic(true)), cuBLASLt on a GPU (f32,
// tf32, f16, bf16). Shapes: square 256.. and the training GEMMs of
// ResNet-50 and ViT-B/16 (bench/gemm_case.cpp lists them), plus batched attention products.
// Counters: TFLOPS, raw_TFLOPS, ratio (ember / raw); pct_peak on a GPU with a known datasheet.
// Run: build/bench/bench_gemm --benchmark_filter=gemm/cpu/f32/1024$
#include <benchmark/benchmark.h>

#include <vector>

#include "bench/blas.h"
#include "bench/compare.h"
#include "bench/gemm_case.h"
#include "tensor/ops.h"
#if defined(EMBER_BENCH_CUDA)
#include "bench/gemm_cuda.h"
#endif

namespace {

using bench::GemmCase;
using ember::Tensor;

// Operand `rows x cols` of c, stored transposed (cols x rows) when asked; batched when c is.
Tensor operand(const GemmCase& c, int64_t rows, int64_t cols, bool transposed, ember::TensorOptions opts) {
  const int64_t r = transposed ? cols : rows, s = transposed ? rows : cols;
  const Tensor t = c.batch > 1 ? ember::randn({c.batch, r, s}, opts) : ember::randn({r, s}, opts);
  return transposed ? ember::transpose(t, -2, -1) : t;
}

void cpu_gemm(benchmark::State& state, const GemmCase& c, bool deterministic) {
  struct Mode {  // the deterministic mode for this case only
    explicit Mode(bool on) { ember::set_deterministic(on); }
    ~Mode() { ember::set_deterministic(false); }
  } mode(deterministic);
  const Tensor a = operand(c, c.m, c.k, c.a_transposed, {}), b = operand(c, c.k, c.n, c.b_transposed, {});
  std::vector<float> out(static_cast<size_t>(c.batch * c.m * c.n));
  // The raw call reads the same storage: a view's data<float>() is its storage's first element here.
  const bench::Timing t = bench::time_against(
      state, bench::WallTimer{}, bench::CpuLibraryPhase{ember::get_num_threads()},
      [&] { benchmark::DoNotOptimize(ember::matmul(a, b)); },
      [&] {
        bench::blas_sgemm(static_cast<int>(c.batch), static_cast<int>(c.m), static_cast<int>(c.n),
                          static_cast<int>(c.k), a.data<float>(), c.a_transposed, b.data<float>(), c.b_transposed,
                          out.data());
      });
  bench::report_flop_case(state, c.flop(), t, c.source);
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::AddCustomContext("cpu_gemm_baseline", bench::blas_name());
  benchmark::AddCustomContext("cpu_threads", std::to_string(ember::get_num_threads()));
  // CPU: f32 only (the BLAS has no 16-bit GEMM to compare with); sizes a 2-core machine times in seconds.
  for (const GemmCase& c : bench::gemm_cases({256, 512, 1024, 2048, 4096}))
    bench::register_case(bench::gemm_case_name("cpu", bench::Precision::f32, c),
                         [c](benchmark::State& s) { cpu_gemm(s, c, false); });
  for (int64_t n : {256, 512, 1024, 2048}) {
    const GemmCase c{1, n, n, n, false, false, "square"};
    bench::register_case("gemm/cpu/f32_deterministic/" + c.size_name(),
                         [c](benchmark::State& s) { cpu_gemm(s, c, true); });
  }
#if defined(EMBER_BENCH_CUDA)
  bench::register_cuda_gemm_cases(bench::gemm_cases({256, 512, 1024, 2048, 4096, 8192, 16384}));
#endif
  return bench::run_cases("bench_gemm");
}
