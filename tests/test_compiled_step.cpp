// Whole-step capture (train/compiled_step.h, tensor/device_graph.h, tensor/capture.h): what a
// captured step refuses, the generator's device-read Philox base, learning rates read from device
// memory, and steps replayed against the same steps run eagerly, bit for bit. On the CPU a replay
// runs the step function again under the capture's rules; the cuda suite replays real CUDA graphs.
#include <doctest/doctest.h>

#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "autograd/grad_mode.h"
#include "nn/dropout.h"
#include "nn/loss.h"
#include "optim/lr_scheduler.h"
#include "optim/sgd.h"
#include "tensor/capture.h"
#include "tensor/error.h"
#include "tensor/host_sync.h"
#include "tensor/ops.h"
#include "tests/helpers.h"
#include "train/compiled_step.h"
#include "train/model_zoo.h"
#include "train/precision.h"

using namespace ember;
using namespace ember::train;

namespace {

// The message of the CaptureError that f raises; fails the test when it raises none.
std::string capture_error(const std::function<void()>& f) {
  try {
    f();
  } catch (const CaptureError& e) {
    return e.what();
  }
  FAIL("no CaptureError was raised");
  return {};
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

void check_bit_equal(const Tensor& a, const Tensor& b) {
  REQUIRE(a.shape() == b.shape());
  REQUIRE(a.dtype() == b.dtype());
  const Tensor x = a.to(kCPU).contiguous(), y = b.to(kCPU).contiguous();
  CHECK(std::memcmp(x.raw_data(), y.raw_data(), static_cast<size_t>(x.numel()) * dtype_size(x.dtype())) == 0);
}

void check_bit_equal(const StateDict& a, const StateDict& b, const std::string& what) {
  REQUIRE(a.size() == b.size());
  for (const auto& [name, t] : a) {
    INFO(what, ": ", name);
    REQUIRE(b.count(name) == 1);
    check_bit_equal(t, b.at(name));
  }
}

// A model in a precision mode with SGD (momentum, weight decay) under a one-cycle schedule, which moves
// the lr and the momentum at every step (a replay must read both: no capture per step), the same
// weights for one seed.
struct Training {
  std::shared_ptr<nn::UnaryModule> model;
  std::shared_ptr<TrainingPrecision> mode;
  std::unique_ptr<optim::LRScheduler> schedule;

  Training(const std::string& model_name, Precision precision, Device device, int64_t size) {
    manual_seed(5);
    model = make_model(model_name, {1, size, 10});
    model->to(device);
    PrecisionOptions po;
    po.precision = precision;
    po.loss_scaler.initial_scale_power = 8;  // naive_fp16: the huge batch below overflows even at 2^8
    mode = std::make_shared<TrainingPrecision>(po, *model, [](std::vector<Tensor> params) {
      return std::make_unique<optim::SGD>(std::move(params),
                                          optim::SGDOptions{.lr = 0.05, .momentum = 0.9, .weight_decay = 1e-4});
    });
    schedule = std::make_unique<optim::OneCycleLR>(mode->optimizer(), 0.05, 20);  // cycle_momentum: on
  }

  // One step: forward with dropout on the logits (a draw from the default generator), clipping to 1.
  std::vector<Tensor> step(const Tensor& images, const Tensor& labels) {
    mode->zero_grad();
    Tensor loss;
    {
      const auto autocast = mode->autocast(images.device());
      loss = cross_entropy(dropout((*model)(images).to(DType::f32), 0.25), labels);
    }
    const StepOutcome outcome = mode->backward_and_step(loss, 1.0);
    return {loss, outcome.grad_norm, outcome.skipped};
  }
};

// The batches of a run: 8 images, a partial batch of 5 at steps 6 and 9, and at step 4 values large
// enough to overflow 16-bit activations (a skipped step in the scaled modes).
std::vector<std::pair<Tensor, Tensor>> batches(int64_t steps, int64_t size, DType input, Device device) {
  Generator data(77);
  std::vector<std::pair<Tensor, Tensor>> out;
  for (int64_t i = 0; i < steps; ++i) {
    const int64_t n = (i == 6 || i == 9) ? 5 : 8;
    Tensor x = randn({n, 1, size, size}, TensorOptions(DType::f32), &data);
    if (i == 4) x = x * 1e30;
    const Tensor y = randint(0, 10, {n}, TensorOptions(DType::i64), &data);
    out.emplace_back(x.to(input).to(device), y.to(device));
  }
  return out;
}

// Runs the same steps eagerly and through a CompiledStep; checks losses, norms, skips, weights,
// optimizer state and the scaler's state are equal bit for bit.
void check_compiled_equals_eager(const std::string& model_name, Precision precision, Device device) {
  CAPTURE(model_name);
  INFO("precision ", precision_name(precision));
  const int64_t size = 16, steps = 12;
  Training eager(model_name, precision, device, size), compiled(model_name, precision, device, size);
  const auto data = batches(steps, size, eager.mode->input_dtype(), device);

  manual_seed(1234);
  std::vector<std::vector<Tensor>> eager_out;
  for (const auto& [x, y] : data) {
    std::vector<Tensor> out = eager.step(x, y);
    for (Tensor& t : out) t = t.detach().clone();
    eager_out.push_back(out);
    eager.schedule->step();
  }
  const GeneratorState after_eager = default_generator().state();

  manual_seed(1234);
  CompiledStep step([&](const std::vector<Tensor>& b) { return compiled.step(b[0], b[1]); },
                    {&compiled.mode->optimizer()}, {}, CompileOptions{.warmup_steps = 2, .max_graphs = 4});
  for (size_t i = 0; i < data.size(); ++i) {
    CAPTURE(i);
    const std::vector<Tensor> out = step({data[i].first, data[i].second});
    for (size_t k = 0; k < out.size(); ++k) check_bit_equal(out[k], eager_out[i][k]);
    compiled.schedule->step();
  }
  CHECK(step.stats().captures == 1);  // the 8-image batches (whatever the lr and momentum); the two partial ones stay in warm-up
  CHECK(step.stats().replays == 8);
  CHECK(step.stats().eager == 4);
  CHECK(default_generator().state().offset == after_eager.offset);  // replays advanced it as eagerly
  check_bit_equal(compiled.model->state_dict(), eager.model->state_dict(), "weights");
  check_bit_equal(compiled.mode->optimizer().state_dict(), eager.mode->optimizer().state_dict(), "optimizer");
  check_bit_equal(compiled.mode->state_dict(), eager.mode->state_dict(), "scaler and masters");
  if (precision == Precision::naive_fp16) CHECK(eager_out[4][2].item<float>() == 1.0f);  // the overflow was skipped
}

}  // namespace

TEST_CASE("capture: a captured step refuses host reads and names them" * doctest::test_suite("cpu")) {
  const Tensor t = full({}, 2.0);
  const int64_t syncs = host_sync_count();
  const capture::Guard capturing;
  CHECK(contains(capture_error([&] { (void)t.item<float>(); }), "item()"));
  CHECK(contains(capture_error([&] { (void)t.to_vector<double>(); }), "float32 tensor of shape ()"));
  CHECK(contains(capture_error([] { count_host_sync("Stream::synchronize"); }), "Stream::synchronize"));
  {
    const capture::RunningOp running("nonzero");
    CHECK(contains(capture_error([] { count_host_sync("a blocking copy"); }), "(in nonzero)"));
  }
  CHECK(host_sync_count() == syncs);  // refused, not counted
  // Host-side draws and draws from a generator the capture does not own would repeat every replay.
  Generator stray(3);
  CHECK(contains(capture_error([&] { (void)rand({4}, {}, &stray); }), "does not own"));
  CHECK(contains(capture_error([&] { (void)stray.reserve(1); }), "host-side draw"));
}

TEST_CASE("capture: the refusals end with the guard, and nest" * doctest::test_suite("cpu")) {
  const Tensor t = full({}, 2.0);
  {
    const capture::Guard outer;
    {
      const capture::Guard inner;
      CHECK(capture::active());
    }
    CHECK(capture::active());
  }
  CHECK_FALSE(capture::active());
  CHECK(t.item<float>() == 2.0f);
}

TEST_CASE("capture: draws through a generator's device base equal the eager draws" * doctest::test_suite("cpu")) {
  // Eager: uniform, normal, integers and dropout from seed 9 after 5 blocks.
  Generator eager(9);
  eager.reserve(5);
  const Tensor u = rand({7}, {}, &eager), n = randn({6}, DType::f64, &eager), k = randint(0, 100, {5}, DType::i64, &eager);
  const Tensor d = dropout(ones({33}), 0.5, true, &eager);
  const uint64_t drawn = eager.state().offset - 5;

  // Captured: the base holds {seed, offset} as a replay's host writes it; the generator itself has
  // another seed and offset, which the draws must not use.
  Generator captured(1);
  const Tensor base = from_vector(std::vector<int64_t>{9, 5}, {2});
  captured.begin_capture(static_cast<const uint64_t*>(base.raw_data()), kCPU);
  Tensor cu, cn, ck, cd;
  {
    const capture::Guard capturing;
    cu = rand({7}, {}, &captured);
    cn = randn({6}, DType::f64, &captured);
    ck = randint(0, 100, {5}, DType::i64, &captured);
    cd = dropout(ones({33}), 0.5, true, &captured);
  }
  CHECK(captured.end_capture() == drawn);
  CHECK(captured.state().offset == 0);  // the replay's caller advances it
  check_bit_equal(cu, u);
  check_bit_equal(cn, n);
  check_bit_equal(ck, k);
  check_bit_equal(cd, d);
  CHECK_THROWS_AS(captured.end_capture(), StateError);
  captured.begin_capture(static_cast<const uint64_t*>(base.raw_data()), kCPU);
  CHECK_THROWS_AS(captured.begin_capture(static_cast<const uint64_t*>(base.raw_data()), kCPU), StateError);
  captured.end_capture();
}

TEST_CASE("capture: the optimizers read the learning rate and momentum from memory" * doctest::test_suite("cpu")) {
  // A step after the lr changed equals a fresh optimizer's step at that lr; in a capture, an lr that
  // was not staged before is refused by name.
  manual_seed(2);
  const Tensor start = randn({5, 3});
  Tensor p = start.clone();
  p.requires_grad_(true);
  optim::SGD sgd({p}, optim::SGDOptions{.lr = 0.1, .momentum = 0.5});
  for (double lr : {0.1, 0.02}) {
    sgd.param_groups()[0].set_lr(lr);
    p.set_grad(full({5, 3}, 0.25));
    sgd.step();
  }
  const Tensor changed = p.detach();
  Tensor reference;
  {  // by hand: buffer g, then 0.5 g + g; p -= lr * buffer
    NoGradGuard no_grad;
    reference = start - 0.1 * full({5, 3}, 0.25);
    reference = reference - 0.02 * (0.5 * full({5, 3}, 0.25) + full({5, 3}, 0.25));
  }
  CHECK(max(abs(changed - reference)).item<double>() < 1e-6);  // f32 rounding of the two orders
  sgd.param_groups()[0].set_lr(0.5);
  const capture::Guard capturing;
  const std::string message = capture_error([&] { sgd.step(); });
  CHECK(contains(message, "lr of param group 0 is 0.5"));
  CHECK(contains(message, "read 0.02"));
  sgd.param_groups()[0].set_lr(0.02);  // as staged: the momentum is what differs now
  sgd.param_groups()[0].options["momentum"] = 0.7;
  const std::string momentum = capture_error([&] { sgd.step(); });
  CHECK(contains(momentum, "momentum of param group 0 is 0.7"));
  CHECK(contains(momentum, "read 0.5"));
}

TEST_CASE("CompiledStep: replays equal the eager steps bit for bit" * doctest::test_suite("cpu")) {
  for (const Precision p : {Precision::fp32, Precision::amp_bf16, Precision::naive_fp16})
    for (const std::string model : {"mlp", "cnn"}) check_compiled_equals_eager(model, p, kCPU);
}

EMBER_CUDA_TEST_CASE("cuda CompiledStep: CUDA graph replays equal the eager steps bit for bit") {
  // Deterministic mode: otherwise cuDNN may pick a different (atomics-based) backward algorithm in
  // each run, and eager steps would not equal each other bit for bit either.
  const ember_test::DeterministicScope deterministic;
  const Device gpu(DeviceType::cuda, 0);
  for (const Precision p : {Precision::fp32, Precision::amp_bf16, Precision::naive_fp16})
    for (const std::string model : {"mlp", "cnn", "resnet18"}) check_compiled_equals_eager(model, p, gpu);
}

namespace {

// An fp32 MLP step on device whose body is `body` (the plain step when empty).
struct TinyRun {
  Training training;
  std::vector<std::pair<Tensor, Tensor>> data;
  explicit TinyRun(Device device) : training("mlp", Precision::fp32, device, 8), data(batches(10, 8, DType::f32, device)) {}
};

void check_refuses_item(Device device) {
  TinyRun run(device);
  CompiledStep step(
      [&](const std::vector<Tensor>& b) {
        std::vector<Tensor> out = run.training.step(b[0], b[1]);
        if (out[0].item<float>() < 0) out[0] = -out[0];  // a branch on a device value
        return out;
      },
      {&run.training.mode->optimizer()}, {}, CompileOptions{.warmup_steps = 1});
  (void)step({run.data[0].first, run.data[0].second});  // eager: allowed
  const std::string message = capture_error([&] { (void)step({run.data[1].first, run.data[1].second}); });
  CHECK(contains(message, "item()"));
  CHECK(contains(message, "captured step"));
  CHECK_FALSE(capture::active());
  // The failed capture's backward left gradients (in graph memory on a GPU): dropped.
  for (const optim::ParamGroup& group : run.training.mode->optimizer().param_groups())
    for (const Tensor& p : group.params) CHECK_FALSE(p.grad().defined());
}

}  // namespace

TEST_CASE("CompiledStep: a host read in the step raises CaptureError naming it" * doctest::test_suite("cpu")) {
  check_refuses_item(kCPU);
}

EMBER_CUDA_TEST_CASE("cuda CompiledStep: a host read in the step raises CaptureError at capture, naming it") {
  check_refuses_item(Device(DeviceType::cuda, 0));
}

TEST_CASE("CompiledStep: a changed hyperparameter captures again; shapes past max_graphs run eagerly" *
          doctest::test_suite("cpu")) {
  TinyRun run(kCPU);
  CompiledStep step([&](const std::vector<Tensor>& b) { return run.training.step(b[0], b[1]); },
                    {&run.training.mode->optimizer()}, {}, CompileOptions{.warmup_steps = 1, .max_graphs = 1});
  auto call = [&](size_t i) { (void)step({run.data[i].first, run.data[i].second}); };
  call(0);  // warm-up
  call(1);  // capture and replay
  CHECK(step.stats().captures == 1);
  run.training.mode->optimizer().param_groups()[0].options["momentum"] = 0.8;  // read from memory: a replay
  call(2);
  CHECK(step.stats().captures == 1);
  run.training.mode->optimizer().param_groups()[0].options["weight_decay"] = 2e-4;  // baked in: captured again
  call(3);
  CHECK(step.stats().captures == 2);
  CHECK(step.stats().replays == 3);
  call(6);  // 5 images: warm-up, then eager for good (one graph at most)
  call(9);
  CHECK(step.stats().captures == 2);
  CHECK(step.stats().eager == 3);
}

TEST_CASE("CompiledStep: bad arguments" * doctest::test_suite("cpu")) {
  auto body = [](const std::vector<Tensor>& b) { return b; };
  CHECK_THROWS_AS(CompiledStep(body, {}, {}, CompileOptions{.warmup_steps = 0}), ValueError);
  CHECK_THROWS_AS(CompiledStep(body, {}, {}, CompileOptions{.max_graphs = -1}), ValueError);
  CHECK_THROWS_AS(CompiledStep(StepFunction(), {}), ValueError);
  CHECK_THROWS_AS(CompiledStep(body, {nullptr}), ValueError);
  CompiledStep step(body, {});
  CHECK_THROWS_AS(step({}), ValueError);
  CHECK_THROWS_AS(step({Tensor()}), ValueError);
}
