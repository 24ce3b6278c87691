// The precision table of the GEMM and conv benchmarks, and the one place that sets ember's TF32 switches.
#include "bench/precision.h"

#include "tensor/cuda_settings.h"

namespace bench {

const std::vector<Precision>& all_precisions() {
  static const std::vector<Precision> all = {Precision::f32, Precision::tf32, Precision::f16, Precision::bf16};
  return all;
}

const char* precision_name(Precision p) {
  switch (p) {
    case Precision::f32: return "f32";
    case Precision::tf32: return "tf32";
    case Precision::f16: return "f16";
    case Precision::bf16: return "bf16";
  }
  return "?";
}

ember::DType precision_dtype(Precision p) {
  switch (p) {
    case Precision::f16: return ember::DType::f16;
    case Precision::bf16: return ember::DType::bf16;
    default: return ember::DType::f32;
  }
}

void set_ember_precision(Precision p) {
  const bool tf32 = p == Precision::tf32;
  ember::cuda::set_conv_allow_tf32(tf32);
  ember::cuda::set_matmul_allow_tf32(tf32);
}

}  // namespace bench
