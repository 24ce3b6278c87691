/// @file
/// Small models: MLP (Linear-ReLU stacks) and SmallCNN (for 1x28x28 inputs such as Fashion-MNIST).
#pragma once

#include <vector>

#include "nn/layers/conv.h"
#include "nn/layers/linear.h"
#include "nn/layers/normalization.h"

namespace ember::nn {

/// Linear(in, h0) ReLU Linear(h0, h1) ReLU ... Linear(h_last, out); children "0", "1", ... as a Sequential.
class MLP : public Sequential {
 public:
  /// Hidden widths `hidden`, in order.
  MLP(int64_t in_features, const std::vector<int64_t>& hidden, int64_t out_features);
  std::string name() const override { return "MLP"; }
};

/// conv(3x3, 32)-BN-ReLU-maxpool(2), conv(3x3, 64)-BN-ReLU-maxpool(2), fc1(64*7*7 -> 128), ReLU, fc2.
class SmallCNN : public UnaryModule {
 public:
  /// For square images of image_size (ValueError unless a multiple of 4).
  explicit SmallCNN(int64_t num_classes = 10, int64_t in_channels = 1, int64_t image_size = 28);
  std::string name() const override { return "SmallCNN"; }

  /// the two 3x3 convolutions @{
  std::shared_ptr<Conv2d> conv1, conv2;
  /// @}
  /// their batch norms @{
  std::shared_ptr<BatchNorm2d> bn1, bn2;
  /// @}
  std::shared_ptr<MaxPool2d> pool;  ///< 2x2, after each block
  /// the classifier: to 128 features, then to num_classes @{
  std::shared_ptr<Linear> fc1, fc2;
  /// @}
 protected:
  Tensor forward(const Tensor& x) override;  ///< (N, in_channels, image_size, image_size) -> (N, num_classes) logits
  /// replace_module: a child may become another module of its type.
  void rebind_child(const std::string& name, const std::shared_ptr<Module>& m) override;
};

}  // namespace ember::nn
