/// @file
/// Sorting along a dim: sort, argsort and topk, as PyTorch's (stable: equal elements keep their
/// order; NaN sorts above every number). The values are gathered from the input, so gradients flow
/// to the elements they came from.
#pragma once

#include "tensor/ops.h"

namespace ember {

/// x sorted along dim, ascending or descending, and where each value was (torch.sort with
/// stable=True). IndexError for a dim out of range.
ValuesIndices sort(const Tensor& x, int64_t dim = -1, bool descending = false);
/// The indices that sort x along dim (torch.argsort with stable=True).
Tensor argsort(const Tensor& x, int64_t dim = -1, bool descending = false);
/// The k largest (or, with largest = false, smallest) elements along dim, in order, and their
/// indices (torch.topk; ties keep the lower index first). IndexError when k is not in [0, size of dim].
ValuesIndices topk(const Tensor& x, int64_t k, int64_t dim = -1, bool largest = true);

}  // namespace ember
