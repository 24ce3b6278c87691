// MLP and SmallCNN.
#include "nn/models/mlp.h"

#include "tensor/error.h"

namespace ember::nn {

MLP::MLP(int64_t in, const std::vector<int64_t>& hidden, int64_t out) {
  int64_t prev = in;
  for (int64_t h : hidden) {
    push_back(std::make_shared<Linear>(prev, h));
    push_back(std::make_shared<ReLU>());
    prev = h;
  }
  push_back(std::make_shared<Linear>(prev, out));
}

SmallCNN::SmallCNN(int64_t num_classes, int64_t in_channels, int64_t image_size) {
  if (image_size % 4 != 0)
    throw ValueError("SmallCNN: image_size must be a multiple of 4, got " + std::to_string(image_size));
  conv1 = register_module("conv1", std::make_shared<Conv2d>(in_channels, 32, 3, 1, 1, false));
  bn1 = register_module("bn1", std::make_shared<BatchNorm2d>(32));
  conv2 = register_module("conv2", std::make_shared<Conv2d>(32, 64, 3, 1, 1, false));
  bn2 = register_module("bn2", std::make_shared<BatchNorm2d>(64));
  pool = register_module("pool", std::make_shared<MaxPool2d>(2));
  const int64_t s = image_size / 4;
  fc1 = register_module("fc1", std::make_shared<Linear>(64 * s * s, 128));
  fc2 = register_module("fc2", std::make_shared<Linear>(128, num_classes));
}

Tensor SmallCNN::forward(const Tensor& x) {
  Tensor y = (*pool)(relu((*bn1)((*conv1)(x))));
  y = (*pool)(relu((*bn2)((*conv2)(y))));
  return (*fc2)(relu((*fc1)(flatten(y, 1))));
}

void SmallCNN::rebind_child(const std::string& n, const std::shared_ptr<Module>& m) {
  if (!(rebind(n, "conv1", m, conv1) || rebind(n, "bn1", m, bn1) || rebind(n, "conv2", m, conv2) ||
        rebind(n, "bn2", m, bn2) || rebind(n, "pool", m, pool) || rebind(n, "fc1", m, fc1) ||
        rebind(n, "fc2", m, fc2)))
    Module::rebind_child(n, m);
}

}  // namespace ember::nn
