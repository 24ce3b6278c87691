/// @file
/// t.data = src, as PyTorch's Tensor.set_data: t keeps its identity (every handle to it, a module's
/// member or an optimizer's list, sees the new elements) and its autograd flags.
#pragma once

#include "tensor/tensor.h"

namespace ember {

/// Points t at src's elements (storage, offset, shape, strides, dtype, and so device). t's gradient
/// is dropped when it no longer fits (another shape, dtype or device); nothing happens when src is t.
void set_data(Tensor& t, const Tensor& src);

}  // namespace ember
