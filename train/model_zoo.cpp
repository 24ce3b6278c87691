#include "train/model_zoo.h"

#include "nn/nn.h"

namespace ember::train {

namespace {
constexpr int64_t kImageNetStemFrom = 64;  // image size from which the ImageNet-sized layout is used
}  // namespace

const std::vector<std::string>& model_names() {
  static const std::vector<std::string> names = {"mlp",      "cnn",      "resnet18",  "resnet34",
                                                 "resnet50", "vit_tiny", "vit_small", "vit_base"};
  return names;
}

std::shared_ptr<nn::UnaryModule> make_model(const std::string& name, const ImageShape& shape) {
  if (name == "mlp") {
    auto model = std::make_shared<nn::Sequential>();
    model->push_back(std::make_shared<nn::Flatten>());
    model->push_back(std::make_shared<nn::MLP>(shape.channels * shape.size * shape.size, std::vector<int64_t>{256, 128},
                                               shape.classes));
    return model;
  }
  if (name == "cnn") return std::make_shared<nn::SmallCNN>(shape.classes, shape.channels, shape.size);
  // Small images (Fashion-MNIST, CIFAR) would shrink to nothing under ImageNet's 4x downsampling stem.
  const bool small = shape.size < kImageNetStemFrom;
  const nn::ResNetOptions resnet{shape.classes, shape.channels, /*small_input=*/small};
  if (name == "resnet18") return nn::resnet18(resnet);
  if (name == "resnet34") return nn::resnet34(resnet);
  if (name == "resnet50") return nn::resnet50(resnet);
  if (name == "vit_tiny" || name == "vit_small" || name == "vit_base") {
    // 7x7 patches of a 28x28 image, 8x8 of 32x32; ViT-B/16's 14x14 of 224x224.
    const int64_t patch = small ? 4 : 16;
    if (shape.size % patch != 0)
      throw ValueError("make_model: " + name + " needs an image size divisible by " + std::to_string(patch) + ", got " +
                       std::to_string(shape.size));
    nn::ViTOptions vit;
    vit.image_size = shape.size;
    vit.patch_size = patch;
    vit.in_channels = shape.channels;
    vit.num_classes = shape.classes;
    if (name == "vit_tiny") return nn::vit_tiny(vit);
    return name == "vit_small" ? nn::vit_small(vit) : nn::vit_base(vit);
  }
  std::string known;
  for (const auto& n : model_names()) known += (known.empty() ? "" : ", ") + n;
  throw ValueError("make_model: unknown model \"" + name + "\" (known: " + known + ")");
}

}  // namespace ember::train
