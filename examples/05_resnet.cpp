// 05_resnet: residual networks, as He et al. built them for CIFAR-10 ("Deep Residual Learning for
// Image Recognition", 2016, §4.2): a 3x3 convolution of 16 channels, three stages of n BasicBlocks at
// 16, 32 and 64 channels on 32x32, 16x16 and 8x8 maps, global average pooling and a Linear: 6n + 2
// layers with weights (--blocks 3 is their ResNet-20). Each block adds its input to what its two
// convolutions compute, relu(x + F(x)); with F's last batch-norm scale at zero a block is the
// identity on non-negative inputs, which is why deep ResNets train (torchvision's
// zero_init_residual). Trained with SGD, Nesterov momentum, weight decay and a cosine schedule on
// synthetic 3x32x32 images, or on CIFAR-10 with --data.
//
// Read next: nn/models/resnet.cpp (BasicBlock::forward, and ResNet-18/34/50 as torchvision builds
// them), optim/lr_scheduler.h (CosineAnnealingLR), optim/sgd.cpp (weight decay and Nesterov in
// the step), nn/pooling.cpp (adaptive_avg_pool2d).
//
//   ninja -C build examples/05_resnet && build/examples/05_resnet
//   build/examples/05_resnet --blocks 3 --steps 300                 (ResNet-20)
//   build/examples/05_resnet --data ~/cifar-10-batches-bin           (CIFAR-10: first 4096 images)
#include <CLI/CLI.hpp>

#include <cstdio>

#include "fit.h"
#include "nn/layers/conv.h"
#include "nn/layers/linear.h"
#include "nn/layers/normalization.h"
#include "nn/loss.h"
#include "nn/models/resnet.h"
#include "nn/pooling.h"
#include "optim/lr_scheduler.h"
#include "optim/sgd.h"

using namespace ember;
using namespace ember_examples;

namespace {

std::shared_ptr<nn::Conv2d> conv3x3(int64_t in, int64_t out, int64_t stride) {
  return std::make_shared<nn::Conv2d>(in, out, 3, stride, /*padding=*/1, /*bias=*/false);
}

// n blocks of `planes` channels; the first takes `stride` and, where the shape changes, its
// shortcut is a 1x1 convolution with batch norm (torchvision's; the paper pads with zeros instead).
std::shared_ptr<nn::Sequential> stage(int64_t inplanes, int64_t planes, int64_t n, int64_t stride) {
  auto blocks = std::make_shared<nn::Sequential>();
  for (int64_t i = 0; i < n; ++i) {
    std::shared_ptr<nn::Sequential> shortcut;
    if (i == 0 && (stride != 1 || inplanes != planes))
      shortcut = std::make_shared<nn::Sequential>(std::vector<std::shared_ptr<nn::UnaryModule>>{
          std::make_shared<nn::Conv2d>(inplanes, planes, 1, stride, 0, false),
          std::make_shared<nn::BatchNorm2d>(planes)});
    blocks->push_back(
        std::make_shared<nn::BasicBlock>(i == 0 ? inplanes : planes, planes, i == 0 ? stride : 1, shortcut));
  }
  return blocks;
}

class CifarResNet : public nn::UnaryModule {
 public:
  CifarResNet(int64_t n, int64_t classes)
      : conv1(register_module("conv1", conv3x3(3, 16, 1))),
        bn1(register_module("bn1", std::make_shared<nn::BatchNorm2d>(16))),
        layer1(register_module("layer1", stage(16, 16, n, 1))),   // (B, 16, 32, 32)
        layer2(register_module("layer2", stage(16, 32, n, 2))),   // (B, 32, 16, 16)
        layer3(register_module("layer3", stage(32, 64, n, 2))),   // (B, 64, 8, 8)
        fc(register_module("fc", std::make_shared<nn::Linear>(64, classes))) {}
  std::string name() const override { return "CifarResNet"; }

  std::shared_ptr<nn::Conv2d> conv1;
  std::shared_ptr<nn::BatchNorm2d> bn1;
  std::shared_ptr<nn::Sequential> layer1, layer2, layer3;
  std::shared_ptr<nn::Linear> fc;

 protected:
  Tensor forward(const Tensor& x) override {
    Tensor y = relu((*bn1)((*conv1)(x)));
    y = (*layer3)((*layer2)((*layer1)(y)));
    return (*fc)(flatten(adaptive_avg_pool2d(y, {1, 1}), 1));  // (B, 64, 1, 1) -> (B, 64) -> (B, classes)
  }
};

// A block whose last batch norm scales by 0 adds nothing to its input: relu(x + 0) = relu(x).
void expect_identity_at_zero_scale(Checks& checks) {
  nn::BasicBlock block(16, 16, 1, nullptr);
  NoGradGuard no_grad;
  zero_(block.bn2->weight);
  const Tensor x = randn({2, 16, 8, 8});
  checks.expect(equal(block(x), relu(x)), "a BasicBlock whose bn2 scale is 0 computes relu(x): residual "
                "learning starts from the identity");
}

}  // namespace

int main(int argc, char** argv) {
  FitOptions fit_options{.steps = 100, .batch_size = 32, .lr = 0.1};
  std::string data_dir;
  int64_t blocks = 1;
  CLI::App app{"Step 5 of the example ladder: a CIFAR-10 ResNet on synthetic 3x32x32 images (or CIFAR-10).",
               "05_resnet"};
  add_fit_options(app, fit_options);
  app.add_option("--data", data_dir, "CIFAR-10 binary directory (default: synthetic images)");
  app.add_option("--blocks", blocks, "BasicBlocks per stage, n: ResNet-(6n + 2), 3 is ResNet-20")
      ->check(CLI::Range(int64_t{1}, int64_t{200}))->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  return run_checked("05_resnet", [&](Checks& checks) {
    expect_identity_at_zero_scale(checks);
    const ImageData data = cifar10_or_synthetic(data_dir, 4096, 1000, fit_options.seed);
    manual_seed(fit_options.seed);
    auto model = std::make_shared<CifarResNet>(blocks, data.shape.classes);
    model->to(Device::parse(fit_options.device));
    std::printf("ResNet-%lld: %lld parameters\n", static_cast<long long>(6 * blocks + 2),
                static_cast<long long>(model->num_parameters()));

    optim::SGD sgd(model->parameters(), {.lr = fit_options.lr, .momentum = 0.9, .weight_decay = 5e-4,
                                          .nesterov = true});
    optim::CosineAnnealingLR schedule(sgd, fit_options.steps);
    const FitReport report = fit(*model, data, fit_options, [&](const Tensor& images, const Tensor& labels) {
      sgd.zero_grad();
      Tensor loss = cross_entropy((*model)(images), labels);
      loss.backward();
      sgd.step();
      schedule.step();  // once per optimizer step: lr = lr_max (1 + cos(pi t / T)) / 2
      return loss;
    });
    expect_learned(checks, report, data.shape.classes);
    checks.expect(sgd.param_groups().front().lr() <= 1e-6 * fit_options.lr,
                  "the cosine schedule brought the learning rate down to 0 over the run");
  });
}
