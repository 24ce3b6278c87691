// The kernel precisions the GEMM and conv benchmarks run at (f32, tf32, f16, bf16): the dtype of
// the tensors, whether TF32 tensor cores are allowed, and the switches that make ember follow.
#pragma once

#include <string>
#include <vector>

#include "tensor/dtype.h"

namespace bench {

enum class Precision { f32, tf32, f16, bf16 };

const std::vector<Precision>& all_precisions();
const char* precision_name(Precision p);  // as in case names: "f32", "tf32", "f16", "bf16"
ember::DType precision_dtype(Precision p);  // tf32 data is f32

// Sets ember's process-wide TF32 switches (conv and matmul) for p: on for tf32, off otherwise.
void set_ember_precision(Precision p);

}  // namespace bench
