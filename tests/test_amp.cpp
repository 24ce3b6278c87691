// Loss scaling: GradScaler (PyTorch's rules, docs/reference.md#gradscaler) and DynamicLossScaler
// (DeepSpeed's, docs/reference.md#dynamic-loss-scaling) followed step by step through scripted
// overflow patterns; an overflow step leaves weights and optimizer state bit-identical; misuse
// raises. The expected sequences are written out from the rules, one row per update.
#include <cmath>
#include <cstring>
#include <limits>

#include "optim/adam.h"
#include "optim/amp/grad_scaler.h"
#include "optim/amp/loss_scaler.h"
#include "optim/amp/master_weights.h"
#include "optim/amp/primitives.h"
#include "optim/clip_grad.h"
#include "optim/sgd.h"
#include "tensor/error.h"
#include "tests/helpers.h"

using namespace ember;
using namespace ember_test;

namespace {

const double kInf = std::numeric_limits<double>::infinity();

Tensor param(std::vector<double> v, DType dtype = DType::f32, Device device = kCPU) {
  Tensor p = from_vector(v, {static_cast<int64_t>(v.size())}).to(dtype).to(device);
  p.requires_grad_(true);
  return p;
}

// One scaled backward of sum(p * c): p's gradient is scale * c (inf where c is).
void scaled_backward(amp::GradScaler& scaler, const Tensor& p, double c) {
  scaler.scale(sum(mul(p, full_like(p, c)))).backward();
}

int64_t tracker(const amp::GradScaler& s) { return s.state_dict().at("_growth_tracker").item<int64_t>(); }

bool same_bytes(const Tensor& a, const Tensor& b) {
  const Tensor x = a.contiguous(), y = b.contiguous();
  return x.dtype() == y.dtype() && x.numel() == y.numel() &&
         std::memcmp(x.raw_data(), y.raw_data(), x.numel() * dtype_size(x.dtype())) == 0;
}

// GradScaler through a scripted pattern of clean and overflowing steps on `device`.
void scripted_grad_scaler(Device device) {
  Tensor p = param({1.0, -2.0}, DType::f32, device);
  optim::SGD opt({p}, {.lr = 0.5});
  amp::GradScaler scaler({.init_scale = 8.0, .growth_interval = 3});
  // (gradient coefficient, scale after update, tracker after update)
  struct Row { double c; double scale; int64_t tracker; };
  const Row script[] = {
      {1, 8, 1},  {1, 8, 2},   {1, 16, 0},  // the third clean step in a row doubles
      {kInf, 8, 0},                          // an overflow halves and restarts the count
      {1, 8, 1},  {std::nan(""), 4, 0},      // NaN counts as an overflow
      {1, 4, 1},  {1, 4, 2},   {1, 8, 0},
  };
  int row = 0;
  for (const Row& r : script) {
    CAPTURE(row);
    opt.zero_grad();
    scaled_backward(scaler, p, r.c);
    scaler.step(opt);
    scaler.update();
    CHECK(scaler.get_scale() == r.scale);
    CHECK(tracker(scaler) == r.tracker);
    ++row;
  }
}

// DynamicLossScaler with window 3 and hysteresis 2, its state on `device`.
void scripted_loss_scaler(Device device) {
  amp::DynamicLossScaler s({.initial_scale_power = 4, .loss_scale_window = 3, .hysteresis = 2});
  (void)s.scale(scalar_tensor(1.0, DType::f32).to(device));
  struct Row { bool overflow; double scale; int64_t hysteresis; };
  const Row script[] = {
      {false, 16, 2}, {false, 16, 2}, {false, 32, 2},  // (iter + 1) % 3 == 0: grow
      {true, 32, 1},                                   // first overflow spends hysteresis
      {true, 16, 1},                                   // none left: back off
      {false, 16, 1}, {false, 16, 1}, {false, 32, 2},  // 3 after the last overflow: grow, refill
      {true, 32, 1}, {false, 32, 1}, {true, 16, 1},    // hysteresis is not refilled by one clean step
  };
  int row = 0;
  for (const Row& r : script) {
    CAPTURE(row);
    s.update(scalar_tensor(r.overflow ? 1.0 : 0.0, DType::f32).to(device));
    CHECK(s.get_scale() == r.scale);
    CHECK(s.state_dict().at("cur_hysteresis").item<int64_t>() == r.hysteresis);
    CHECK(s.state_dict().at("cur_iter").item<int64_t>() == row + 1);
    ++row;
  }
}

}  // namespace

TEST_SUITE("cpu") {

TEST_CASE("GradScaler: defaults are PyTorch's") {
  amp::GradScaler s;
  CHECK(s.options().init_scale == 65536.0);
  CHECK(s.options().growth_factor == 2.0);
  CHECK(s.options().backoff_factor == 0.5);
  CHECK(s.options().growth_interval == 2000);
  CHECK(s.get_scale() == 65536.0);
  expect_error<ValueError>("growth_factor 1", [] { amp::GradScaler({.growth_factor = 1.0}); }, {"growth_factor", "1.0"});
  expect_error<ValueError>("backoff 1", [] { amp::GradScaler({.backoff_factor = 1.0}); }, {"backoff_factor"});
  expect_error<ValueError>("interval 0", [] { amp::GradScaler({.growth_interval = 0}); }, {"growth_interval"});
}

TEST_CASE("GradScaler: scripted overflows, growth at the interval, backoff") { scripted_grad_scaler(kCPU); }

TEST_CASE("GradScaler: unscale_ divides by the scale before clipping; the step uses unscaled grads") {
  Tensor p = param({1.0, -2.0, 3.0});
  optim::SGD opt({p}, {.lr = 0.25});
  amp::GradScaler scaler({.init_scale = 1024.0});
  scaled_backward(scaler, p, 3.0);
  CHECK(values(p.grad()) == std::vector<double>{3072, 3072, 3072});
  scaler.unscale_(opt);
  CHECK(values(p.grad()) == std::vector<double>{3, 3, 3});
  scaler.step(opt);  // unscale_ is not repeated
  CHECK(values(p) == std::vector<double>{0.25, -2.75, 2.25});
  scaler.update();
  CHECK(scaler.get_scale() == 1024.0);
}

TEST_CASE("GradScaler: a grown scale that would overflow keeps the old one") {
  Tensor p = param({1.0});
  optim::SGD opt({p}, {.lr = 0.0});
  const double big = std::ldexp(1.0, 127);  // doubling it overflows float32
  amp::GradScaler scaler({.init_scale = big, .growth_interval = 1});
  scaled_backward(scaler, p, 0.0);
  scaler.step(opt);
  scaler.update();
  CHECK(scaler.get_scale() == big);
  CHECK(tracker(scaler) == 0);
}

TEST_CASE("GradScaler: an overflow step leaves weights and optimizer state bit-identical") {
  for (int kind = 0; kind < 3; ++kind) {
    CAPTURE(kind);
    Tensor p = param({0.5, -1.5, 2.5, 4.0});
    std::unique_ptr<optim::Optimizer> opt;
    if (kind == 0) opt = std::make_unique<optim::SGD>(std::vector<Tensor>{p}, optim::SGDOptions{.lr = 0.1, .momentum = 0.9});
    if (kind == 1) opt = std::make_unique<optim::Adam>(std::vector<Tensor>{p}, optim::AdamOptions{.amsgrad = true});
    if (kind == 2) opt = std::make_unique<optim::LAMB>(std::vector<Tensor>{p});
    amp::GradScaler scaler({.init_scale = 4.0});
    scaled_backward(scaler, p, 0.3);  // a clean step first: the state exists
    scaler.step(*opt);
    scaler.update();
    const Tensor before = p.detach().clone();
    const StateDict state = opt->state_dict();
    opt->zero_grad();
    scaled_backward(scaler, p, kInf);
    scaler.step(*opt);
    CHECK(scaler.found_inf(*opt).item<double>() == 1.0);
    scaler.update();
    CHECK(same_bytes(p.detach(), before));
    for (const auto& [key, value] : opt->state_dict()) CHECK_MESSAGE(same_bytes(value, state.at(key)), key);
    CHECK(scaler.get_scale() == 2.0);
  }
}

TEST_CASE("GradScaler: misuse raises") {
  Tensor p = param({1.0});
  optim::SGD opt({p}, {.lr = 0.1});
  amp::GradScaler scaler;
  expect_error<StateError>("unscale before scale", [&] { scaler.unscale_(opt); }, {"no loss was scaled"});
  scaled_backward(scaler, p, 1.0);
  scaler.unscale_(opt);
  expect_error<StateError>("double unscale", [&] { scaler.unscale_(opt); }, {"already called"});
  scaler.step(opt);
  expect_error<StateError>("double step", [&] { scaler.step(opt); }, {"already called"});
  expect_error<StateError>("unscale after step", [&] { scaler.unscale_(opt); }, {"after step"});
  scaler.update();

  Tensor h = param({1.0}, DType::f16);
  optim::SGD half_opt({h}, {.lr = 0.1});
  amp::GradScaler s2;
  scaled_backward(s2, h, 1.0);
  expect_error<DTypeError>("f16 grads", [&] { s2.unscale_(half_opt); }, {"float16", "parameter 0"});
}

TEST_CASE("GradScaler: state_dict round trip continues the same trajectory; disabled passes through") {
  Tensor p = param({1.0});
  optim::SGD opt({p}, {.lr = 0.0});
  amp::GradScaler a({.init_scale = 32.0, .growth_interval = 4});
  for (double c : {1.0, kInf, 1.0, 1.0}) {
    opt.zero_grad();
    scaled_backward(a, p, c);
    a.step(opt);
    a.update();
  }
  amp::GradScaler b;
  b.load_state_dict(a.state_dict());
  CHECK(b.get_scale() == 16.0);
  CHECK(tracker(b) == 2);
  CHECK(b.options().growth_interval == 4);
  for (amp::GradScaler* s : {&a, &b})
    for (int i = 0; i < 2; ++i) {
      opt.zero_grad();
      scaled_backward(*s, p, 1.0);
      s->step(opt);
      s->update();
    }
  CHECK(a.get_scale() == 32.0);
  CHECK(b.get_scale() == 32.0);
  StateDict broken = a.state_dict();
  broken.erase("_growth_tracker");
  expect_error<ValueError>("missing key", [&] { b.load_state_dict(broken); }, {"_growth_tracker"});

  amp::GradScaler off({.enabled = false});
  const Tensor loss = sum(p);
  CHECK(off.scale(loss).is_same(loss));
  CHECK(off.state_dict().empty());
}

TEST_CASE("DynamicLossScaler: defaults and a scripted run with window 3 and hysteresis 2") {
  amp::DynamicLossScaler d;
  CHECK(d.get_scale() == 65536.0);
  CHECK(d.options().loss_scale_window == 1000);
  CHECK(d.options().hysteresis == 2);
  CHECK(d.options().min_loss_scale == 1.0);

  scripted_loss_scaler(kCPU);
}

TEST_CASE("DynamicLossScaler: consecutive hysteresis, the floor, the cap, a static scale") {
  amp::DynamicLossScaler c({.initial_scale_power = 3, .loss_scale_window = 100, .hysteresis = 2,
                            .consecutive_hysteresis = true});
  (void)c.scale(scalar_tensor(1.0, DType::f32));
  for (bool o : {true, false, true, false}) c.update(scalar_tensor(o ? 1.0 : 0.0, DType::f32));
  CHECK(c.get_scale() == 8.0);  // each clean step refilled the hysteresis: no backoff
  c.update(scalar_tensor(1.0, DType::f32));
  c.update(scalar_tensor(1.0, DType::f32));
  CHECK(c.get_scale() == 4.0);

  amp::DynamicLossScaler floor({.initial_scale_power = 1, .hysteresis = 1, .min_loss_scale = 1.0});
  (void)floor.scale(scalar_tensor(1.0, DType::f32));
  for (int i = 0; i < 3; ++i) floor.update(scalar_tensor(1.0, DType::f32));
  CHECK(floor.get_scale() == 1.0);

  amp::DynamicLossScaler raising({.initial_scale_power = 0, .hysteresis = 1, .raise_error_at_min_scale = true});
  (void)raising.scale(scalar_tensor(1.0, DType::f32));
  raising.update(scalar_tensor(0.0, DType::f32));
  expect_error<ValueError>("at the minimum", [&] { raising.update(scalar_tensor(1.0, DType::f32)); },
                           {"already at minimum"});

  amp::DynamicLossScaler cap({.initial_scale_power = 4, .loss_scale_window = 1, .max_loss_scale = 32.0});
  (void)cap.scale(scalar_tensor(1.0, DType::f32));
  for (int i = 0; i < 4; ++i) cap.update(scalar_tensor(0.0, DType::f32));
  CHECK(cap.get_scale() == 32.0);

  amp::DynamicLossScaler fixed({.loss_scale = 128.0, .loss_scale_window = 1});
  CHECK_FALSE(fixed.is_dynamic());
  CHECK(values(fixed.scale(scalar_tensor(0.5, DType::f32))) == std::vector<double>{64.0});
  for (bool o : {false, true, false, false}) fixed.update(scalar_tensor(o ? 1.0 : 0.0, DType::f32));
  CHECK(fixed.get_scale() == 128.0);

  expect_error<ValueError>("window 0", [] { amp::DynamicLossScaler({.loss_scale_window = 0}); }, {"loss_scale_window"});
  expect_error<ValueError>("start above the cap", [] { amp::DynamicLossScaler({.initial_scale_power = 40}); },
                           {"2^40", "max_loss_scale"});
}

TEST_CASE("DynamicLossScaler: state_dict round trip") {
  amp::DynamicLossScaler a({.initial_scale_power = 5, .loss_scale_window = 2, .hysteresis = 3});
  (void)a.scale(scalar_tensor(1.0, DType::f32));
  for (bool o : {true, false, true}) a.update(scalar_tensor(o ? 1.0 : 0.0, DType::f32));
  amp::DynamicLossScaler b({.initial_scale_power = 5, .loss_scale_window = 2, .hysteresis = 3});
  b.load_state_dict(a.state_dict());
  (void)b.scale(scalar_tensor(1.0, DType::f32));
  for (amp::DynamicLossScaler* s : {&a, &b})
    for (bool o : {true, false, false}) s->update(scalar_tensor(o ? 1.0 : 0.0, DType::f32));
  CHECK(a.state_dict().at("cur_scale").item<double>() == b.state_dict().at("cur_scale").item<double>());
  CHECK(a.state_dict().at("cur_hysteresis").item<int64_t>() == b.state_dict().at("cur_hysteresis").item<int64_t>());
  StateDict bad = a.state_dict();
  bad["cur_hysteresis"] = scalar_tensor(int64_t{7}, DType::i64);
  expect_error<ValueError>("hysteresis above the setting", [&] { b.load_state_dict(bad); }, {"cur_hysteresis 7"});
}

TEST_CASE("MasterWeightOptimizer: updates too small for float16 accumulate in the float32 masters") {
  // lr * grad = 1e-4 is under half a float16 ulp at 1.0 (2^-12): a float16 parameter stepped
  // directly never moves; with masters the 20 steps add up.
  const auto sgd = [](std::vector<Tensor> p) { return std::make_unique<optim::SGD>(std::move(p), optim::SGDOptions{.lr = 1e-4}); };
  Tensor direct = param({1.0}, DType::f16);
  auto plain = sgd({direct});
  Tensor half = param({1.0, 2.0}, DType::f16);
  Tensor kept = param({3.0});  // a float32 parameter (batch norm in naive AMP) is its own master
  amp::MasterWeightOptimizer mw({half, kept}, sgd);
  CHECK(mw.masters()[0].dtype() == DType::f32);
  CHECK(mw.masters()[1].is_same(kept));
  for (int i = 0; i < 20; ++i) {
    direct.set_grad(ones({1}, DType::f16));
    plain->step();
    half.set_grad(ones({2}, DType::f16));
    kept.set_grad(ones({1}));
    mw.step(mw.unscale_grads());
  }
  CHECK(values(direct)[0] == 1.0);
  CHECK(values(mw.masters()[0])[0] == doctest::Approx(0.998).epsilon(1e-6));
  CHECK(values(half)[0] == static_cast<double>(static_cast<float>(f16(0.998f))));  // the master rounded
  CHECK(values(kept)[0] == doctest::Approx(2.998).epsilon(1e-6));

  // An overflow (inf gradient, scaled by 1/1024) skips: masters and parameters bit-identical.
  const Tensor master_before = mw.masters()[0].detach().clone(), half_before = half.detach().clone();
  half.set_grad(from_vector<double>({kInf, 1.0}, {2}).to(DType::f16));
  kept.set_grad(ones({1}));
  const Tensor found_inf = mw.unscale_grads(scalar_tensor(1.0 / 1024, DType::f32));
  CHECK(found_inf.item<double>() == 1.0);
  mw.step(found_inf);
  CHECK(same_bytes(mw.masters()[0], master_before));
  CHECK(same_bytes(half.detach(), half_before));

  // The masters travel in state_dict: a fresh wrapper over other half values takes them back.
  Tensor other = param({0.0, 0.0}, DType::f16);
  Tensor other_kept = param({0.0});
  amp::MasterWeightOptimizer restored({other, other_kept}, sgd);
  restored.load_state_dict(mw.state_dict());
  CHECK(same_bytes(restored.masters()[0], mw.masters()[0]));
  CHECK(same_bytes(other.detach(), half.detach()));
  StateDict missing = mw.state_dict();
  missing.erase("master.0");
  expect_error<ValueError>("missing master", [&] { restored.load_state_dict(missing); }, {"master.0"});
}

TEST_CASE("MasterWeightOptimizer: stochastic rounding to bf16 is unbiased, seeded, skipped on overflow, resumable") {
  // Masters at 1 + 2^-10, an eighth of the way from bf16's 1.0 to its next value 1 + 2^-7: round to
  // nearest always gives 1.0; stochastic rounding gives 1 + 2^-7 for about one element in eight.
  const auto none = [](std::vector<Tensor> p) { return std::make_unique<optim::SGD>(std::move(p), optim::SGDOptions{.lr = 0.0}); };
  constexpr int64_t n = 1 << 16;
  const double above = 1.0 + std::ldexp(1.0, -7);
  auto make = [&](bool stochastic, uint64_t seed) {
    Tensor p = ones({n}, DType::bf16);
    p.requires_grad_(true);
    auto mw = std::make_unique<amp::MasterWeightOptimizer>(std::vector<Tensor>{p}, none,
                                                           amp::MasterWeightOptions{stochastic, seed});
    NoGradGuard no_grad;
    Tensor master = mw->masters()[0];
    fill_(master, 1.0 + std::ldexp(1.0, -10));
    return std::make_pair(p, std::move(mw));
  };
  auto share_above = [&](const Tensor& p) {
    int64_t count = 0;
    for (const double v : values(p)) count += v == above;
    return static_cast<double>(count) / n;
  };
  auto [nearest, plain] = make(false, 0);
  plain->step();
  CHECK(share_above(nearest) == 0.0);
  auto [rounded, sr] = make(true, 7);
  sr->step();
  const double share = share_above(rounded);
  CHECK(std::abs(share - 0.125) < 0.01);  // binomial sd at n = 65536: 0.0013
  for (const double v : values(rounded)) REQUIRE((v == 1.0 || v == above));
  // The next copy-back draws new noise; the same seed and step draw the same.
  const Tensor first = rounded.detach().clone();
  sr->step();
  CHECK_FALSE(same_bytes(rounded.detach(), first));
  auto [again, sr_again] = make(true, 7);
  sr_again->step();
  CHECK(same_bytes(again.detach(), first));
  // An overflow skips the copy-back: the parameters keep their bits.
  const Tensor before = rounded.detach().clone();
  sr->step(scalar_tensor(1.0, DType::f32));
  CHECK(same_bytes(rounded.detach(), before));
  // The seed and the step count travel in state_dict: a resumed wrapper draws what the first would.
  auto [resumed, sr_resumed] = make(true, 0);
  sr_resumed->load_state_dict(sr->state_dict());
  sr->step();
  sr_resumed->step();
  CHECK(same_bytes(resumed.detach(), rounded.detach()));
}

TEST_CASE("mark_first_nonfinite: the lowest slot that saw a NaN or an infinity, any float dtype and layout") {
  const auto first_of = [](const std::vector<std::pair<int32_t, Tensor>>& checks) {
    Tensor first = full({}, INT32_MAX, DType::i32);
    for (const auto& [slot, t] : checks) optim::mark_first_nonfinite(first, slot, {t});
    return first.item<int64_t>();
  };
  for (const DType d : kFloats) {
    CAPTURE(name(d));
    for (const double bad : {std::nan(""), kInf, -kInf}) {
      CAPTURE(bad);
      // 70000 elements: the bad one in the second chunk.
      std::vector<double> v(70000, 0.5);
      v[66000] = bad;
      const Tensor x = from_vector(v, {70000}).to(d), fine = ones({70000}, d);
      CHECK(first_of({{5, fine}}) == INT32_MAX);
      CHECK(first_of({{5, fine}, {7, x}, {9, x}}) == 7);  // the first to see one
      CHECK(first_of({{9, x}, {3, x}}) == 3);             // the lowest slot, whatever the order
      CHECK(first_of({{4, ones({2}, DType::i64)}, {6, zeros({0}, d)}}) == INT32_MAX);  // nothing to read
      // Layouts: transposed (read in place), a slice without the bad element, strided steps that
      // miss or hit it (copied), and a broadcast that repeats it.
      const Tensor grid = reshape(x, {700, 100});
      CHECK(first_of({{1, grid.t()}}) == 1);
      CHECK(first_of({{1, slice(x, 0, 0, 66000)}}) == INT32_MAX);
      CHECK(first_of({{1, slice(x, 0, 1, 70000, 2)}}) == INT32_MAX);
      CHECK(first_of({{1, slice(x, 0, 0, 70000, 2)}}) == 1);
      CHECK(first_of({{1, expand(slice(x, 0, 66000, 66001), {3, 1000})}}) == 1);
      CHECK(first_of({{1, expand(slice(x, 0, 0, 1), {3, 1000})}}) == INT32_MAX);
    }
  }
  Tensor several = full({}, INT32_MAX, DType::i32);
  optim::mark_first_nonfinite(several, 2, {ones({3}), full({2}, kInf, DType::f16)});
  CHECK(several.item<int64_t>() == 2);
  expect_error<DTypeError>("first", [] { optim::mark_first_nonfinite(zeros({}), 0, {ones({2})}); }, {"0-dim int32"});
}

}  // TEST_SUITE("cpu")

EMBER_CUDA_TEST_CASE("cuda mark_first_nonfinite: many tensors of every float dtype in multi-tensor launches, and views") {
  const Device gpu(DeviceType::cuda, 0);
  Generator gen(3);
  std::vector<Tensor> on_gpu;
  for (int i = 0; i < 45; ++i)  // 12 of each float dtype or so, one longer than a chunk
    on_gpu.push_back(randn({i == 7 ? 70000 : 3 + i}, kFloats[size_t(i) % kFloats.size()], &gen).to(gpu));
  for (const int bad : {-1, 7, 44}) {
    CAPTURE(bad);
    Tensor first = full({}, INT32_MAX, TensorOptions(DType::i32).with_device(gpu));
    std::vector<Tensor> checked = on_gpu;
    if (bad >= 0) checked[size_t(bad)] = full_like(checked[size_t(bad)], std::nan(""));
    optim::mark_first_nonfinite(first, 30, checked);
    optim::mark_first_nonfinite(first, 31, {checked[0]});
    CHECK(first.item<int64_t>() == (bad >= 0 ? 30 : INT32_MAX));
  }
  Tensor first = full({}, INT32_MAX, TensorOptions(DType::i32).with_device(gpu));
  optim::mark_first_nonfinite(first, 4, {full({700, 100}, kInf, TensorOptions(DType::bf16).with_device(gpu)).t()});
  optim::mark_first_nonfinite(first, 2, {expand(full({1}, -kInf, TensorOptions(DType::f16).with_device(gpu)), {3, 5})});
  CHECK(first.item<int64_t>() == 2);
}

EMBER_CUDA_TEST_CASE("cuda GradScaler and DynamicLossScaler: the same scripted runs with their state on the GPU") {
  scripted_grad_scaler(Device(DeviceType::cuda, 0));
  scripted_loss_scaler(Device(DeviceType::cuda, 0));
}

EMBER_CUDA_TEST_CASE("cuda unscale: many gradients of every float dtype in multi-tensor launches, as on the CPU") {
  const Device gpu(DeviceType::cuda, 0);
  for (const DType d : {DType::f32, DType::f64, DType::bf16}) {
    CAPTURE(dtype_name(d));
    for (int infinite = 0; infinite < 2; ++infinite) {
      // 45 gradients (two launches of 40), one longer than a chunk; the last one inf when asked.
      std::vector<Tensor> cpu = {zeros({}, DType::f32)}, gpu_grads = {zeros({}, TensorOptions(DType::f32).with_device(gpu))};
      Generator gen(5);
      for (int i = 0; i < 45; ++i) {
        Tensor g = randn({i == 7 ? 70000 : 3 + i}, d, &gen);
        if (infinite && i == 44) fill_(g, kInf);
        cpu.push_back(g);
        gpu_grads.push_back(g.to(gpu));
      }
      AmpUnscale a, b;
      run_update(a, {scalar_tensor(0.125, DType::f32)}, cpu);
      run_update(b, {scalar_tensor(0.125, DType::f32).to(gpu)}, gpu_grads);
      CHECK(gpu_grads[0].item<double>() == static_cast<double>(infinite));
      CHECK(cpu[0].item<double>() == static_cast<double>(infinite));
      for (size_t i = 1; i < cpu.size(); ++i) CHECK_MESSAGE(same_bytes(gpu_grads[i].to(kCPU), cpu[i]), i);
    }
  }
}
