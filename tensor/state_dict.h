/// @file
/// A flat, ordered map from dotted names to tensors: what modules, optimizers and schedulers save
/// and load (and what a safetensors file holds). Scalars are 0-dim tensors.
#pragma once

#include <map>
#include <string>

#include "tensor/tensor.h"

namespace ember {

using StateDict = std::map<std::string, Tensor>;  ///< Tensors by dotted name ("layer1.0.conv1.weight"), sorted by name.

}  // namespace ember
