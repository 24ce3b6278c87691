/// @file
/// The models the training programs and benchmarks build by name, sized for an image data set.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "nn/module.h"

namespace ember::train {

/// The images a model is built for.
struct ImageShape {
  int64_t channels;  ///< channels per image
  int64_t size;      ///< square images: height = width
  int64_t classes;   ///< number of classes
};

/// "mlp", "cnn", "resnet18", "resnet34", "resnet50", "vit_tiny", "vit_small", "vit_base".
const std::vector<std::string>& model_names();

/// mlp: Flatten then Linear(C*H*W, 256)-ReLU-Linear(256, 128)-ReLU-Linear(128, classes);
/// cnn: nn::SmallCNN; resnet*: torchvision's ResNets, with a 3x3 stride-1 stem and no max pool for
/// images under 64 pixels (CIFAR, Fashion-MNIST), ImageNet's 7x7 stride-2 stem and max pool from 64;
/// vit_*: patch 4 under 64 pixels, 16 from 64 (ViT-B/16 at 224); the image size must divide by it.
/// ValueError for another name.
std::shared_ptr<nn::UnaryModule> make_model(const std::string& name, const ImageShape& shape);

}  // namespace ember::train
