/// @file
/// ResNet-18/34 (BasicBlock) and ResNet-50 (Bottleneck) with torchvision's structure and parameter
/// names (conv1, bn1, layer1..4, downsample.0/1, fc), so torchvision state dicts load by name.
#pragma once

#include "nn/layers/conv.h"
#include "nn/layers/linear.h"
#include "nn/layers/normalization.h"

namespace ember::nn {

/// What varies between the ResNets of one depth.
struct ResNetOptions {
  int64_t num_classes = 1000;  ///< outputs of fc
  int64_t in_channels = 3;     ///< channels of the input images
  bool small_input = false;    ///< 3x3 stride-1 stem without max-pool (CIFAR, 28x28 inputs)
};

/// ResNet-18/34's block: two 3x3 convs with batch norm, added to the shortcut, then ReLU.
class BasicBlock : public UnaryModule {
 public:
  static constexpr int64_t expansion = 1;  ///< output channels / planes
  /// From inplanes to planes channels; `stride` on the first conv; downsample (1x1 conv and batch norm)
  /// reshapes the shortcut, or null.
  BasicBlock(int64_t inplanes, int64_t planes, int64_t stride, std::shared_ptr<Sequential> downsample);
  std::string name() const override { return "BasicBlock"; }
  /// the two 3x3 convolutions @{
  std::shared_ptr<Conv2d> conv1, conv2;
  /// @}
  /// their batch norms @{
  std::shared_ptr<BatchNorm2d> bn1, bn2;
  /// @}
  std::shared_ptr<Sequential> downsample;  ///< null when the shortcut is the identity
 protected:
  Tensor forward(const Tensor& x) override;
  /// replace_module: a child may become another module of its type.
  void rebind_child(const std::string& name, const std::shared_ptr<Module>& m) override;
};

/// ResNet-50's block: 1x1 down, 3x3 (with the stride, torchvision's v1.5), 1x1 up to 4 x planes.
class Bottleneck : public UnaryModule {
 public:
  static constexpr int64_t expansion = 4;  ///< output channels / planes
  /// From inplanes to 4 x planes channels; downsample as BasicBlock's.
  Bottleneck(int64_t inplanes, int64_t planes, int64_t stride, std::shared_ptr<Sequential> downsample);
  std::string name() const override { return "Bottleneck"; }
  /// 1x1, 3x3, 1x1 @{
  std::shared_ptr<Conv2d> conv1, conv2, conv3;
  /// @}
  /// their batch norms @{
  std::shared_ptr<BatchNorm2d> bn1, bn2, bn3;
  /// @}
  std::shared_ptr<Sequential> downsample;  ///< null when the shortcut is the identity
 protected:
  Tensor forward(const Tensor& x) override;
  /// replace_module: a child may become another module of its type.
  void rebind_child(const std::string& name, const std::shared_ptr<Module>& m) override;
};

/// The block a ResNet stacks: BasicBlock or Bottleneck.
enum class ResNetBlock { basic, bottleneck };

/// torchvision's ResNet: stem (conv1, bn1, ReLU, maxpool), four stages layer1..4, global average
/// pool, fc.
class ResNet : public UnaryModule {
 public:
  /// `layers` blocks per stage ({2, 2, 2, 2} for ResNet-18).
  ResNet(ResNetBlock block, std::array<int64_t, 4> layers, const ResNetOptions& opts = {});
  std::string name() const override { return "ResNet"; }

  std::shared_ptr<Conv2d> conv1;       ///< the stem: 7x7 stride 2, or 3x3 stride 1 with small_input
  std::shared_ptr<BatchNorm2d> bn1;    ///< the stem's batch norm
  std::shared_ptr<MaxPool2d> maxpool;  ///< null with small_input
  /// the four stages, at 64, 128, 256 and 512 planes @{
  std::shared_ptr<Sequential> layer1, layer2, layer3, layer4;
  /// @}
  std::shared_ptr<AdaptiveAvgPool2d> avgpool;  ///< global average pool to 1x1
  std::shared_ptr<Linear> fc;                  ///< the classifier

 private:
  std::shared_ptr<Sequential> make_layer(ResNetBlock block, int64_t planes, int64_t blocks, int64_t stride);
  int64_t inplanes_ = 64;
 protected:
  Tensor forward(const Tensor& x) override;  ///< (N, in_channels, H, W) -> (N, num_classes) logits
  /// replace_module: a child may become another module of its type.
  void rebind_child(const std::string& name, const std::shared_ptr<Module>& m) override;
};

std::shared_ptr<ResNet> resnet18(const ResNetOptions& opts = {});  ///< ResNet-18: BasicBlocks {2, 2, 2, 2}.
std::shared_ptr<ResNet> resnet34(const ResNetOptions& opts = {});  ///< ResNet-34: BasicBlocks {3, 4, 6, 3}.
std::shared_ptr<ResNet> resnet50(const ResNetOptions& opts = {});  ///< ResNet-50: Bottlenecks {3, 4, 6, 3}.

}  // namespace ember::nn
