// Optimizers against trajectories computed by hand in f64 from the published formulas, state_dict
// round trips, gradient clipping, and every LR scheduler against its closed form.
#include <cmath>
#include <functional>
#include <limits>
#include <memory>
#include <numbers>

#include "optim/adam.h"
#include "optim/clip_grad.h"
#include "optim/lr_scheduler.h"
#include "optim/sgd.h"
#include "tensor/error.h"
#include "tests/helpers.h"

using namespace ember;
using namespace ember_test;
using namespace ember::optim;

namespace {

using Vec = std::vector<double>;
const Tol kTol{1e-13, 1e-12};

const Vec kInit = {0.5, -1.2, 2.0, 0.0};
// The gradient of step k (deterministic, varying sign and size).
Vec grad_at(int k) {
  Vec g(kInit.size());
  for (size_t i = 0; i < g.size(); ++i) g[i] = std::sin(0.7 * k + 1.3 * static_cast<double>(i)) + 0.1 * static_cast<double>(i);
  return g;
}
Tensor param(const Vec& v = kInit) {
  Tensor p = from_vector(v, {static_cast<int64_t>(v.size())});
  p.requires_grad_(true);
  return p;
}
void set_grad(const Tensor& p, const Vec& g) { p.set_grad(from_vector(g, {static_cast<int64_t>(g.size())})); }

void check_vec(const Tensor& got, const Vec& want, const std::string& what) {
  check_values(got, Host{got.shape(), want}, kTol, what);
}

// ---- references, written from the formulas of PyTorch's docs and the LAMB paper

Vec sgd_ref(const SGDOptions& o, int steps) {
  Vec p = kInit, buf(p.size());
  for (int k = 0; k < steps; ++k) {
    Vec g = grad_at(k);
    for (size_t i = 0; i < p.size(); ++i) {
      double gi = g[i] + o.weight_decay * p[i];
      if (o.momentum != 0) {
        buf[i] = k == 0 ? gi : o.momentum * buf[i] + (1 - o.dampening) * gi;
        gi = o.nesterov ? gi + o.momentum * buf[i] : buf[i];
      }
      p[i] -= o.lr * gi;
    }
  }
  return p;
}

Vec adam_ref(const AdamOptions& o, bool decoupled, int steps) {
  Vec p = kInit, m(p.size()), v(p.size()), vmax(p.size());
  for (int k = 0; k < steps; ++k) {
    const Vec g = grad_at(k);
    const double t = k + 1;
    for (size_t i = 0; i < p.size(); ++i) {
      double gi = g[i];
      if (decoupled) p[i] *= 1 - o.lr * o.weight_decay;
      else gi += o.weight_decay * p[i];
      m[i] = o.beta1 * m[i] + (1 - o.beta1) * gi;
      v[i] = o.beta2 * v[i] + (1 - o.beta2) * gi * gi;
      vmax[i] = std::max(vmax[i], v[i]);
      const double vhat = (o.amsgrad ? vmax[i] : v[i]) / (1 - std::pow(o.beta2, t));
      const double mhat = m[i] / (1 - std::pow(o.beta1, t));
      p[i] -= o.lr * mhat / (std::sqrt(vhat) + o.eps);
    }
  }
  return p;
}

Vec lamb_ref(const LAMBOptions& o, int steps) {
  Vec p = kInit, m(p.size()), v(p.size()), r(p.size());
  for (int k = 0; k < steps; ++k) {
    const Vec g = grad_at(k);
    const double t = k + 1;
    double pn = 0, rn = 0;
    for (size_t i = 0; i < p.size(); ++i) {
      m[i] = o.beta1 * m[i] + (1 - o.beta1) * g[i];
      v[i] = o.beta2 * v[i] + (1 - o.beta2) * g[i] * g[i];
      r[i] = m[i] / (1 - std::pow(o.beta1, t)) / (std::sqrt(v[i] / (1 - std::pow(o.beta2, t))) + o.eps) +
             o.weight_decay * p[i];
      pn += p[i] * p[i];
      rn += r[i] * r[i];
    }
    pn = std::sqrt(pn);
    rn = std::sqrt(rn);
    const double trust = pn > 0 && rn > 0 ? pn / rn : 1.0;
    for (size_t i = 0; i < p.size(); ++i) p[i] -= o.lr * trust * r[i];
  }
  return p;
}

// Runs `steps` steps of opt over p with grad_at(k).
void run(Optimizer& opt, const Tensor& p, int steps, int first = 0) {
  for (int k = first; k < first + steps; ++k) {
    set_grad(p, grad_at(k));
    opt.step();
  }
}

}  // namespace

TEST_SUITE("cpu") {

TEST_CASE("optim: SGD trajectories (plain, momentum + dampening + weight decay, nesterov)") {
  std::vector<SGDOptions> cases(4);
  cases[0].lr = 0.1;
  cases[1] = {0.05, 0.9, 0.0, 0.0, false};
  cases[2] = {0.05, 0.9, 0.25, 0.01, false};
  cases[3] = {0.05, 0.8, 0.0, 0.02, true};
  for (size_t c = 0; c < cases.size(); ++c) {
    Tensor p = param();
    SGD opt({p}, cases[c]);
    run(opt, p, 5);
    check_vec(p, sgd_ref(cases[c], 5), "SGD case " + std::to_string(c));
    CHECK(opt.steps_taken() == 5);
  }
  expect_error<ValueError>("nesterov without momentum", [] { SGD({param()}, {0.1, 0.0, 0.0, 0.0, true}); },
                           {"nesterov", "momentum"});
  expect_error<ValueError>("nesterov with dampening", [] { SGD({param()}, {0.1, 0.9, 0.1, 0.0, true}); },
                           {"dampening 0.1"});
  expect_error<ValueError>("negative lr", [] { SGD({param()}, {-1.0}); }, {"lr -1"});
}

TEST_CASE("optim: Adam, AMSGrad, AdamW and LAMB trajectories") {
  AdamOptions a;  // defaults
  AdamOptions a_wd;
  a_wd.lr = 0.01;
  a_wd.weight_decay = 0.1;
  AdamOptions ams = a_wd;
  ams.amsgrad = true;
  ams.beta2 = 0.9;  // makes v shrink, so the max matters
  for (auto [name, o] : {std::pair{"Adam", a}, std::pair{"Adam wd", a_wd}, std::pair{"AMSGrad", ams}}) {
    Tensor p = param();
    Adam opt({p}, o);
    run(opt, p, 6);
    check_vec(p, adam_ref(o, false, 6), name);
    CHECK(opt.state(0).at("step").item<double>() == 6);
  }
  {
    Tensor p = param();
    AdamW opt({p});
    CHECK(opt.param_groups()[0].get("weight_decay") == 1e-2);
    run(opt, p, 6);
    check_vec(p, adam_ref(adamw_defaults(), true, 6), "AdamW defaults");
  }
  {
    AdamOptions o = adamw_defaults();
    o.lr = 0.05;
    o.weight_decay = 0.3;
    o.amsgrad = true;
    o.beta2 = 0.9;
    Tensor p = param();
    AdamW opt({p}, o);
    run(opt, p, 6);
    check_vec(p, adam_ref(o, true, 6), "AdamW amsgrad");
  }
  LAMBOptions l;
  LAMBOptions l_wd{0.02, 0.8, 0.99, 1e-6, 0.05};
  for (auto [name, o] : {std::pair{"LAMB", l}, std::pair{"LAMB wd", l_wd}}) {
    Tensor p = param();
    LAMB opt({p}, o);
    run(opt, p, 6);
    check_vec(p, lamb_ref(o, 6), name);
  }
  {  // a zero parameter: trust ratio 1
    Tensor p = param({0.0, 0.0, 0.0, 0.0});
    LAMB opt({p}, {0.1});
    set_grad(p, {1.0, -2.0, 0.5, 0.0});
    opt.step();
    // first step: r = g / (|g| + eps), trust 1
    Vec want = {-0.1 / (1 + 1e-6), 0.1 * 2 / (2 + 1e-6), -0.1 * 0.5 / (0.5 + 1e-6), 0.0};
    check_vec(p, want, "LAMB zero param");
  }
  expect_error<ValueError>("Adam beta", [] { Adam({param()}, {1e-3, 1.0}); }, {"beta1 1"});
  expect_error<DTypeError>("integer param", [] { Adam({zeros({2}, DType::i64)}); }, {"int64"});
}

TEST_CASE("optim: f32 parameters with gradients from backward") {
  Tensor p = from_vector(std::vector<float>{1.0f, -2.0f, 0.5f}, {3});
  p.requires_grad_(true);
  AdamOptions o;
  o.lr = 0.1;
  Adam opt({p}, o);
  for (int k = 0; k < 3; ++k) {
    opt.zero_grad();
    sum(mul(p, p)).backward();  // grad 2p
    opt.step();
  }
  CHECK(p.dtype() == DType::f32);
  CHECK(opt.state(0).at("exp_avg").dtype() == DType::f32);
  // f64 reference of the same three steps
  Vec x = {1.0, -2.0, 0.5}, m(3), v(3);
  for (int t = 1; t <= 3; ++t)
    for (size_t i = 0; i < 3; ++i) {
      const double g = 2 * x[i];
      m[i] = 0.9 * m[i] + 0.1 * g;
      v[i] = 0.999 * v[i] + 0.001 * g * g;
      x[i] -= 0.1 * (m[i] / (1 - std::pow(0.9, t))) / (std::sqrt(v[i] / (1 - std::pow(0.999, t))) + 1e-8);
    }
  check_values(p, Host{p.shape(), x}, tolerance(DType::f32), "f32 Adam");
  CHECK(p.requires_grad());  // still a leaf that requires grad
  CHECK(p.is_leaf());
}

TEST_CASE("optim: zero_grad, skipped parameters and param groups") {
  Tensor a = param(), b = param({1.0, 2.0}), c = param({3.0});
  SGD opt({a, b}, {0.1, 0.9});
  opt.add_param_group({c}, {{"lr", 0.5}});
  CHECK(opt.param_groups()[1].lr() == 0.5);
  CHECK(opt.param_groups()[1].get("momentum") == 0.9);  // from the defaults
  CHECK(opt.num_params() == 3);

  set_grad(a, grad_at(0));
  set_grad(c, {2.0});  // b has no grad: skipped
  opt.step();
  check_vec(b, {1.0, 2.0}, "skipped param unchanged");
  CHECK(opt.state(1).empty());
  CHECK(opt.state(0).count("momentum_buffer") == 1);
  check_vec(c, {3.0 - 0.5 * 2.0}, "group 1 uses its own lr");
  SGDOptions o{0.1, 0.9};
  check_vec(a, sgd_ref(o, 1), "group 0");

  Tensor ga = a.grad();
  opt.zero_grad(false);
  REQUIRE(a.grad().defined());
  CHECK(a.grad().is_same(ga));
  check_vec(a.grad(), {0, 0, 0, 0}, "zeroed in place");
  opt.zero_grad();
  CHECK(!a.grad().defined());
  CHECK(!c.grad().defined());
  CHECK(!b.grad().defined());

  expect_error<ValueError>("unknown option", [&] { opt.add_param_group({param()}, {{"betas", 0.1}}); }, {"betas"});
  expect_error<ValueError>("duplicate param", [&] { opt.add_param_group({a}); }, {"already"});
}

TEST_CASE("optim: state_dict round trip continues bit for bit") {
  AdamOptions o;
  o.lr = 0.01;
  o.weight_decay = 0.1;
  o.amsgrad = true;
  o.beta2 = 0.9;
  Tensor p1 = param(), q1 = param({1.0, -1.0});
  Adam a({p1}, o);
  a.add_param_group({q1}, {{"lr", 0.003}});
  auto step_both = [](Adam& opt, Tensor& p, Tensor& q, int k) {
    set_grad(p, grad_at(k));
    set_grad(q, {std::cos(k), 0.5});
    opt.step();
  };
  for (int k = 0; k < 3; ++k) step_both(a, p1, q1, k);
  const StateDict sd = a.state_dict();
  for (const char* key : {"state.0.exp_avg", "state.0.exp_avg_sq", "state.0.max_exp_avg_sq", "state.0.step",
                          "state.1.exp_avg", "param_groups.0.lr", "param_groups.1.lr", "param_groups.0.beta2",
                          "param_groups.0.params", "param_groups.1.params"})
    CHECK_MESSAGE(sd.count(key) == 1, std::string(key));
  CHECK(sd.at("state.1.step").item<double>() == 3);
  CHECK(sd.at("state.1.step").dim() == 0);
  CHECK(sd.at("param_groups.1.lr").item<double>() == 0.003);
  CHECK(sd.at("param_groups.1.params").to_vector<int64_t>() == std::vector<int64_t>{1});

  Tensor p2 = param(p1.to_vector<double>()), q2 = param(q1.to_vector<double>());
  Adam b({p2}, AdamOptions{});
  b.add_param_group({q2});
  b.load_state_dict(sd);
  CHECK(b.param_groups()[1].lr() == 0.003);
  CHECK(b.param_groups()[0].get("amsgrad") == 1);
  for (int k = 3; k < 6; ++k) {
    step_both(a, p1, q1, k);
    step_both(b, p2, q2, k);
  }
  CHECK(equal(p1, p2));
  CHECK(equal(q1, q2));
  // the saved dict is a copy
  CHECK(sd.at("state.0.step").item<double>() == 3);
}

TEST_CASE("optim: load_state_dict rejects mismatches, naming them") {
  Tensor p = param(), q = param({1.0, 2.0});
  SGD src({p, q}, {0.1, 0.9});
  set_grad(p, grad_at(0));
  set_grad(q, {1.0, 1.0});
  src.step();
  const StateDict sd = src.state_dict();

  SGD one({param()}, {0.1, 0.9});
  expect_error<ValueError>("param count", [&] { one.load_state_dict(sd); }, {"param group 0", "2", "1"});
  SGD two_groups({param()}, {0.1, 0.9});
  two_groups.add_param_group({param({1.0, 2.0})});
  expect_error<ValueError>("group count", [&] { two_groups.load_state_dict(sd); }, {"1 param groups", "2"});
  SGD shapes({param(), param({1.0, 2.0, 3.0})}, {0.1, 0.9});
  expect_error<ValueError>("shape", [&] { shapes.load_state_dict(sd); },
                           {"state.1.momentum_buffer", "(2,)", "(3,)"});
  StateDict bad = sd;
  bad["foo"] = scalar_f64(1);
  SGD ok({param(), param({1.0, 2.0})}, {0.1, 0.9});
  expect_error<ValueError>("unknown key", [&] { ok.load_state_dict(bad); }, {"'foo'"});
  ok.load_state_dict(sd);  // and the right one loads
  CHECK(ok.state(1).count("momentum_buffer") == 1);
}

TEST_CASE("optim: clip_grad_norm_ and clip_grad_value_") {
  Tensor a = param({3.0, 0.0}), b = param({0.0, 4.0, 0.0}), c = param({1.0});  // c: no grad
  set_grad(a, {3.0, 0.0});
  set_grad(b, {0.0, 4.0, 0.0});
  std::vector<Tensor> ps = {a, b, c};
  double total = clip_grad_norm_(ps, 10.0);
  CHECK(total == doctest::Approx(5.0).epsilon(1e-15));
  check_vec(a.grad(), {3.0, 0.0}, "below max_norm: untouched");
  total = clip_grad_norm_(ps, 1.0);
  CHECK(total == doctest::Approx(5.0).epsilon(1e-15));
  const double coef = 1.0 / (5.0 + 1e-6);
  check_vec(a.grad(), {3.0 * coef, 0.0}, "scaled a");
  check_vec(b.grad(), {0.0, 4.0 * coef, 0.0}, "scaled b");

  set_grad(a, {3.0, -7.0});
  set_grad(b, {0.0, 4.0, 0.0});
  total = clip_grad_norm_(ps, 2.0, std::numeric_limits<double>::infinity());
  CHECK(total == 7.0);
  check_vec(a.grad(), {3.0 * 2 / (7 + 1e-6), -7.0 * 2 / (7 + 1e-6)}, "inf-norm scaling");
  set_grad(a, {1.0, -2.0});
  set_grad(b, {2.0, 0.0, 0.0});
  total = clip_grad_norm_(ps, 100.0, 1.0);
  CHECK(total == 5.0);

  set_grad(a, {std::nan(""), 1.0});
  total = clip_grad_norm_(ps, 1.0);
  CHECK(std::isnan(total));
  CHECK(b.grad().to_vector<double>() == Vec{2.0, 0.0, 0.0});  // untouched
  set_grad(a, {std::numeric_limits<double>::infinity(), 1.0});
  CHECK(std::isinf(clip_grad_norm_(ps, 1.0)));
  expect_error<ValueError>("non-finite", [&] { clip_grad_norm_(ps, 1.0, 2.0, true); }, {"inf", "error_if_nonfinite"});
  CHECK(clip_grad_norm_({c}, 1.0) == 0.0);

  set_grad(a, {3.0, -0.5});
  clip_grad_value_(ps, 1.0);
  check_vec(a.grad(), {1.0, -0.5}, "clip_grad_value_");
}

// ---- schedulers: closed forms, f64

namespace {
SGD make_sgd(double lr = 0.1) { return SGD({param()}, {lr, 0.9}); }

void check_sequence(LRScheduler& s, Optimizer& opt, const std::function<double(int)>& want, int n,
                    const std::string& what) {
  INFO(what);
  for (int t = 0; t < n; ++t) {
    if (t > 0) s.step();
    INFO("epoch ", t);
    CHECK(s.last_epoch() == t);
    CHECK(s.get_last_lr()[0] == doctest::Approx(want(t)).epsilon(1e-13));
    CHECK(opt.param_groups()[0].lr() == s.get_last_lr()[0]);
  }
}

double one_cycle_ref(int t, double max_lr, int total, double pct, bool cos, bool three) {
  const double init = max_lr / 25, min_lr = init / 1e4;
  auto an = [&](double a, double b, double x) {
    return cos ? b + (a - b) / 2 * (std::cos(std::numbers::pi * x) + 1) : a + (b - a) * x;
  };
  const double e1 = pct * total - 1, e2 = three ? 2 * pct * total - 2 : total - 1.0, e3 = total - 1.0;
  if (t <= e1) return an(init, max_lr, t / e1);
  if (!three) return an(max_lr, min_lr, (t - e1) / (e2 - e1));
  if (t <= e2) return an(max_lr, init, (t - e1) / (e2 - e1));
  return an(init, min_lr, (t - e2) / (e3 - e2));
}
}  // namespace

TEST_CASE("optim: StepLR, MultiStepLR, CosineAnnealingLR, LinearLR") {
  {
    SGD o = make_sgd();
    StepLR s(o, 3, 0.5);
    check_sequence(s, o, [](int t) { return 0.1 * std::pow(0.5, t / 3); }, 12, "StepLR");
  }
  {
    SGD o = make_sgd();
    MultiStepLR s(o, {6, 2, 6}, 0.1);
    check_sequence(s, o, [](int t) { return 0.1 * std::pow(0.1, (t >= 2) + 2 * (t >= 6)); }, 10, "MultiStepLR");
  }
  {
    SGD o = make_sgd();
    CosineAnnealingLR s(o, 10, 0.001);
    check_sequence(s, o,
                   [](int t) { return 0.001 + (0.1 - 0.001) * (1 + std::cos(std::numbers::pi * t / 10)) / 2; }, 25,
                   "CosineAnnealingLR past T_max");
  }
  {
    SGD o = make_sgd();
    LinearLR s(o);  // 1/3 -> 1 over 5
    check_sequence(s, o, [](int t) { return 0.1 * (1.0 / 3 + (1 - 1.0 / 3) * std::min(t, 5) / 5.0); }, 9,
                   "LinearLR defaults");
  }
  {
    SGD o = make_sgd();
    LinearLR s(o, 1.0, 0.1, 4);  // decay
    check_sequence(s, o, [](int t) { return 0.1 * (1.0 + (0.1 - 1.0) * std::min(t, 4) / 4.0); }, 7, "LinearLR decay");
  }
  {  // two groups keep their own base lr
    SGD o = make_sgd();
    o.add_param_group({param()}, {{"lr", 1.0}});
    StepLR s(o, 2);
    s.step();
    s.step();
    CHECK(s.get_last_lr()[0] == doctest::Approx(0.01));
    CHECK(s.get_last_lr()[1] == doctest::Approx(0.1));
  }
  SGD o = make_sgd();
  expect_error<ValueError>("LinearLR start", [&] { LinearLR(o, 0.0); }, {"start_factor"});
  expect_error<ValueError>("StepLR size", [&] { StepLR(o, 0); }, {"step_size"});
}

TEST_CASE("optim: OneCycleLR (cos, linear, three phases) and momentum cycling") {
  {
    SGD o = make_sgd();
    OneCycleLR s(o, 1.0, 10);
    // PyTorch's sequence starts 0.04, 0.52, 1.0 (pct_start 0.3 of 10 steps: peak at step 2)
    CHECK(s.get_last_lr()[0] == doctest::Approx(0.04));
    check_sequence(s, o, [](int t) { return one_cycle_ref(t, 1.0, 10, 0.3, true, false); }, 10, "OneCycle cos");
    CHECK(o.param_groups()[0].lr() == doctest::Approx(0.04 / 1e4));  // the last step, total_steps - 1
    s.step();  // PyTorch allows last_epoch == total_steps (past the end of the curve)
    expect_error<ValueError>("past total_steps", [&] { s.step(); }, {"stepped 11", "total_steps is 10"});
  }
  {
    SGD o = make_sgd();
    OneCycleOptions opt;
    opt.cos_anneal = false;
    OneCycleLR s(o, 0.5, 20, opt);
    check_sequence(s, o, [](int t) { return one_cycle_ref(t, 0.5, 20, 0.3, false, false); }, 21, "OneCycle linear");
  }
  {
    Tensor p = param();
    Adam a({p});
    OneCycleOptions opt;
    opt.three_phase = true;
    opt.pct_start = 0.25;
    OneCycleLR s(a, 0.2, 40, opt);
    CHECK(a.param_groups()[0].get("beta1") == doctest::Approx(0.95));
    check_sequence(s, a, [](int t) { return one_cycle_ref(t, 0.2, 40, 0.25, true, true); }, 41, "OneCycle three");
  }
  {  // momentum: max -> base at the peak -> max
    SGD o = make_sgd();
    OneCycleLR s(o, 1.0, 10);
    CHECK(o.param_groups()[0].get("momentum") == doctest::Approx(0.95));
    s.step();
    s.step();
    CHECK(o.param_groups()[0].get("momentum") == doctest::Approx(0.85));
    for (int i = 0; i < 7; ++i) s.step();
    CHECK(o.param_groups()[0].get("momentum") == doctest::Approx(0.95));
  }
}

TEST_CASE("optim: SequentialLR warmup then cosine, and scheduler state_dict") {
  auto make = [](SGD& o) {
    auto warm = std::make_shared<LinearLR>(o, 0.1, 1.0, 4);
    auto cosine = std::make_shared<CosineAnnealingLR>(o, 8, 0.0);
    return std::make_unique<SequentialLR>(o, std::vector<std::shared_ptr<LRScheduler>>{warm, cosine},
                                          std::vector<int64_t>{4});
  };
  auto want = [](int t) {
    if (t < 4) return 0.1 * (0.1 + 0.9 * t / 4.0);
    return 0.1 * (1 + std::cos(std::numbers::pi * (t - 4) / 8)) / 2;
  };
  SGD o = make_sgd();
  auto s = make(o);
  check_sequence(*s, o, want, 14, "SequentialLR");

  // save mid-way, restore into a fresh chain on a fresh optimizer, and continue identically
  SGD o1 = make_sgd();
  auto s1 = make(o1);
  for (int t = 0; t < 6; ++t) s1->step();
  const StateDict sd = s1->state_dict();
  CHECK(sd.at("last_epoch").item<double>() == 6);
  CHECK(sd.count("schedulers.1.last_epoch") == 1);
  SGD o2 = make_sgd();
  o2.load_state_dict(o1.state_dict());
  auto s2 = make(o2);
  s2->load_state_dict(sd);
  CHECK(s2->get_last_lr() == s1->get_last_lr());
  for (int t = 0; t < 5; ++t) {
    s1->step();
    s2->step();
    CHECK(s1->get_last_lr() == s2->get_last_lr());
    CHECK(o1.param_groups()[0].lr() == o2.param_groups()[0].lr());
  }

  SGD o3 = make_sgd();
  StepLR a(o3, 2);
  for (int t = 0; t < 3; ++t) a.step();
  SGD o4 = make_sgd();
  StepLR b(o4, 2);
  b.load_state_dict(a.state_dict());
  CHECK(b.last_epoch() == 3);
  b.step();
  a.step();
  CHECK(a.get_last_lr() == b.get_last_lr());
  StateDict bad = a.state_dict();
  bad.erase("last_epoch");
  expect_error<ValueError>("missing entry", [&] { b.load_state_dict(bad); }, {"last_epoch"});
  SGD o5 = make_sgd();
  expect_error<ValueError>("milestones", [&] {
    SequentialLR(o5, {std::make_shared<StepLR>(o5, 2)}, {3});
  }, {"1 schedulers need 0 milestones"});
}

TEST_CASE("optim: rewinding a scheduler lands where the skipped steps were never taken") {
  auto chain = [](SGD& o) {
    auto warm = std::make_shared<LinearLR>(o, 0.1, 1.0, 4);
    auto cosine = std::make_shared<CosineAnnealingLR>(o, 8, 0.0);
    return std::make_unique<SequentialLR>(o, std::vector<std::shared_ptr<LRScheduler>>{warm, cosine},
                                          std::vector<int64_t>{4});
  };
  // 7 steps then 3 taken back (across the milestone at 4) == 4 steps; then both go on alike.
  SGD o1 = make_sgd(), o2 = make_sgd();
  auto s1 = chain(o1), s2 = chain(o2);
  for (int t = 0; t < 7; ++t) s1->step();
  s1->rewind(3);
  for (int t = 0; t < 4; ++t) s2->step();
  CHECK(s1->last_epoch() == s2->last_epoch());
  CHECK(o1.param_groups()[0].lr() == o2.param_groups()[0].lr());
  for (int t = 0; t < 5; ++t) {
    s1->step();
    s2->step();
    CHECK(o1.param_groups()[0].lr() == o2.param_groups()[0].lr());
  }
  SGD o3 = make_sgd(), o4 = make_sgd();
  CosineAnnealingLR c3(o3, 10), c4(o4, 10);
  for (int t = 0; t < 5; ++t) c3.step();
  c3.rewind(2);
  for (int t = 0; t < 3; ++t) c4.step();
  CHECK(o3.param_groups()[0].lr() == o4.param_groups()[0].lr());
  expect_error<ValueError>("too far", [&] { c3.rewind(4); }, {"cannot take back 4 steps at epoch 3"});
}

}  // TEST_SUITE
