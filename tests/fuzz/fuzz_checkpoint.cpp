// libFuzzer target: the checkpoint loader on arbitrary bytes, and what it loads restored into a
// small run (a Linear model in naive_fp16 with AdamW and a cosine schedule), so the values a file
// holds are checked as counts, positions and state, not only parsed.
// `fuzz_checkpoint --write-seed FILE` writes that run's checkpoint after 4 of its 6 steps (mid-epoch,
// with optimizer and scaler state), the corpus's seed.
#include <cstring>

#include "data/dataloader.h"
#include "data/dataset.h"
#include "nn/nn.h"
#include "optim/adam.h"
#include "optim/lr_scheduler.h"
#include "tensor/ops.h"
#include "tests/fuzz/fuzz_file.h"
#include "train/checkpoint.h"
#include "train/runner.h"

namespace {

using namespace ember;

train::Runner& small_run() {
  static train::Runner* runner = [] {
    manual_seed(0);
    auto model = std::make_shared<nn::Sequential>();
    model->push_back(std::make_shared<nn::Flatten>());
    model->push_back(std::make_shared<nn::Linear>(4, 3));
    train::PrecisionOptions po;
    po.precision = train::Precision::naive_fp16;
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
    return new train::Runner(model, precision, scheduler, loader, nullptr, o);
  }();
  return *runner;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv) {
  for (int i = 1; i + 1 < *argc; ++i)
    if (std::strcmp((*argv)[i], "--write-seed") == 0) {
      small_run().run();
      train::save_checkpoint((*argv)[i + 1], small_run().checkpoint());
      std::exit(0);
    }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static ember::fuzz::InputFile file;
  const std::string& path = file.fill(data, size);
  ember::fuzz::expect_clean([&] { small_run().restore(train::load_checkpoint(path)); });
  return 0;
}
