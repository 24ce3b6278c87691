// Shared shape work of the CPU reductions: the input rearranged so that each output element
// reduces one contiguous row.
#pragma once

#include "tensor/tensor.h"

namespace ember::cpu {

struct ReductionRows {
  Tensor data;          // contiguous, reduced dims last
  int64_t rows = 0;     // = number of output elements
  int64_t row_len = 0;  // elements reduced into each output
};

// `dims` sorted and unique; empty means every dim.
ReductionRows reduction_rows(const Tensor& x, const Shape& dims);

}  // namespace ember::cpu
