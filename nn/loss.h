/// @file
/// Functional losses (torch.nn.functional semantics): reduction is "mean", "sum" or "none".
#pragma once

#include <string>

#include "tensor/ops.h"

namespace ember {

/// log_softmax over dim 1 of logits (N, C, d1...) (or (C) with a 0-dim target) and the negative
/// log likelihood of the integer class targets (N, d1...), fused. Targets equal to ignore_index
/// contribute 0 and are left out of the mean's denominator. With label_smoothing e the loss is
/// (1 - e) * nll + e * mean over classes of -log p.
Tensor cross_entropy(const Tensor& logits, const Tensor& target, const std::string& reduction = "mean",
                     int64_t ignore_index = -100, double label_smoothing = 0.0);

/// Negative log likelihood of log-probabilities (N, C, d1...) at the targets (N, d1...).
Tensor nll_loss(const Tensor& log_probs, const Tensor& target, const std::string& reduction = "mean",
                int64_t ignore_index = -100);

/// Mean squared error (a - b)^2, a and b broadcast.
Tensor mse_loss(const Tensor& a, const Tensor& b, const std::string& reduction = "mean");

}  // namespace ember
