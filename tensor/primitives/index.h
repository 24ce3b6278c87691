// Joining and indexing primitives: cat, index_select / index_add, gather / scatter_add.
#pragma once

#include "tensor/primitive.h"

namespace ember {

// Inputs of one dtype joined along dim (other dims equal).
class Cat final : public Primitive {
 public:
  explicit Cat(int dim) : dim_(dim) {}
  const char* name() const override { return "cat"; }
  std::vector<OutputSpec> infer(const std::vector<Tensor>& in) const;
  EMBER_PRIMITIVE_KERNELS;
  EMBER_PRIMITIVE_VJP;

 private:
  int dim_;
};

// Inputs {x, index (1-D integer)}: out.select(dim, i) = x.select(dim, index[i]).
class IndexSelect final : public Primitive {
 public:
  static constexpr int kSaves = kSaveInputs;
  explicit IndexSelect(int dim) : dim_(dim) {}
  const char* name() const override { return "index_select"; }
  std::vector<OutputSpec> infer(const std::vector<Tensor>& in) const;
  EMBER_PRIMITIVE_KERNELS;
  EMBER_PRIMITIVE_VJP;

 private:
  int dim_;
};

// Inputs {self, index (1-D integer), src}: out = self; out.select(dim, index[i]) += src.select(dim, i).
class IndexAdd final : public Primitive {
 public:
  static constexpr int kSaves = kSaveInputs;
  explicit IndexAdd(int dim) : dim_(dim) {}
  const char* name() const override { return "index_add"; }
  std::vector<OutputSpec> infer(const std::vector<Tensor>& in) const;
  EMBER_PRIMITIVE_KERNELS;
  EMBER_PRIMITIVE_VJP;

 private:
  int dim_;
};

// Inputs {x, index (integer, same rank)}: out[i][j] = x[index[i][j]][j] for dim 0, and so on.
class Gather final : public Primitive {
 public:
  static constexpr int kSaves = kSaveInputs;
  explicit Gather(int dim) : dim_(dim) {}
  const char* name() const override { return "gather"; }
  std::vector<OutputSpec> infer(const std::vector<Tensor>& in) const;
  EMBER_PRIMITIVE_KERNELS;
  EMBER_PRIMITIVE_VJP;

 private:
  int dim_;
};

// Inputs {self, index, src}: out = self; out[index[i][j]][j] += src[i][j] for dim 0, and so on.
class ScatterAdd final : public Primitive {
 public:
  static constexpr int kSaves = kSaveInputs;
  explicit ScatterAdd(int dim) : dim_(dim) {}
  const char* name() const override { return "scatter_add"; }
  std::vector<OutputSpec> infer(const std::vector<Tensor>& in) const;
  EMBER_PRIMITIVE_KERNELS;
  EMBER_PRIMITIVE_VJP;

 private:
  int dim_;
};

}  // namespace ember
