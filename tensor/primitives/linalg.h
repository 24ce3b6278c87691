// Matrix multiplication, linear (a GEMM with a bias epilogue) and the softmax family.
#pragma once

#include "tensor/primitive.h"

namespace ember {

// Inputs {a (..., n, k), b (..., k, m)} of one dtype, batch dims broadcast: out (..., n, m).
class Matmul final : public Primitive {
 public:
  static constexpr int kSaves = kSaveInputs;
  const char* name() const override { return "matmul"; }
  std::vector<OutputSpec> infer(const std::vector<Tensor>& in) const;
  EMBER_PRIMITIVE_KERNELS;
  EMBER_PRIMITIVE_VJP;
};

// The product of all dims of s but the last: the rows of a (..., k) operand seen as one matrix.
int64_t leading_rows(const Shape& s);

// Inputs {x (..., in), w (out, in)} or {x, w, b (out)} of one dtype: out (..., out) = x w^T + b. One
// GEMM over the flattened leading dims with the bias added in its output pass (cuBLASLt's bias
// epilogue on CUDA). Its vjp needs x and w only.
class Linear final : public Primitive {
 public:
  static constexpr int kSaves = kSaveInputs;
  static constexpr unsigned kSavedInputMask = 0b011u;
  const char* name() const override { return "linear"; }
  std::vector<OutputSpec> infer(const std::vector<Tensor>& in) const;
  EMBER_PRIMITIVE_KERNELS;
  EMBER_PRIMITIVE_VJP;
};

// softmax (log = false) or log_softmax (log = true) along dim, computed max-shifted.
class Softmax final : public Primitive {
 public:
  static constexpr int kSaves = kSaveOutputs;
  Softmax(int dim, bool log) : dim_(dim), log_(log) {}
  const char* name() const override { return log_ ? "log_softmax" : "softmax"; }
  std::vector<OutputSpec> infer(const std::vector<Tensor>& in) const { return {{in[0].shape(), in[0].dtype()}}; }
  EMBER_PRIMITIVE_KERNELS;
  EMBER_PRIMITIVE_VJP;

 private:
  int dim_;
  bool log_;
};

}  // namespace ember
