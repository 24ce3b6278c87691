// ResNet as torchvision builds it (v1.5: the stride sits on the 3x3 conv of a Bottleneck).
#include "nn/models/resnet.h"

#include <functional>

#include "nn/init.h"

namespace ember::nn {

namespace {
std::shared_ptr<Conv2d> conv3x3(int64_t in, int64_t out, int64_t stride = 1) {
  return std::make_shared<Conv2d>(in, out, 3, stride, 1, false);
}
std::shared_ptr<Conv2d> conv1x1(int64_t in, int64_t out, int64_t stride = 1) {
  return std::make_shared<Conv2d>(in, out, 1, stride, 0, false);
}
}  // namespace

BasicBlock::BasicBlock(int64_t inplanes, int64_t planes, int64_t stride, std::shared_ptr<Sequential> ds) {
  conv1 = register_module("conv1", conv3x3(inplanes, planes, stride));
  bn1 = register_module("bn1", std::make_shared<BatchNorm2d>(planes));
  conv2 = register_module("conv2", conv3x3(planes, planes));
  bn2 = register_module("bn2", std::make_shared<BatchNorm2d>(planes));
  if (ds) downsample = register_module("downsample", std::move(ds));
}

Tensor BasicBlock::forward(const Tensor& x) {
  Tensor out = relu((*bn1)((*conv1)(x)));
  out = (*bn2)((*conv2)(out));
  return relu(out + (downsample ? (*downsample)(x) : x));
}

void BasicBlock::rebind_child(const std::string& n, const std::shared_ptr<Module>& m) {
  if (!(rebind(n, "conv1", m, conv1) || rebind(n, "bn1", m, bn1) || rebind(n, "conv2", m, conv2) ||
        rebind(n, "bn2", m, bn2) || rebind(n, "downsample", m, downsample)))
    Module::rebind_child(n, m);
}

Bottleneck::Bottleneck(int64_t inplanes, int64_t planes, int64_t stride, std::shared_ptr<Sequential> ds) {
  conv1 = register_module("conv1", conv1x1(inplanes, planes));
  bn1 = register_module("bn1", std::make_shared<BatchNorm2d>(planes));
  conv2 = register_module("conv2", conv3x3(planes, planes, stride));
  bn2 = register_module("bn2", std::make_shared<BatchNorm2d>(planes));
  conv3 = register_module("conv3", conv1x1(planes, planes * expansion));
  bn3 = register_module("bn3", std::make_shared<BatchNorm2d>(planes * expansion));
  if (ds) downsample = register_module("downsample", std::move(ds));
}

Tensor Bottleneck::forward(const Tensor& x) {
  Tensor out = relu((*bn1)((*conv1)(x)));
  out = relu((*bn2)((*conv2)(out)));
  out = (*bn3)((*conv3)(out));
  return relu(out + (downsample ? (*downsample)(x) : x));
}

void Bottleneck::rebind_child(const std::string& n, const std::shared_ptr<Module>& m) {
  if (!(rebind(n, "conv1", m, conv1) || rebind(n, "bn1", m, bn1) || rebind(n, "conv2", m, conv2) ||
        rebind(n, "bn2", m, bn2) || rebind(n, "conv3", m, conv3) || rebind(n, "bn3", m, bn3) ||
        rebind(n, "downsample", m, downsample)))
    Module::rebind_child(n, m);
}

ResNet::ResNet(ResNetBlock block, std::array<int64_t, 4> layers, const ResNetOptions& opts) {
  if (opts.small_input) {
    conv1 = register_module("conv1", std::make_shared<Conv2d>(opts.in_channels, 64, 3, 1, 1, false));
  } else {
    conv1 = register_module("conv1", std::make_shared<Conv2d>(opts.in_channels, 64, 7, 2, 3, false));
  }
  bn1 = register_module("bn1", std::make_shared<BatchNorm2d>(64));
  if (!opts.small_input) maxpool = register_module("maxpool", std::make_shared<MaxPool2d>(3, 2, 1));
  layer1 = register_module("layer1", make_layer(block, 64, layers[0], 1));
  layer2 = register_module("layer2", make_layer(block, 128, layers[1], 2));
  layer3 = register_module("layer3", make_layer(block, 256, layers[2], 2));
  layer4 = register_module("layer4", make_layer(block, 512, layers[3], 2));
  avgpool = register_module("avgpool", std::make_shared<AdaptiveAvgPool2d>(1));
  fc = register_module("fc", std::make_shared<Linear>(inplanes_, opts.num_classes));
  // torchvision: conv weights kaiming_normal_(fan_out, relu); BatchNorm weight 1, bias 0 (its default).
  // (modules() needs a shared_ptr owner, which does not exist yet inside the constructor.)
  std::function<void(const Module&)> visit = [&](const Module& m) {
    for (const auto& [n, c] : m.named_children()) {
      if (auto* conv = dynamic_cast<Conv2d*>(c.get()))
        init::kaiming_normal_(conv->weight, 0.0, init::FanMode::fan_out, "relu");
      visit(*c);
    }
  };
  visit(*this);
}

std::shared_ptr<Sequential> ResNet::make_layer(ResNetBlock block, int64_t planes, int64_t blocks, int64_t stride) {
  const int64_t expansion = block == ResNetBlock::basic ? BasicBlock::expansion : Bottleneck::expansion;
  auto layer = std::make_shared<Sequential>();
  for (int64_t i = 0; i < blocks; ++i) {
    const int64_t s = i == 0 ? stride : 1;
    std::shared_ptr<Sequential> ds;
    if (i == 0 && (stride != 1 || inplanes_ != planes * expansion)) {
      ds = std::make_shared<Sequential>();
      ds->push_back(conv1x1(inplanes_, planes * expansion, stride));
      ds->push_back(std::make_shared<BatchNorm2d>(planes * expansion));
    }
    if (block == ResNetBlock::basic) {
      layer->push_back(std::make_shared<BasicBlock>(inplanes_, planes, s, ds));
    } else {
      layer->push_back(std::make_shared<Bottleneck>(inplanes_, planes, s, ds));
    }
    inplanes_ = planes * expansion;
  }
  return layer;
}

Tensor ResNet::forward(const Tensor& x) {
  Tensor y = relu((*bn1)((*conv1)(x)));
  if (maxpool) y = (*maxpool)(y);
  y = (*layer4)((*layer3)((*layer2)((*layer1)(y))));
  return (*fc)(flatten((*avgpool)(y), 1));
}

void ResNet::rebind_child(const std::string& n, const std::shared_ptr<Module>& m) {
  if (!(rebind(n, "conv1", m, conv1) || rebind(n, "bn1", m, bn1) || rebind(n, "maxpool", m, maxpool) ||
        rebind(n, "layer1", m, layer1) || rebind(n, "layer2", m, layer2) || rebind(n, "layer3", m, layer3) ||
        rebind(n, "layer4", m, layer4) || rebind(n, "avgpool", m, avgpool) || rebind(n, "fc", m, fc)))
    Module::rebind_child(n, m);
}

std::shared_ptr<ResNet> resnet18(const ResNetOptions& o) {
  return std::make_shared<ResNet>(ResNetBlock::basic, std::array<int64_t, 4>{2, 2, 2, 2}, o);
}
std::shared_ptr<ResNet> resnet34(const ResNetOptions& o) {
  return std::make_shared<ResNet>(ResNetBlock::basic, std::array<int64_t, 4>{3, 4, 6, 3}, o);
}
std::shared_ptr<ResNet> resnet50(const ResNetOptions& o) {
  return std::make_shared<ResNet>(ResNetBlock::bottleneck, std::array<int64_t, 4>{3, 4, 6, 3}, o);
}

}  // namespace ember::nn
