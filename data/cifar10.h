/// @file
/// CIFAR-10 binary batches (data_batch_1..5.bin, test_batch.bin): records of 1 label byte and
/// 3072 pixel bytes (3 planes of 32x32, R then G then B).
#pragma once

#include <string>

#include "data/data_file.h"
#include "tensor/tensor.h"

namespace ember::data {

/// Images with their class labels, as a file holds them.
struct LabeledImages {
  Tensor images;  ///< u8 (N, C, H, W)
  Tensor labels;  ///< i64 (N)
};

/// One batch file; DataError when its size is not a whole number of records or a label is not 0..9.
LabeledImages read_cifar10(const std::string& path);

}  // namespace ember::data
