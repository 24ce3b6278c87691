// Profiler ranges (tensor/nvtx.h): which ranges a training step opens, their names and nesting, and
// that none open while they are off. A listener records them; in a CUDA build the same calls also
// reach NVTX, which only a profiler (nsys, ncu --nvtx) shows.
#include <doctest/doctest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "nn/layers/linear.h"
#include "nn/module.h"
#include "optim/amp/grad_scaler.h"
#include "optim/sgd.h"
#include "tensor/nvtx.h"
#include "tensor/ops.h"

namespace {

// Every range opened, with its depth (ranges open around it), and whether each closed in order.
struct Recorder {
  struct Opened {
    std::string name;
    int depth;
  };
  std::vector<Opened> opened;
  int depth = 0;
  bool unbalanced = false;

  Recorder() {
    ember::nvtx::set_listener([this](const char* name) {
      if (name != nullptr) {
        opened.push_back({name, depth++});
      } else if (--depth < 0) {
        unbalanced = true;
      }
    });
  }
  ~Recorder() { ember::nvtx::set_listener({}); }
  int depth_of(const std::string& name) const {
    for (const Opened& o : opened)
      if (o.name == name) return o.depth;
    return -1;
  }
  bool has(const std::string& name) const { return depth_of(name) >= 0; }
};

// A Linear-ReLU-Linear model's training step with a grad scaler: forward, backward, unscale, step, update.
void train_step(ember::nn::Sequential& model, ember::optim::Optimizer& opt, ember::amp::GradScaler& scaler) {
  const ember::Tensor x = ember::randn({4, 3}), target = ember::randn({4, 2});
  const ember::Tensor loss = ember::mean(ember::square(model(x) - target));
  scaler.scale(loss).backward();
  scaler.unscale_(opt);
  scaler.step(opt);
  scaler.update();
}

std::shared_ptr<ember::nn::Sequential> make_model() {
  auto model = std::make_shared<ember::nn::Sequential>();
  model->push_back(std::make_shared<ember::nn::Linear>(3, 5));
  model->push_back(std::make_shared<ember::nn::ReLU>());
  model->push_back(std::make_shared<ember::nn::Linear>(5, 2));
  return model;
}

}  // namespace

TEST_SUITE("cpu") {

TEST_CASE("nvtx: a training step's ranges, named by module path, nested, balanced") {
  auto model = make_model();
  model->label_ranges();
  ember::optim::SGD opt(model->parameters(), {.lr = 0.1});
  ember::amp::GradScaler scaler;
  Recorder rec;
  ember::nvtx::set_enabled(true);
  train_step(*model, opt, scaler);
  ember::nvtx::set_enabled(false);

  CHECK_FALSE(rec.unbalanced);
  CHECK(rec.depth == 0);
  // Forward: the model's range around its children's.
  CHECK(rec.depth_of("Sequential") == 0);
  CHECK(rec.depth_of("0: Linear") == 1);
  CHECK(rec.depth_of("1: ReLU") == 1);
  CHECK(rec.depth_of("2: Linear") == 1);
  // Backward: each op's range named after the module whose forward recorded it; the loss's ops
  // ran outside any module.
  CHECK(rec.depth_of("linear backward (2: Linear)") == 0);
  CHECK(rec.depth_of("linear backward (0: Linear)") == 0);
  CHECK(rec.has("relu backward (1: ReLU)"));
  CHECK(rec.has("square backward"));
  CHECK(rec.has("accumulate_grad backward (0: Linear)"));  // the parameters' gradients, by the module that used them
  // The scaler's passes, the optimizer's step inside the scaler's.
  CHECK(rec.has("GradScaler.unscale_"));
  CHECK(rec.depth_of("GradScaler.step") == 0);
  CHECK(rec.depth_of("SGD.step") == 1);
  CHECK(rec.has("GradScaler.update"));
  // Backward ranges follow the graph: the last layer's before the first's.
  const auto at = [&](const std::string& name) {
    return std::find_if(rec.opened.begin(), rec.opened.end(), [&](const auto& o) { return o.name == name; });
  };
  CHECK(at("linear backward (2: Linear)") < at("linear backward (0: Linear)"));
}

TEST_CASE("nvtx: off, no range opens; unlabelled modules are named by their type") {
  auto model = make_model();
  ember::optim::SGD opt(model->parameters(), {.lr = 0.1});
  ember::amp::GradScaler scaler;
  Recorder rec;
  REQUIRE_FALSE(ember::nvtx::enabled());
  train_step(*model, opt, scaler);
  CHECK(rec.opened.empty());
  // Unlabelled modules' ranges take their type's name.
  ember::nvtx::set_enabled(true);
  (void)(*model)(ember::randn({1, 3}));
  ember::nvtx::set_enabled(false);
  CHECK(rec.depth_of("Sequential") == 0);
  CHECK(rec.depth_of("Linear") == 1);
}

}  // TEST_SUITE("cpu")
