// Activation checkpointing (nn/checkpoint.h): a checkpointed region's loss and every gradient
// bit-equal to the same region run without it, with dropout, in float32 and under bf16 autocast;
// parameters reached with inputs that need no gradient; double backward; a second backward with
// retain_graph; nested regions; batch norm's running statistics updated once; the per-module switch
// on ResNet and ViT blocks and checkpoint_sequential; the training step's peak memory lower; every
// misuse's error.
#include <algorithm>
#include <cmath>
#include <functional>
#include <memory>

#include "autograd/engine.h"
#include "nn/checkpoint.h"
#include "nn/dropout.h"
#include "nn/layers/linear.h"
#include "nn/loss.h"
#include "nn/models/mlp.h"
#include "nn/models/resnet.h"
#include "nn/models/vit.h"
#include "tensor/autocast.h"
#include "tensor/random.h"
#include "tensor/storage.h"
#include "tests/helpers.h"

using namespace ember;
using namespace ember_test;

namespace {

// Every value of `got` equal to `want`'s, bit for bit (to_vector<double> is exact for every float dtype).
void check_bit_equal(const Tensor& got, const Tensor& want, const std::string& what) {
  INFO(what);
  REQUIRE(got.defined());
  REQUIRE(want.defined());
  CHECK(got.shape() == want.shape());
  CHECK(got.dtype() == want.dtype());
  CHECK(values(got) == values(want));
}

// A float32 leaf that requires grad on `device`.
Tensor leaf(const Shape& shape, double bound, uint64_t seed, Device device = kCPU) {
  return uniform_f64(shape, -bound, bound, seed).to(DType::f32).to(device).detach().requires_grad_();
}

// A two-layer region with dropout between, on parameters the test owns.
struct Region {
  explicit Region(Device device = kCPU)
      : w1(leaf({32, 16}, 0.3, 1, device)), b1(leaf({32}, 0.1, 2, device)), w2(leaf({8, 32}, 0.3, 3, device)) {}
  Tensor w1, b1, w2;

  Tensor operator()(const Tensor& x) const { return linear(dropout(gelu(linear(x, w1, b1)), 0.3), w2); }
  std::vector<Tensor> params() const { return {w1, b1, w2}; }
  void zero_grad() const {
    for (Tensor p : params()) p.set_grad(Tensor());
  }
};

// The loss and the gradients of the inputs and parameters after one backward of `loss_of`, from the
// generator at `seed`; the generator's position afterwards is returned last (as a 0-dim offset).
struct Outcome {
  Tensor loss;
  std::vector<Tensor> grads;
  uint64_t rng_offset;
};

Outcome run_once(const std::function<Tensor()>& loss_of, const std::vector<Tensor>& leaves, uint64_t seed) {
  for (Tensor t : leaves) t.set_grad(Tensor());
  manual_seed(seed);
  Outcome out;
  out.loss = loss_of();
  out.loss.backward();
  for (const Tensor& t : leaves) out.grads.push_back(t.grad());
  out.rng_offset = default_generator().state().offset;
  return out;
}

void check_same_outcome(const Outcome& got, const Outcome& want, const std::string& what) {
  check_bit_equal(got.loss, want.loss, what + ": loss");
  REQUIRE(got.grads.size() == want.grads.size());
  for (size_t i = 0; i < got.grads.size(); ++i)
    check_bit_equal(got.grads[i], want.grads[i], what + ": gradient " + std::to_string(i));
  CHECK_MESSAGE(got.rng_offset == want.rng_offset, what, ": the generator goes on where the run without checkpointing does");
}

// A model's loss on a fixed batch, and every parameter's gradient, from the generator at seed 7.
Outcome model_step(nn::UnaryModule& model, const Tensor& images, const Tensor& labels) {
  const std::vector<Tensor> params = model.parameters();
  return run_once([&] { return cross_entropy(model(images), labels); }, params, 7);
}

// On `device`: a region with dropout, checkpointed or not, in float32 and under bf16 autocast.
void check_region_with_dropout(Device device) {
  const Region region(device);
  const Tensor x = leaf({4, 16}, 1, 9, device);
  std::vector<Tensor> leaves = region.params();
  leaves.push_back(x);
  for (const bool autocast : {false, true}) {
    const std::string mode = std::string(autocast ? "bf16 autocast" : "fp32") + " on " + device.str();
    auto loss = [&](bool checkpointed) {
      std::optional<amp::Autocast> region_autocast;
      if (autocast) region_autocast.emplace(device.type, DType::bf16);
      const Tensor y = checkpointed ? nn::checkpoint([&](const Tensor& in) { return region(in); }, x) : region(x);
      return sum(y.to(DType::f32) * y.to(DType::f32));
    };
    const Outcome plain = run_once([&] { return loss(false); }, leaves, 5);
    const Outcome checkpointed = run_once([&] { return loss(true); }, leaves, 5);
    check_same_outcome(checkpointed, plain, mode);
    // The masks matter: another seed gives another loss, so equal losses are not a coincidence.
    CHECK(values(run_once([&] { return loss(true); }, leaves, 6).loss) != values(plain.loss));
  }
}

}  // namespace

TEST_SUITE("cpu") {

TEST_CASE("checkpoint: a region with dropout gives the loss and gradients of the run without it, fp32 and bf16 autocast") {
  check_region_with_dropout(kCPU);
}

TEST_CASE("checkpoint: parameters get gradients when no input requires grad; autograd::grad; retain_graph") {
  const Region region;
  const Tensor x = uniform_f64({4, 16}, -1, 1, 9).to(DType::f32);  // needs no gradient
  const std::vector<Tensor> params = region.params();
  const Outcome plain = run_once([&] { return sum(region(x)); }, params, 3);
  const Outcome checkpointed =
      run_once([&] { return sum(nn::checkpoint([&](const Tensor& in) { return region(in); }, x)); }, params, 3);
  check_same_outcome(checkpointed, plain, "input without grad");

  // autograd::grad leaves .grad alone and gives the same values.
  region.zero_grad();
  manual_seed(3);
  const Tensor loss = sum(nn::checkpoint([&](const Tensor& in) { return region(in); }, x));
  const std::vector<Tensor> grads = autograd::grad({loss}, params, {}, /*retain_graph=*/true);
  for (size_t i = 0; i < params.size(); ++i) {
    check_bit_equal(grads[i], plain.grads[i], "autograd::grad " + std::to_string(i));
    CHECK_FALSE(params[i].grad().defined());
  }
  // A second backward through the retained graph recomputes again and gives the same gradients.
  const std::vector<Tensor> again = autograd::grad({loss}, params);
  for (size_t i = 0; i < params.size(); ++i) check_bit_equal(again[i], plain.grads[i], "second backward " + std::to_string(i));
  CHECK_THROWS_AS(autograd::grad({loss}, params), AutogradError);  // freed now, as without checkpointing
}

TEST_CASE("checkpoint: double backward (a gradient penalty) equals the run without it") {
  const Tensor w = uniform_f64({6, 5}, -0.5, 0.5, 11).to(DType::f32).detach().requires_grad_();
  const Tensor x = uniform_f64({3, 5}, -1, 1, 12).to(DType::f32).detach().requires_grad_();
  auto region = [&](const Tensor& in) { return tanh(linear(in, w)) * sigmoid(in.sum({1}, true)); };
  auto penalty = [&](bool checkpointed) {
    const Tensor y = checkpointed ? nn::checkpoint(region, x) : region(x);
    const Tensor dx = autograd::grad({sum(y * y)}, {x}, {}, false, /*create_graph=*/true)[0];
    return sum(dx * dx);
  };
  const Outcome plain = run_once([&] { return penalty(false); }, {w, x}, 1);
  const Outcome checkpointed = run_once([&] { return penalty(true); }, {w, x}, 1);
  check_bit_equal(checkpointed.loss, plain.loss, "the penalty");
  // The second derivative reaches w and x through the recompute's nodes, whose contributions the
  // engine adds in another order than the first run's: equal to rounding. Measured: 7e-8 of the
  // largest gradient; allowed: 1e-6 (16 float32 ulps).
  for (size_t i = 0; i < 2; ++i) {
    const std::vector<double> got = values(checkpointed.grads[i]), want = values(plain.grads[i]);
    double largest = 0, worst = 0;
    for (size_t k = 0; k < want.size(); ++k) {
      largest = std::max(largest, std::abs(want[k]));
      worst = std::max(worst, std::abs(got[k] - want[k]));
    }
    CHECK_MESSAGE(worst <= 1e-6 * largest, "gradient ", i, ": off by ", worst, " of ", largest);
  }
}

TEST_CASE("checkpoint: nested regions and checkpoint_sequential equal the plain runs") {
  const Region inner;
  const Tensor w = uniform_f64({16, 16}, -0.3, 0.3, 21).to(DType::f32).detach().requires_grad_();
  const Tensor x = uniform_f64({4, 16}, -1, 1, 22).to(DType::f32).detach().requires_grad_();
  std::vector<Tensor> leaves = inner.params();
  leaves.push_back(w);
  leaves.push_back(x);
  auto outer = [&](bool checkpointed) {
    // By value: the recompute calls it after outer() returned.
    auto body = [&inner, &w, checkpointed](const Tensor& in) {
      const Tensor h = relu(linear(in, w));
      return checkpointed ? nn::checkpoint([&](const Tensor& t) { return inner(t); }, h) : inner(h);
    };
    return sum(exp(checkpointed ? nn::checkpoint(body, x) : body(x)));
  };
  check_same_outcome(run_once([&] { return outer(true); }, leaves, 4), run_once([&] { return outer(false); }, leaves, 4),
                     "nested");

  manual_seed(30);
  const auto mlp = std::make_shared<nn::Sequential>(std::vector<std::shared_ptr<nn::UnaryModule>>{
      std::make_shared<nn::Linear>(16, 24), std::make_shared<nn::Linear>(24, 24), std::make_shared<nn::Linear>(24, 24),
      std::make_shared<nn::Linear>(24, 24), std::make_shared<nn::Linear>(24, 3)});
  const std::vector<Tensor> params = mlp->parameters();
  const Outcome plain = run_once([&] { return sum(tanh((*mlp)(x))); }, params, 0);
  for (const int segments : {1, 2, 3, 5})
    check_same_outcome(run_once([&] { return sum(tanh(nn::checkpoint_sequential(*mlp, segments, x))); }, params, 0), plain,
                       "checkpoint_sequential, " + std::to_string(segments) + " segments");
  expect_error<ValueError>("segments 0", [&] { nn::checkpoint_sequential(*mlp, 0, x); }, {"segments", "5 modules", "got 0"});
  expect_error<ValueError>("segments 6", [&] { nn::checkpoint_sequential(*mlp, 6, x); }, {"got 6"});
}

TEST_CASE("checkpoint: ResNet and ViT blocks switched on give the same gradients and running statistics") {
  manual_seed(1);
  const auto resnet = nn::resnet18({10, 3, true});
  manual_seed(2);
  const auto vit = std::make_shared<nn::VisionTransformer>(nn::ViTOptions{32, 8, 3, 10, 48, 3, 3});
  const Tensor images = uniform_f64({4, 3, 32, 32}, -1, 1, 40).to(DType::f32);
  const Tensor labels = from_vector<int64_t>({1, 7, 3, 0}, {4});
  for (const auto& [model, blocks] : {std::pair<std::shared_ptr<nn::UnaryModule>, int64_t>{resnet, 8}, {vit, 3}}) {
    const std::string name = model->name();
    const StateDict start = model->state_dict();
    std::vector<Tensor> start_buffers;
    for (const Tensor& b : model->buffers()) start_buffers.push_back(b.clone());
    const Outcome plain = model_step(*model, images, labels);
    std::vector<Tensor> plain_buffers;
    for (const Tensor& b : model->buffers()) plain_buffers.push_back(b.clone());

    CHECK(nn::default_checkpoint_modules(*model) ==
          std::vector<std::string>{name == "ResNet" ? "BasicBlock" : "Block"});
    CHECK(nn::apply_activation_checkpointing(*model, nn::default_checkpoint_modules(*model)) == blocks);
    const std::vector<Tensor> buffers = model->buffers();
    for (size_t i = 0; i < buffers.size(); ++i) copy_(const_cast<Tensor&>(buffers[i]), start_buffers[i]);
    const Outcome checkpointed = model_step(*model, images, labels);
    check_same_outcome(checkpointed, plain, name);
    for (size_t i = 0; i < buffers.size(); ++i)
      check_bit_equal(buffers[i], plain_buffers[i], name + ": buffer " + std::to_string(i) + " updated once");
    for (const auto& m : model->modules())
      if (auto* unary = dynamic_cast<nn::UnaryModule*>(m.get())) unary->set_activation_checkpointing(false);
    model->load_state_dict(start);
  }
}

TEST_CASE("checkpoint: a ViT's training step peaks at least 40 % lower with its blocks checkpointed") {
  // ViT-Ti's width and depth on 64 px images in 8 px patches (65 tokens), 16 images: activations
  // dominate the step as they do at ImageNet sizes. Measured here: about 75 % lower.
  manual_seed(3);
  const auto vit = std::make_shared<nn::VisionTransformer>(nn::ViTOptions{64, 8, 3, 10, 192, 12, 3});
  const Tensor images = uniform_f64({16, 3, 64, 64}, -1, 1, 50).to(DType::f32);
  const Tensor labels = from_vector<int64_t>({0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 0, 1, 2, 3, 4, 5}, {16});
  auto step_peak = [&] {
    vit->zero_grad();
    backend::reset_peak_memory_stats(kCPU);
    const size_t before = backend::memory_stats(kCPU).allocated;
    cross_entropy((*vit)(images), labels).backward();
    return static_cast<double>(backend::max_memory_allocated(kCPU) - before);
  };
  step_peak();  // the gradients' first allocation out of the way
  const double plain = step_peak();
  nn::apply_activation_checkpointing(*vit, {"Block"});
  const double checkpointed = step_peak();
  MESSAGE("ViT training step above the model's own memory: ", plain / 1048576, " MiB plain, ", checkpointed / 1048576,
          " MiB with checkpointed blocks (", 100 * (1 - checkpointed / plain), " % lower)");
  CHECK(checkpointed < 0.6 * plain);
}

TEST_CASE("checkpoint: misuse is named") {
  const Tensor w = uniform_f64({4, 4}, -1, 1, 60).to(DType::f32).detach().requires_grad_();
  Tensor x = uniform_f64({2, 4}, -1, 1, 61).to(DType::f32);
  const Tensor y = nn::checkpoint([&](const Tensor& in) { return tanh(linear(in, w)); }, x);
  mul_(x, 2.0);  // the input changes before backward
  expect_error<AutogradError>("input modified in place", [&] { sum(y).backward(); },
                              {"checkpoint", "input 0", "modified in place", "version"});

  // A region that computes something else when run again.
  int calls = 0;
  const Tensor z = nn::checkpoint(
      [&](const Tensor& in) { return ++calls == 1 ? tanh(linear(in, w)) : exp(linear(in, w)) * linear(in, w); },
      uniform_f64({2, 4}, -1, 1, 62).to(DType::f32));
  expect_error<AutogradError>("another recompute", [&] { sum(z).backward(); }, {"recompute saved", "the same ops"});

  expect_error<ValueError>("empty function", [&] { nn::checkpoint(nn::CheckpointFunction(), {x}); }, {"empty"});
  const auto mlp = std::make_shared<nn::MLP>(4, std::vector<int64_t>{8}, 2);
  expect_error<ValueError>("no defaults", [&] { nn::default_checkpoint_modules(*mlp); }, {"MLP", "name the module types"});
  expect_error<ValueError>("unknown type", [&] { nn::apply_activation_checkpointing(*mlp, {"Block"}); },
                           {"no module of type \"Block\"", "Linear", "MLP"});
  // Outside grad mode the function just runs, and nothing is kept.
  NoGradGuard no_grad;
  CHECK_FALSE(nn::checkpoint([&](const Tensor& in) { return linear(in, w); }, x).requires_grad());
}

}  // TEST_SUITE("cpu")

EMBER_CUDA_TEST_CASE("cuda checkpoint: a region with dropout gives the run's loss and gradients on CUDA, fp32 and bf16") {
  check_region_with_dropout(Device{DeviceType::cuda, 0});
}
