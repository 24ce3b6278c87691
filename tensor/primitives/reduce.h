// Reduction primitives over a set of dims (sorted, unique, wrapped; empty = every dim).
#pragma once

#include <optional>

#include "tensor/primitive.h"

namespace ember {

// The output shape of reducing `dims` of `shape` (kept as size 1 when keepdim).
Shape reduced_shape(const Shape& shape, const Shape& dims, bool keepdim);

// Sum; integer and bool inputs sum to i64 (PyTorch), floats accumulate in double on the CPU (float
// on CUDA; double for f64). A floating input may be summed into a wider floating `dtype` (f16 into
// f32): the values converting the input first would give, without the converted copy.
class Sum final : public Primitive {
 public:
  Sum(Shape dims, bool keepdim, std::optional<DType> dtype = {}) : dims_(dims), keepdim_(keepdim), dtype_(dtype) {}
  const char* name() const override { return "sum"; }
  std::vector<OutputSpec> infer(const std::vector<Tensor>& in) const;
  EMBER_PRIMITIVE_KERNELS;
  EMBER_PRIMITIVE_VJP;

 private:
  Shape dims_;
  bool keepdim_;
  std::optional<DType> dtype_;
};

// Product over dims; same dtype rules as Sum.
class Prod final : public Primitive {
 public:
  static constexpr int kSaves = kSaveInputs | kSaveOutputs;
  Prod(Shape dims, bool keepdim, std::optional<DType> dtype = {}) : dims_(dims), keepdim_(keepdim), dtype_(dtype) {}
  const char* name() const override { return "prod"; }
  std::vector<OutputSpec> infer(const std::vector<Tensor>& in) const;
  EMBER_PRIMITIVE_KERNELS;
  EMBER_PRIMITIVE_VJP;

 private:
  Shape dims_;
  bool keepdim_;
  std::optional<DType> dtype_;
};

// amax / amin over dims (NaN propagates); the gradient is shared evenly among tied maxima.
class Extremum final : public Primitive {
 public:
  static constexpr int kSaves = kSaveInputs | kSaveOutputs;
  Extremum(Shape dims, bool keepdim, bool is_max) : dims_(dims), keepdim_(keepdim), is_max_(is_max) {}
  const char* name() const override { return is_max_ ? "amax" : "amin"; }
  std::vector<OutputSpec> infer(const std::vector<Tensor>& in) const;
  EMBER_PRIMITIVE_KERNELS;
  EMBER_PRIMITIVE_VJP;

 private:
  Shape dims_;
  bool keepdim_, is_max_;
};

// argmax / argmin along one dim (i64, first occurrence; NaN counts as the extreme). Not differentiable.
class ArgExtremum final : public Primitive {
 public:
  static constexpr bool kDifferentiable = false;
  ArgExtremum(int dim, bool keepdim, bool is_max) : dim_(dim), keepdim_(keepdim), is_max_(is_max) {}
  const char* name() const override { return is_max_ ? "argmax" : "argmin"; }
  std::vector<OutputSpec> infer(const std::vector<Tensor>& in) const;
  EMBER_PRIMITIVE_KERNELS;

 private:
  int dim_;
  bool keepdim_, is_max_;
};

}  // namespace ember
