// Datasheet peak throughput of the GPUs the benchmarks know (dense, no sparsity), for the
// pct_peak counter. CUDA builds only.
#pragma once

#include <benchmark/benchmark.h>

#include <optional>
#include <string>

#include "bench/precision.h"

namespace bench {

// The name of the current CUDA device (cudaGetDeviceProperties), e.g. "NVIDIA H100 80GB HBM3".
std::string cuda_device_name();

// Peak TFLOP/s of the named GPU at p (f32 on CUDA cores; tf32, f16 and bf16 on tensor cores);
// nullopt for a GPU the table lacks.
std::optional<double> datasheet_peak_tflops(const std::string& device_name, Precision p);

// Sets pct_peak = 100 * TFLOPS / datasheet peak, when the current GPU is in the table (the JSON
// context's gpu_peak says which entry; a GPU it lacks gets no pct_peak).
void set_pct_peak(benchmark::State& state, Precision p);

}  // namespace bench
