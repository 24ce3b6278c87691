// The datasheet table of bench/gpu_peak.h. Figures are NVIDIA's datasheets' dense numbers: their
// tensor-core figures are quoted "with sparsity", twice the dense rate, and are halved here.
#include "bench/gpu_peak.h"

#include <cuda_runtime_api.h>

#include "cuda/error.h"

namespace bench {

namespace {

struct Peak {
  const char* match;  // a part of cudaDeviceProp::name; the first entry that matches is taken
  double f32, tf32, f16;  // TFLOP/s; bf16 equals f16 on these parts
};

// Sources: NVIDIA H100 Tensor Core GPU datasheet (SXM: FP32 67, TF32 989*, FP16/BF16 1979*;
// PCIe: 51, 756*, 1513*; NVL: 60, 835*, 1671*), NVIDIA H200 Tensor Core GPU datasheet (SXM: 67,
// 989*, 1979*; NVL: 60, 835*, 1671*), NVIDIA A100 Tensor Core GPU datasheet (19.5, 156, 312).
// * with sparsity. More specific names come first ("H100 PCIe" before "H100").
constexpr Peak kPeaks[] = {
    {"H100 PCIe", 51, 378, 756.5},  {"H100 NVL", 60, 417.5, 835.5}, {"H100", 67, 494.5, 989.5},
    {"H200 NVL", 60, 417.5, 835.5}, {"H200", 67, 494.5, 989.5},     {"A100", 19.5, 156, 312},
};

}  // namespace

std::string cuda_device_name() {
  int device = 0;
  EMBER_CUDA_CHECK(cudaGetDevice(&device));
  cudaDeviceProp prop{};
  EMBER_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  return prop.name;
}

std::optional<double> datasheet_peak_tflops(const std::string& device_name, Precision p) {
  for (const Peak& peak : kPeaks) {
    if (device_name.find(peak.match) == std::string::npos) continue;
    switch (p) {
      case Precision::f32: return peak.f32;
      case Precision::tf32: return peak.tf32;
      case Precision::f16:
      case Precision::bf16: return peak.f16;
    }
  }
  return std::nullopt;
}

void set_pct_peak(benchmark::State& state, Precision p) {
  static const std::string name = cuda_device_name();
  if (const std::optional<double> peak = datasheet_peak_tflops(name, p))
    state.counters["pct_peak"] = 100.0 * state.counters["TFLOPS"].value / *peak;
}

}  // namespace bench
