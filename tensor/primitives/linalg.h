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
  void eval_cpu(const std::vector<Tensor>& in, std::vector<Tensor>& out);
  void eval_cuda(const std::vector<Tensor>& in, std::vector<Tensor>& out);
  std::vector<Tensor> vjp(const std::vector<Tensor>& cotangents, const std::vector<Tensor>& inputs,
                          const std::vector<Tensor>& outputs) override;
};

// softmax (log = false) or log_softmax (log = true) along dim, computed max-shifted.
class Softmax final : public Primitive {
 public:
  static constexpr int kSaves = kSaveOutputs;
  Softmax(int dim, bool log) : dim_(dim), log_(log) {}
  const char* name() const override { return log_ ? "log_softmax" : "softmax"; }
  std::vector<OutputSpec> infer(const std::vector<Tensor>& in) const { return {{in[0].shape(), in[0].dtype()}}; }
  void eval_cpu(const std::vector<Tensor>& in, std::vector<Tensor>& out);
  void eval_cuda(const std::vector<Tensor>& in, std::vector<Tensor>& out);
  std::vector<Tensor> vjp(const std::vector<Tensor>& cotangents, const std::vector<Tensor>& inputs,
                          const std::vector<Tensor>& outputs) override;

 private:
  int dim_;
  bool log_;
};

}  // namespace ember
