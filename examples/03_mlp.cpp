// 03_mlp: the first trained model. A module of two Linear layers written by hand
// (register_module, forward, parameters), the training step every later example repeats
// (zero_grad, forward, loss, backward, step) with SGD and momentum, batches from a seeded
// DataLoader, and evaluation under NoGradGuard. On Fashion-MNIST when Debian's dataset-fashion-mnist
// is installed, else on synthetic images of its shape; it checks that the loss went down and the
// test accuracy is far above chance.
//
// Read next: nn/module.h (Module: parameters, children, train/eval, to), nn/layers/linear.cpp
// (Linear: one `linear` primitive, PyTorch's initialisation), nn/loss.cpp (cross_entropy),
// optim/sgd.cpp (SGD::step_group: one multi-tensor step primitive, its formulas in
// optim/step_math.h), data/dataloader.h (DataLoader: the order of the batches depends only on the
// seed), examples/fit.h (the loop around the step).
//
//   ninja -C build examples/03_mlp && build/examples/03_mlp
//   build/examples/03_mlp --steps 2000 --hidden 256     (84% of Fashion-MNIST's first 2000 test images)
#include <CLI/CLI.hpp>

#include <cstdio>

#include "fit.h"
#include "nn/layers/linear.h"
#include "nn/loss.h"
#include "optim/sgd.h"

using namespace ember;
using namespace ember_examples;

namespace {

// 784 -> hidden -> 10 with a ReLU between. nn::MLP builds the same stack as a Sequential.
class TwoLayerMLP : public nn::UnaryModule {
 public:
  TwoLayerMLP(int64_t in, int64_t hidden, int64_t out)
      : fc1(register_module("fc1", std::make_shared<nn::Linear>(in, hidden))),
        fc2(register_module("fc2", std::make_shared<nn::Linear>(hidden, out))) {}
  std::string name() const override { return "TwoLayerMLP"; }

  std::shared_ptr<nn::Linear> fc1, fc2;

 protected:
  // (B, 1, 28, 28) -> (B, 784) -> (B, hidden) -> (B, 10): logits, one score per class. Protected:
  // callers write (*model)(x), which runs the module's hooks around this.
  Tensor forward(const Tensor& x) override { return (*fc2)(relu((*fc1)(flatten(x, 1)))); }
};

}  // namespace

int main(int argc, char** argv) {
  FitOptions fit_options{.steps = 300, .batch_size = 64, .lr = 0.05};
  int64_t hidden = 128;
  CLI::App app{"Step 3 of the example ladder: an MLP trained on Fashion-MNIST (or synthetic images).", "03_mlp"};
  add_fit_options(app, fit_options);
  const FashionMnistFlag data_flag(app);
  app.add_option("--hidden", hidden, "hidden units")->check(CLI::Range(int64_t{1}, int64_t{1} << 16))
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  return run_checked("03_mlp", [&](Checks& checks) {
    const ImageData data = data_flag.load(8192, 2000, fit_options.seed);
    manual_seed(fit_options.seed);  // the weights' initialisation
    auto model = std::make_shared<TwoLayerMLP>(28 * 28, hidden, data.shape.classes);
    model->to(Device::parse(fit_options.device));
    std::printf("%s\n%lld parameters\n", model->str().c_str(), static_cast<long long>(model->num_parameters()));
    checks.expect(model->num_parameters() == 784 * hidden + hidden + hidden * 10 + 10,
                  "parameters() finds the weight and bias of both Linear children");

    optim::SGD sgd(model->parameters(), {.lr = fit_options.lr, .momentum = 0.9});
    const FitReport report = fit(*model, data, fit_options, [&](const Tensor& images, const Tensor& labels) {
      sgd.zero_grad();                                        // every parameter's .grad back to none
      Tensor loss = cross_entropy((*model)(images), labels);  // forward: records the graph
      loss.backward();                                        // fills each parameter's .grad
      sgd.step();                                             // p -= lr * (momentum buffer)
      return loss;
    });
    expect_learned(checks, report, data.shape.classes);
  });
}
