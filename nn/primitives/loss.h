// Fused loss primitives. CPU kernels in cpu/loss.cpp, vjps in nn/loss.cpp.
#pragma once

#include "tensor/primitive.h"

namespace ember {

enum class Reduction { none, mean, sum };

// Inputs {logits (N, C, d1...) contiguous, target (N, d1...) integer}: log_softmax over dim 1 and
// the (label-smoothed) negative log likelihood in one pass. Output: per-element losses (none) or
// their sum / mean over the targets not equal to ignore_index.
class CrossEntropy final : public Primitive {
 public:
  static constexpr int kSaves = kSaveInputs;
  CrossEntropy(Reduction reduction, int64_t ignore_index, double label_smoothing)
      : reduction_(reduction), ignore_index_(ignore_index), label_smoothing_(label_smoothing) {}
  const char* name() const override { return "cross_entropy"; }
  std::vector<OutputSpec> infer(const std::vector<Tensor>& in) const;
  EMBER_PRIMITIVE_KERNELS;
  EMBER_PRIMITIVE_VJP;

 private:
  Reduction reduction_;
  int64_t ignore_index_;
  double label_smoothing_;
};

// The backward kernel of CrossEntropy (first order; the vjp composes public ops when the
// backward is recorded). Inputs {logits, target (as CrossEntropy's), g (its output's
// cotangent)}; output dlogits (logits' shape, contiguous).
class CrossEntropyBackward final : public Primitive {
 public:
  static constexpr bool kDifferentiable = false;
  CrossEntropyBackward(Reduction reduction, int64_t ignore_index, double label_smoothing)
      : reduction_(reduction), ignore_index_(ignore_index), label_smoothing_(label_smoothing) {}
  const char* name() const override { return "cross_entropy_backward"; }
  std::vector<OutputSpec> infer(const std::vector<Tensor>& in) const { return {{in[0].shape(), in[0].dtype()}}; }
  EMBER_PRIMITIVE_KERNELS;

 private:
  Reduction reduction_;
  int64_t ignore_index_;
  double label_smoothing_;
};

}  // namespace ember
