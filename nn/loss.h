/// @file
/// Functional losses (torch.nn.functional semantics): reduction is "mean", "sum" or "none".
#pragma once

#include <string>

#include "tensor/ops.h"

namespace ember {

/// Cross entropy of logits (N, C, d1...) (or (C) with an unbatched target), as
/// torch.nn.functional.cross_entropy. Two kinds of target:
/// - class indices (N, d1...), integer: the loss at a position is -w[t] log p[t] with p =
///   softmax(logits) over dim 1 and w the class `weight` (all 1 when undefined). Targets equal to
///   ignore_index contribute 0; "mean" divides by the sum of w[t] over the other targets (their count
///   without a weight). With label_smoothing e: (1 - e) * that + e / C * sum over classes of
///   -w[c] log p[c], the smoothing term reduced with the same denominator.
/// - class probabilities, floating and of the logits' shape: -sum over classes of w[c] q[c] log p[c]
///   with q = (1 - e) * target + e / C; "mean" divides by the number of positions (N d1...).
///   ignore_index must stay negative (there is no class to ignore).
/// weight: undefined, or (C) of the logits' dtype and device. Without a weight and with index
/// targets the forward and backward are one fused kernel each; otherwise a composition of public ops
/// in f32 for 16-bit logits (the target gets a gradient too when it requires one).
Tensor cross_entropy(const Tensor& logits, const Tensor& target, const std::string& reduction = "mean",
                     int64_t ignore_index = -100, double label_smoothing = 0.0, const Tensor& weight = {});

/// Negative log likelihood of log-probabilities (N, C, d1...) at the integer targets (N, d1...):
/// -w[t] x[t], 0 where the target is ignore_index; "mean" divides by the sum of w[t] over the targets
/// kept (their count without a weight). weight: undefined, or (C) of the input's dtype and device.
Tensor nll_loss(const Tensor& log_probs, const Tensor& target, const std::string& reduction = "mean",
                int64_t ignore_index = -100, const Tensor& weight = {});

/// Mean squared error (a - b)^2, a and b broadcast.
Tensor mse_loss(const Tensor& a, const Tensor& b, const std::string& reduction = "mean");

}  // namespace ember
