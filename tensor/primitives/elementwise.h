// Elementwise primitives: Unary<Op> and Binary<Op> over the functor lists (and their traits) of
// tensor/elementwise_ops.h, plus where, casts/copies and fills.
#pragma once

#include "tensor/elementwise_ops.h"
#include "tensor/layout.h"
#include "tensor/primitive.h"
#include "tensor/scalar.h"

namespace ember {

// y = Op(x); the input dtype is already one Op accepts (the front end converts).
template <class Op>
class Unary final : public Primitive {
 public:
  static constexpr int kSaves = UnaryTraits<Op>::saves;
  explicit Unary(Op op = {}) : op_(op) {}
  const char* name() const override { return UnaryTraits<Op>::name; }
  std::vector<OutputSpec> infer(const std::vector<Tensor>& in) const {
    return {{in[0].shape(), in[0].dtype(), dense_layout_of(in[0])}};
  }
  EMBER_PRIMITIVE_KERNELS;
  EMBER_PRIMITIVE_VJP;
  const Op& op() const { return op_; }

 private:
  Op op_;
};

// z = Op(a, b) with broadcasting; a and b share one dtype (the front end promotes), or one is f16/bf16
// and the other a 0-dim f32 scalar that the kernel computes with in f32 (PyTorch's opmath).
template <class Op>
class Binary final : public Primitive {
 public:
  static constexpr bool kDifferentiable = BinaryTraits<Op>::kind != BinaryKind::Compare;
  static constexpr int kSaves = BinaryTraits<Op>::saves;
  const char* name() const override { return BinaryTraits<Op>::name; }
  std::vector<OutputSpec> infer(const std::vector<Tensor>& in) const;
  EMBER_PRIMITIVE_KERNELS;
  EMBER_PRIMITIVE_VJP;
};

// out = condition ? a : b, all three broadcast; a and b share one dtype, condition is bool.
class Where final : public Primitive {
 public:
  static constexpr int kSaves = kSaveInputs;
  static constexpr unsigned kSavedInputMask = 1u;  // the vjp needs only the condition
  const char* name() const override { return "where"; }
  std::vector<OutputSpec> infer(const std::vector<Tensor>& in) const;
  EMBER_PRIMITIVE_KERNELS;
  EMBER_PRIMITIVE_VJP;
};

// A copy converted to `dtype`: contiguous (contiguous(), clone()), or in the input's dim order when
// it is dense (to(dtype): a channels-last activation cast by autocast stays channels-last).
class Cast final : public Primitive {
 public:
  enum class Layout { contiguous, like_input };
  explicit Cast(DType dtype, Layout layout = Layout::contiguous) : dtype_(dtype), layout_(layout) {}
  const char* name() const override { return "to"; }
  std::vector<OutputSpec> infer(const std::vector<Tensor>& in) const {
    return {{in[0].shape(), dtype_, layout_ == Layout::like_input ? dense_layout_of(in[0]) : Strides{}}};
  }
  EMBER_PRIMITIVE_KERNELS;
  EMBER_PRIMITIVE_VJP;

 private:
  DType dtype_;
  Layout layout_;
};

// In place: self = src broadcast and converted to self's dtype (copy_). Inputs {self, src}.
class CopyInto final : public Primitive {
 public:
  const char* name() const override { return "copy"; }
  std::vector<OutputSpec> infer(const std::vector<Tensor>& in) const;
  EMBER_PRIMITIVE_KERNELS;
  EMBER_PRIMITIVE_VJP;
};

// In place: every element of self = value (fill_, zeros, ones, full). Inputs {self}.
class Fill final : public Primitive {
 public:
  static constexpr bool kWritesOverlappingSelf = true;  // one value everywhere: an expanded self is fine
  explicit Fill(Scalar value) : value_(value) {}
  const char* name() const override { return "fill"; }
  std::vector<OutputSpec> infer(const std::vector<Tensor>& in) const { return {{in[0].shape(), in[0].dtype()}}; }
  EMBER_PRIMITIVE_KERNELS;
  EMBER_PRIMITIVE_VJP;

 private:
  Scalar value_;
};

}  // namespace ember
