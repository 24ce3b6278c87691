// Matrix multiplication and the softmax family.
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
