// fit(): the loop the ladder's classifiers (examples 03 to 06) share around the training step each
// of them writes itself: shuffled batches from a seeded DataLoader, epoch after epoch, the loss
// and the time per step every tenth of the run, then top-1 accuracy on the test images.
// expect_learned() makes the claims every such example checks on the result.
// (examples/train and train/runner.cpp do the same at full scale: checkpoints, logs, schedules.)
#pragma once

#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "autograd/grad_mode.h"
#include "data/dataloader.h"
#include "checks.h"
#include "flags.h"
#include "image_data.h"
#include "nn/module.h"

namespace ember_examples {

struct FitOptions {
  int64_t steps = 100;
  int64_t batch_size = 64;
  double lr = 0.05;   // the optimizer's learning rate (its peak, under a schedule)
  uint64_t seed = 0;  // the initial weights, the order of the batches, the synthetic images
  std::string device = "cpu";
};

// --steps, --batch-size, --lr, --seed and --device, with `opts` holding the example's defaults.
inline void add_fit_options(CLI::App& app, FitOptions& opts) {
  app.add_option("--steps", opts.steps, "optimizer steps")->check(CLI::Range(int64_t{2}, int64_t{1000000}))
      ->capture_default_str();
  app.add_option("--batch-size", opts.batch_size, "images per step")->check(CLI::Range(int64_t{1}, int64_t{65536}))
      ->capture_default_str();
  app.add_option("--lr", opts.lr, "learning rate (the peak, under a schedule)")->check(number_in(0.0, 10.0))
      ->capture_default_str();
  app.add_option("--seed", opts.seed, "seed of the initial weights and of the batch order")->capture_default_str();
  app.add_option("--device", opts.device, "cpu, cuda or cuda:N")->capture_default_str();
}

// One optimisation step on a batch already on the model's device, in the dtype the model takes;
// returns the loss (0-dim).
using TrainStep = std::function<ember::Tensor(const ember::Tensor& images, const ember::Tensor& labels)>;

struct FitReport {
  double first_loss = 0;   // mean loss of the first tenth of the steps
  double last_loss = 0;    // mean loss of the last tenth
  double ms_per_step = 0;  // wall time of a step, loading its batch included
  double test_accuracy = 0;
};

// Top-1 accuracy of `model` on `dataset`, in eval mode (batch norm's running statistics, no dropout).
inline double accuracy(ember::nn::UnaryModule& model, const ember::data::Dataset& dataset, ember::Device device,
                       ember::DType input_dtype, int64_t batch_size) {
  ember::NoGradGuard no_grad;
  model.eval();
  int64_t correct = 0;
  for (int64_t begin = 0; begin < dataset.size(); begin += batch_size) {
    std::vector<int64_t> indices;
    for (int64_t i = begin; i < std::min(dataset.size(), begin + batch_size); ++i) indices.push_back(i);
    const ember::data::Batch b = dataset.get_batch(indices);
    const ember::Tensor predicted = ember::argmax(model(b.images.to(device).to(input_dtype)), 1);
    correct += ember::sum(ember::eq(predicted, b.labels.to(device))).item<int64_t>();
  }
  model.train();
  return static_cast<double>(correct) / static_cast<double>(dataset.size());
}

// Runs opts.steps steps; images reach `step` and the model in input_dtype (16 bits for a model
// stored in 16 bits, examples/07_amp_modes.cpp).
inline FitReport fit(ember::nn::UnaryModule& model, const ImageData& data, const FitOptions& opts,
                     const TrainStep& step, ember::DType input_dtype = ember::DType::f32) {
  const ember::Device device = ember::Device::parse(opts.device);
  ember::data::DataLoader loader(data.train, {.batch_size = opts.batch_size, .shuffle = true, .seed = opts.seed,
                                              .drop_last = true});
  if (loader.size() == 0)
    throw ember::ValueError("--batch-size " + std::to_string(opts.batch_size) + " is more than the " +
                            std::to_string(data.train->size()) + " training images");
  std::printf("data: %s\n", data.source.c_str());
  const int64_t window = std::max<int64_t>(1, opts.steps / 10);
  FitReport report;
  double window_loss = 0;
  int64_t epoch = 0;
  const auto start = std::chrono::steady_clock::now();
  for (int64_t s = 1; s <= opts.steps; ++s) {
    std::optional<ember::data::Batch> batch = loader.next();
    if (!batch) {
      loader.set_epoch(++epoch);
      batch = loader.next();
    }
    window_loss += step(batch->images.to(device).to(input_dtype), batch->labels.to(device)).item<double>();
    if (s % window == 0 || s == opts.steps) {
      const int64_t n = s % window == 0 ? window : s % window;
      const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      std::printf("step %5lld/%lld  loss %.4f  %.1f ms/step\n", static_cast<long long>(s),
                  static_cast<long long>(opts.steps), window_loss / n, 1e3 * seconds / s);
      if (s == window) report.first_loss = window_loss / n;
      report.last_loss = window_loss / n;
      window_loss = 0;
    }
  }
  report.ms_per_step =
      1e3 * std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / opts.steps;
  report.test_accuracy = accuracy(model, *data.test, device, input_dtype, opts.batch_size);
  std::printf("test accuracy %.2f%% on %lld images\n", 100 * report.test_accuracy,
              static_cast<long long>(data.test->size()));
  return report;
}

// The loss of the last tenth of the run is at least 10% below the first tenth's: more than the
// noise of a few batches.
inline bool loss_went_down(const FitReport& r) { return r.last_loss <= 0.9 * r.first_loss; }

// The loss went down and the test accuracy is well above the 1/classes of guessing.
inline void expect_learned(Checks& checks, const FitReport& r, int64_t classes) {
  char what[160];
  std::snprintf(what, sizeof what, "the loss went down by 10%% or more: %.4f over the first tenth of the steps, "
                "%.4f over the last", r.first_loss, r.last_loss);
  checks.expect(loss_went_down(r), what);
  std::snprintf(what, sizeof what, "test accuracy %.1f%% is at least twice chance (%.1f%%)", 100 * r.test_accuracy,
                100.0 / static_cast<double>(classes));
  checks.expect(r.test_accuracy >= 2.0 / static_cast<double>(classes), what);
}

}  // namespace ember_examples
