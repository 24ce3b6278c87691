/// @file
/// Batch transforms on f32 images (B, C, H, W). The random ones draw from a Generator (one counter
/// block per call), so the same generator state gives the same result.
#pragma once

#include <vector>

#include "tensor/random.h"
#include "tensor/tensor.h"

namespace ember::data {

/// (x - mean[c]) / std[c] per channel; mean and std have C entries (or one, for every channel).
Tensor normalize(const Tensor& images, const std::vector<float>& mean, const std::vector<float>& std);
/// Pads each image by `padding` zeros on every side, then crops a `size` x `size` window at a random
/// place (one per image).
Tensor random_crop(const Tensor& images, int64_t size, int64_t padding, Generator& gen);
/// Mirrors each image left-right with probability p.
Tensor random_horizontal_flip(const Tensor& images, double p, Generator& gen);

}  // namespace ember::data
