// Memory layouts of fresh outputs. An elementwise op's output is stored in the dim order of its
// first input of the output's shape that is dense (PyTorch's preserve_format): a channels-last
// activation gives a channels-last result, so a network fed NHWC stays NHWC through its ReLUs,
// residual adds and casts instead of falling back to NCHW after the first one.
#pragma once

#include <vector>

#include "tensor/tensor.h"

namespace ember {

/// Whether t's elements fill a block of memory exactly once in some order of its dims (a
/// contiguous tensor, or any permutation of one). Size-1 dims' strides never matter.
bool is_non_overlapping_and_dense(const Tensor& t);

/// The strides of a fresh dense tensor of t's shape with t's dim order, when t is dense and not
/// contiguous; empty (meaning row-major) otherwise.
Strides dense_layout_of(const Tensor& t);

/// True when x is 4-D (N, C, H, W) with NHWC strides and is not also NCHW-contiguous.
bool is_channels_last(const Tensor& x);

/// x stored NHWC (PyTorch's x.contiguous(memory_format=torch.channels_last)): x itself when it
/// already is, else a copy; differentiable. ShapeError unless x is 4-D.
Tensor to_channels_last(const Tensor& x);

/// The layout of an elementwise result of shape `out`: that of the first input of shape `out` which
/// is dense (empty when it is contiguous or no input qualifies: the result is then row-major).
Strides elementwise_output_layout(const std::vector<Tensor>& inputs, const Shape& out);

}  // namespace ember
