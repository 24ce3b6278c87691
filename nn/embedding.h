/// @file
/// Functional embedding lookup.
#pragma once

#include <optional>

#include "tensor/ops.h"

namespace ember {

/// Rows of weight (V, D) at integer indices of any shape: output (*indices.shape, D). Rows looked
/// up at padding_idx (if given; negative counts from V) receive no gradient.
Tensor embedding(const Tensor& weight, const Tensor& indices, std::optional<int64_t> padding_idx = {});

}  // namespace ember
