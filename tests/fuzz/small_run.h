// The small run the checkpoint fuzz targets restore into: a Linear model in naive_fp16 with AdamW
// and a cosine schedule, over 6 examples in batches of 2, under `strategy` (null: one process).
// Restoring checks a file's values as counts, positions and state, not only as bytes that parse.
#pragma once

#include <memory>

#include "data/dataloader.h"
#include "data/dataset.h"
#include "nn/nn.h"
#include "optim/adam.h"
#include "optim/lr_scheduler.h"
#include "tensor/ops.h"
#include "train/runner.h"
#include "train/strategy.h"

namespace ember::fuzz {

inline std::unique_ptr<train::Runner> make_small_run(std::shared_ptr<train::Strategy> strategy = nullptr) {
  manual_seed(0);
  auto model = std::make_shared<nn::Sequential>();
  model->push_back(std::make_shared<nn::Flatten>());
  model->push_back(std::make_shared<nn::Linear>(4, 3));
  train::PrecisionOptions po;
  po.precision = train::Precision::naive_fp16;
  po.strategy = strategy;
  auto precision = std::make_shared<train::TrainingPrecision>(po, *model, [](std::vector<Tensor> params) {
    return std::make_unique<optim::AdamW>(std::move(params), optim::AdamWOptions{});
  });
  auto scheduler = std::make_shared<optim::CosineAnnealingLR>(precision->optimizer(), 10);
  auto images = randn({6, 1, 2, 2});
  auto set = std::make_shared<data::TensorDataset>(images, from_vector(std::vector<int64_t>{0, 1, 2, 0, 1, 2}, {6}));
  auto loader = std::make_shared<data::DataLoader>(set, data::DataLoaderOptions{.batch_size = 2});
  train::RunnerOptions o;
  o.epochs = 2;
  o.max_iters = 4;
  o.locate_nonfinite = false;
  o.group = strategy ? strategy->process_group() : nullptr;
  const auto trained = precision->strategy()->wrap(model);
  return std::make_unique<train::Runner>(trained, precision, scheduler, loader, nullptr, o);
}

/// The one-process small run, made once per fuzz process: what each input is restored into.
inline train::Runner& small_run() {
  static const std::unique_ptr<train::Runner> runner = make_small_run();
  return *runner;
}

}  // namespace ember::fuzz
