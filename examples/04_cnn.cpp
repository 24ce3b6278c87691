// 04_cnn: a convolutional network as a Sequential of layers: conv-BN-ReLU-pool twice, then a
// Linear classifier. It shows how a convolution's output size follows from kernel, stride and
// padding (out = (in + 2 padding - kernel) / stride + 1), watched with forward hooks, and what batch
// norm does differently in training and in eval mode: in training it normalises with the batch's own
// statistics and updates its running ones, in eval it uses the running ones, so an image's logits
// no longer depend on the rest of its batch. Trains on Fashion-MNIST or synthetic 28x28 images as
// step 3 does, and checks each of these facts.
//
// Read next: nn/layers/conv.h (Conv2d, MaxPool2d), nn/conv.cpp (conv2d's argument checks and output
// size), cpu/conv_dnnl.cpp and cpu/conv.cpp (its CPU kernels: oneDNN, or im2col + GEMM),
// nn/normalization.cpp (batch_norm in both modes), nn/module.h (register_forward_hook),
// nn/models/mlp.cpp (SmallCNN, the wider CNN examples/train uses).
//
//   ninja -C build examples/04_cnn && build/examples/04_cnn
//   build/examples/04_cnn --steps 1000 --width 32       (86.5%, 34 s on one core)
#include <CLI/CLI.hpp>

#include <cstdio>

#include "fit.h"
#include "nn/layers/conv.h"
#include "nn/layers/linear.h"
#include "nn/layers/normalization.h"
#include "nn/loss.h"
#include "optim/sgd.h"

using namespace ember;
using namespace ember_examples;

namespace {

// (B, 1, 28, 28) -> conv 3x3 pad 1: (B, w, 28, 28) -> pool 2: (B, w, 14, 14)
//                -> conv 3x3 pad 1: (B, 2w, 14, 14) -> pool 2: (B, 2w, 7, 7) -> flatten -> Linear: (B, 10).
// The convolutions have no bias: the batch norm after each subtracts the mean, and a bias with it.
std::shared_ptr<nn::Sequential> make_cnn(int64_t width, int64_t classes) {
  return std::make_shared<nn::Sequential>(std::vector<std::shared_ptr<nn::UnaryModule>>{
      std::make_shared<nn::Conv2d>(1, width, 3, /*stride=*/1, /*padding=*/1, /*bias=*/false),
      std::make_shared<nn::BatchNorm2d>(width),
      std::make_shared<nn::ReLU>(),
      std::make_shared<nn::MaxPool2d>(2),
      std::make_shared<nn::Conv2d>(width, 2 * width, 3, 1, 1, false),
      std::make_shared<nn::BatchNorm2d>(2 * width),
      std::make_shared<nn::ReLU>(),
      std::make_shared<nn::MaxPool2d>(2),
      std::make_shared<nn::Flatten>(),
      std::make_shared<nn::Linear>(2 * width * 7 * 7, classes),
  });
}

// Runs one batch through the model with a forward hook on each layer that prints its output shape,
// and checks the shapes against the formula (hooks run when a module is called as m(x)).
void expect_shapes(Checks& checks, nn::Sequential& model, const Tensor& images, int64_t width) {
  std::vector<Shape> shapes;
  std::vector<nn::HookHandle> hooks;
  for (const auto& [name, child] : model.named_children()) {
    const auto print_shape = [&shapes, name = name](nn::Module& m, const Tensor&, const Tensor& out) {
      std::printf("  %-2s %-12s -> %s\n", name.c_str(), m.name().c_str(), to_string(out.shape()).c_str());
      shapes.push_back(out.shape());
    };
    hooks.push_back(child->register_forward_hook(print_shape));
  }
  {
    NoGradGuard no_grad;
    model.eval();  // in training mode this forward would move batch norm's running statistics
    (void)model(images);
    model.train();
  }
  for (auto& h : hooks) h.remove();
  const int64_t b = images.size(0);
  checks.expect(shapes.size() == 10 && shapes[0] == Shape{b, width, 28, 28} && shapes[3] == Shape{b, width, 14, 14} &&
                    shapes[7] == Shape{b, 2 * width, 7, 7} && shapes[9] == Shape{b, 10},
                "a 3x3 convolution with padding 1 keeps 28x28 ((28 + 2 - 3) / 1 + 1), each 2x2 pool halves it");
}

// In eval mode an image's logits are the same alone as in a batch; in training mode they are not.
void expect_batch_norm_modes(Checks& checks, nn::Sequential& model, const Tensor& images) {
  NoGradGuard no_grad;
  const Tensor first = images.narrow(0, 0, 1);
  model.eval();
  const bool eval_alike = allclose(model(first), model(images).narrow(0, 0, 1), 1e-4, 1e-5);
  model.train();
  const bool train_alike = allclose(model(first), model(images).narrow(0, 0, 1), 1e-4, 1e-5);
  checks.expect(eval_alike && !train_alike,
                "batch norm: eval mode uses the running statistics (an image alone gives its logits in the "
                "batch), training mode the batch's own");
}

}  // namespace

int main(int argc, char** argv) {
  FitOptions fit_options{.steps = 200, .batch_size = 64, .lr = 0.05};
  int64_t width = 16;
  CLI::App app{"Step 4 of the example ladder: a CNN trained on Fashion-MNIST (or synthetic images).", "04_cnn"};
  add_fit_options(app, fit_options);
  const FashionMnistFlag data_flag(app);
  app.add_option("--width", width, "channels of the first convolution (the second has twice as many)")
      ->check(CLI::Range(int64_t{1}, int64_t{1024}))->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  return run_checked("04_cnn", [&](Checks& checks) {
    const ImageData data = data_flag.load(8192, 2000, fit_options.seed);
    const Device device = Device::parse(fit_options.device);
    manual_seed(fit_options.seed);
    auto model = make_cnn(width, data.shape.classes);
    model->to(device);
    std::printf("%s\n%lld parameters; output shape of each layer:\n", model->str().c_str(),
                static_cast<long long>(model->num_parameters()));
    const Tensor some_images = data.test->get_batch({0, 1, 2, 3, 4, 5, 6, 7}).images.to(device);
    expect_shapes(checks, *model, some_images, width);

    auto bn = std::dynamic_pointer_cast<nn::BatchNorm2d>((*model)[1]);
    const Tensor running_mean_before = bn->running_mean.clone();
    optim::SGD sgd(model->parameters(), {.lr = fit_options.lr, .momentum = 0.9});
    const FitReport report = fit(*model, data, fit_options, [&](const Tensor& images, const Tensor& labels) {
      sgd.zero_grad();
      Tensor loss = cross_entropy((*model)(images), labels);
      loss.backward();
      sgd.step();
      return loss;
    });
    expect_learned(checks, report, data.shape.classes);
    checks.expect(!equal(bn->running_mean, running_mean_before) &&
                      bn->num_batches_tracked.item<int64_t>() == fit_options.steps,
                  "training updated batch norm's running statistics (buffers, not parameters) once per step");
    expect_batch_norm_modes(checks, *model, some_images);
  });
}
