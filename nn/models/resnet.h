// ResNet-18/34 (BasicBlock) and ResNet-50 (Bottleneck) with torchvision's structure and parameter
// names (conv1, bn1, layer1..4, downsample.0/1, fc), so torchvision state dicts load by name.
#pragma once

#include "nn/layers/conv.h"
#include "nn/layers/linear.h"
#include "nn/layers/normalization.h"

namespace ember::nn {

struct ResNetOptions {
  int64_t num_classes = 1000;
  int64_t in_channels = 3;
  bool small_input = false;  // 3x3 stride-1 stem without max-pool (CIFAR, 28x28 inputs)
};

class BasicBlock : public UnaryModule {
 public:
  static constexpr int64_t expansion = 1;
  BasicBlock(int64_t inplanes, int64_t planes, int64_t stride, std::shared_ptr<Sequential> downsample);
  std::string name() const override { return "BasicBlock"; }
  Tensor forward(const Tensor& x) override;
  std::shared_ptr<Conv2d> conv1, conv2;
  std::shared_ptr<BatchNorm2d> bn1, bn2;
  std::shared_ptr<Sequential> downsample;  // null when the shortcut is the identity
};

class Bottleneck : public UnaryModule {
 public:
  static constexpr int64_t expansion = 4;
  Bottleneck(int64_t inplanes, int64_t planes, int64_t stride, std::shared_ptr<Sequential> downsample);
  std::string name() const override { return "Bottleneck"; }
  Tensor forward(const Tensor& x) override;
  std::shared_ptr<Conv2d> conv1, conv2, conv3;
  std::shared_ptr<BatchNorm2d> bn1, bn2, bn3;
  std::shared_ptr<Sequential> downsample;
};

enum class ResNetBlock { basic, bottleneck };

class ResNet : public UnaryModule {
 public:
  ResNet(ResNetBlock block, std::array<int64_t, 4> layers, const ResNetOptions& opts = {});
  std::string name() const override { return "ResNet"; }
  Tensor forward(const Tensor& x) override;

  std::shared_ptr<Conv2d> conv1;
  std::shared_ptr<BatchNorm2d> bn1;
  std::shared_ptr<MaxPool2d> maxpool;  // null with small_input
  std::shared_ptr<Sequential> layer1, layer2, layer3, layer4;
  std::shared_ptr<AdaptiveAvgPool2d> avgpool;
  std::shared_ptr<Linear> fc;

 private:
  std::shared_ptr<Sequential> make_layer(ResNetBlock block, int64_t planes, int64_t blocks, int64_t stride);
  int64_t inplanes_ = 64;
};

std::shared_ptr<ResNet> resnet18(const ResNetOptions& opts = {});
std::shared_ptr<ResNet> resnet34(const ResNetOptions& opts = {});
std::shared_ptr<ResNet> resnet50(const ResNetOptions& opts = {});

}  // namespace ember::nn
