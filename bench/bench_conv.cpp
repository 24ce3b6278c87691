// bench_conv: ember's conv2d forward, backward-data and backward-filter against the raw library in
// the same case, on ResNet-50 layer shapes (bench/conv_case.cpp). GPU: cuDNN called directly with
// the same algorithm search as ember's benchmark mode, batch 32 and 256, NCHW and NHWC, f32, tf32,
// f16, bf16. CPU: batch 2, f32 NCHW and NHWC and bf16 NCHW, against im2col + BLAS in f32.
// Counters: TFLOPS, raw_TFLOPS, ratio (ember / raw); pct_peak on a GPU with a known datasheet.
// Run: build/bench/bench_conv --benchmark_filter=conv/cpu/
#include <benchmark/benchmark.h>

#include "autograd/grad_mode.h"
#include "bench/blas.h"
#include "bench/compare.h"
#include "bench/conv_case.h"
#include "bench/im2col.h"
#include "tensor/ops.h"
#if defined(EMBER_BENCH_CUDNN)
#include "bench/conv_cuda.h"
#endif

namespace {

using bench::ConvCase;
using bench::ConvPass;

// ember's pass on tensors of dtype against im2col + BLAS in f32 on NCHW copies of the same values
// (for bf16, the ratio says what the 16-bit path gains over the f32 baseline).
void cpu_conv(benchmark::State& state, const ConvCase& c, ember::DType dtype) {
  ember::NoGradGuard no_grad;
  const bench::ConvTensors t = bench::make_conv_tensors(c, dtype);
  auto f32_nchw = [](const ember::Tensor& v) { return ember::contiguous(ember::to(v, ember::DType::f32)); };
  const bench::ConvTensors f = {f32_nchw(t.x), f32_nchw(t.w), f32_nchw(t.dy)};
  bench::Im2colConv raw(c);
  // The raw side writes its own result (ember's is a fresh tensor per run, as in training).
  const ember::Tensor out = ember::empty(c.pass == ConvPass::fwd        ? t.dy.shape()
                                         : c.pass == ConvPass::bwd_data ? t.x.shape()
                                                                        : t.w.shape());
  const float *x = f.x.data<float>(), *w = f.w.data<float>(), *dy = f.dy.data<float>();
  float* result = out.data<float>();
  const bench::Timing timing = bench::time_against(
      state, bench::WallTimer{}, bench::CpuLibraryPhase{ember::get_num_threads()},
      [&] { benchmark::DoNotOptimize(bench::ember_conv_pass(c, t)); },
      [&] {
        switch (c.pass) {
          case ConvPass::fwd: return raw.forward(x, w, result);
          case ConvPass::bwd_data: return raw.backward_data(dy, w, result);
          case ConvPass::bwd_filter: return raw.backward_filter(dy, x, result);
        }
      });
  bench::report_flop_case(state, c.flop(), timing, c.source);
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::AddCustomContext("cpu_conv_baseline", std::string("im2col + ") + bench::blas_name());
  benchmark::AddCustomContext("cpu_threads", std::to_string(ember::get_num_threads()));
  // f32 in both layouts; bf16 (oneDNN's native kernels where the CPU has avx512_bf16) in NCHW.
  for (const ConvCase& c : bench::resnet50_conv_cases(2, /*both_layouts=*/true))
    bench::register_case(bench::conv_case_name("cpu", bench::Precision::f32, c),
                         [c](benchmark::State& s) { cpu_conv(s, c, ember::DType::f32); });
  for (const ConvCase& c : bench::resnet50_conv_cases(2, /*both_layouts=*/false))
    bench::register_case(bench::conv_case_name("cpu", bench::Precision::bf16, c),
                         [c](benchmark::State& s) { cpu_conv(s, c, ember::DType::bf16); });
#if defined(EMBER_BENCH_CUDNN)
  bench::register_cuda_conv_cases({32, 256});
#endif
  return bench::run_cases("bench_conv");
}
