// The models the training programs and benchmarks build by name, sized for an image data set.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "nn/module.h"

namespace ember::train {

struct ImageShape {
  int64_t channels;
  int64_t size;  // square images: height = width
  int64_t classes;
};

// "mlp", "cnn", "resnet18", "resnet34", "resnet50", "vit_tiny", "vit_small".
const std::vector<std::string>& model_names();

// mlp: Flatten then Linear(C*H*W, 256)-ReLU-Linear(256, 128)-ReLU-Linear(128, classes);
// cnn: nn::SmallCNN; resnet*: torchvision's ResNets with the 3x3 stride-1 stem for small images;
// vit_*: patch 4 (the image size must divide by 4). ValueError for another name.
std::shared_ptr<nn::UnaryModule> make_model(const std::string& name, const ImageShape& shape);

}  // namespace ember::train
