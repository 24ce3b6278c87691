/// @file
/// einsum: sums of products over labelled dims, written as an equation, as numpy.einsum and
/// torch.einsum read it.
#pragma once

#include <string_view>
#include <vector>

#include "tensor/tensor.h"

namespace ember {

/// The Einstein sum `equation` over `operands`, e.g. "ij,jk->ik" (matmul), "bij,bjk->bik" (bmm),
/// "ii->i" (the diagonal), "i,j->ij" (outer product), "...ij->...ji".
///
/// Each comma-separated term gives one operand's dims a letter (a-z, A-Z); "..." stands for the dims
/// the letters leave over, broadcast across operands. A letter repeated within a term takes that
/// term's diagonal; letters missing from the output are summed. Without "->" the output is the
/// ellipsis dims, then the letters that occur once, in alphabetical order (upper case first). Sizes
/// of one letter must agree or be 1 (broadcast). Operands contract left to right, each pair as one
/// batched matrix product, so gradients flow through ordinary ops.
///
/// ValueError for a malformed equation or an operand count that does not match it; ShapeError for an
/// operand whose rank does not fit its term or for sizes that disagree.
Tensor einsum(std::string_view equation, const std::vector<Tensor>& operands);

}  // namespace ember
