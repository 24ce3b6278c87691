/// @file
/// IDX files (the MNIST / Fashion-MNIST format), plain or gzip-compressed, read into tensors. Every
/// check failure raises DataError naming the file and what is wrong: a bad file never crashes.
#pragma once

#include <string>

#include "data/data_file.h"
#include "tensor/tensor.h"

namespace ember::data {

/// An IDX file of unsigned bytes (type code 0x08) as a u8 tensor shaped as its header says.
/// `expected_ndim` > 0 requires that many dims (magic 0x0000080N).
Tensor read_idx(const std::string& path, int expected_ndim = 0);
/// The images of an IDX image file (magic 0x00000803) as u8 (N, H, W).
Tensor read_idx_images(const std::string& path);
/// The labels of an IDX label file (magic 0x00000801) as i64 (N).
Tensor read_idx_labels(const std::string& path);

}  // namespace ember::data
