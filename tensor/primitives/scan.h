// The primitive behind cumsum (tensor/scan.cpp).
#pragma once

#include "tensor/primitive.h"

namespace ember {

// The inclusive cumulative sum along dim, from the first element (or, reverse, from the last), in
// the input's dtype: 16-bit floats accumulate in f32, f32 in f64 on the CPU and f32 on CUDA, f64 in
// f64, integers in i64 (wrapping). Its vjp is the cumulative sum the other way round.
class CumulativeSum final : public Primitive {
 public:
  CumulativeSum(int dim, bool reverse) : dim_(dim), reverse_(reverse) {}
  const char* name() const override { return "cumsum"; }
  std::vector<OutputSpec> infer(const std::vector<Tensor>& in) const { return {{in[0].shape(), in[0].dtype()}}; }
  EMBER_PRIMITIVE_KERNELS;
  EMBER_PRIMITIVE_VJP;

 private:
  int dim_;
  bool reverse_;
};

}  // namespace ember
