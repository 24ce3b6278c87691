// Optimizers against trajectories computed by hand in f64 from the published formulas, state_dict
// round trips, gradient clipping, and every LR scheduler against its closed form.
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <numbers>
#include <string>

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

template <class Options>  // AdamOptions or AdamWOptions
Vec adam_ref(const Options& o, bool decoupled, int steps) {
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


// Every optimizer configuration of the trajectory tests, with its f64 reference.
struct Config {
  std::string name;
  std::function<std::unique_ptr<Optimizer>(const Tensor&)> make;
  std::function<Vec(int)> ref;
};

std::vector<Config> configs() {
  std::vector<Config> c;
  const std::vector<SGDOptions> sgd = {{0.1}, {0.05, 0.9}, {0.05, 0.9, 0.25, 0.01}, {0.05, 0.8, 0.0, 0.02, true}};
  for (size_t i = 0; i < sgd.size(); ++i)
    c.push_back({"SGD " + std::to_string(i), [o = sgd[i]](const Tensor& p) { return std::make_unique<SGD>(std::vector{p}, o); },
                 [o = sgd[i]](int n) { return sgd_ref(o, n); }});
  AdamOptions wd;
  wd.lr = 0.01;
  wd.weight_decay = 0.1;
  AdamOptions ams = wd;
  ams.amsgrad = true;
  ams.beta2 = 0.9;
  for (auto [name, o] : {std::pair{"Adam", AdamOptions{}}, std::pair{"Adam wd", wd}, std::pair{"AMSGrad", ams}})
    c.push_back({name, [o](const Tensor& p) { return std::make_unique<Adam>(std::vector{p}, o); },
                 [o](int n) { return adam_ref(o, false, n); }});
  const AdamWOptions w;
  const AdamWOptions w_ams{.lr = ams.lr, .beta2 = ams.beta2, .weight_decay = 0.3, .amsgrad = true};
  for (auto [name, o] : {std::pair{"AdamW", w}, std::pair{"AdamW amsgrad", w_ams}})
    c.push_back({name, [o](const Tensor& p) { return std::make_unique<AdamW>(std::vector{p}, o); },
                 [o](int n) { return adam_ref(o, true, n); }});
  for (auto [name, o] : {std::pair{"LAMB", LAMBOptions{}}, std::pair{"LAMB wd", LAMBOptions{0.02, 0.8, 0.99, 1e-6, 0.05}}})
    c.push_back({name, [o](const Tensor& p) { return std::make_unique<LAMB>(std::vector{p}, o); },
                 [o](int n) { return lamb_ref(o, n); }});
  return c;
}

std::vector<unsigned char> bytes_of(const Tensor& t) {
  const Tensor c = t.to(kCPU).contiguous();
  std::vector<unsigned char> b(static_cast<size_t>(c.numel() * dtype_size(c.dtype())));
  if (!b.empty()) std::memcpy(b.data(), c.raw_data(), b.size());
  return b;
}

// The bytes of every parameter and state tensor of `opt`, by name.
std::map<std::string, std::vector<unsigned char>> snapshot(const Optimizer& opt) {
  std::map<std::string, std::vector<unsigned char>> s;
  int64_t i = 0;
  for (const auto& g : opt.param_groups())
    for (const auto& p : g.params) {
      s["param." + std::to_string(i)] = bytes_of(p);
      for (const auto& [k, t] : opt.state(i)) s["state." + std::to_string(i) + "." + k] = bytes_of(t);
      ++i;
    }
  return s;
}

Tensor f32_scalar(double v, Device device = kCPU) { return scalar_tensor(v, TensorOptions(DType::f32).with_device(device)); }

const double kNaN = std::numeric_limits<double>::quiet_NaN();
const double kInf = std::numeric_limits<double>::infinity();
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
  // NaN compares false with everything: a `lr < 0` check let it through.
  expect_error<ValueError>("NaN lr", [] { SGD({param()}, {std::nan("")}); }, {"lr nan"});
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
    check_vec(p, adam_ref(AdamWOptions{}, true, 6), "AdamW defaults");
  }
  {
    AdamWOptions o;
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
  expect_error<ValueError>("Adam NaN eps", [] { Adam({param()}, {1e-3, 0.9, 0.999, std::nan("")}); }, {"eps nan"});
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

TEST_CASE("optim: a parameter listed twice is refused, within a group or across groups") {
  Tensor a = param(), b = param({1.0, 2.0});
  // Stepped once per listing, it would move twice as far.
  expect_error<ValueError>("twice in a group", [&] { SGD({a, b, a}, {0.1}); }, {"parameters 0 and 2", "same tensor"});
  SGD opt({a}, {0.1});
  expect_error<ValueError>("in another group", [&] { opt.add_param_group({b, a}, {}); }, {"parameter 1", "another group"});
  expect_error<ValueError>("non-leaf", [&] { SGD({a * 2}, {0.1}); }, {"not a leaf"});
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
  // The group count matches, but the options name a group the optimizer lacks: every option of
  // group 0 moved to group 7 (this wrote past the optimizer's groups before the index was checked).
  StateDict moved;
  for (const auto& [key, t] : sd)
    moved[key.starts_with("param_groups.0.") && key != "param_groups.0.params" ? "param_groups.7." + key.substr(15)
                                                                               : key] = t;
  expect_error<ValueError>("a group index past the groups", [&] { ok.load_state_dict(moved); },
                           {"'param_groups.7.", "names param group 7, the optimizer has 1"});
  CHECK(ok.param_groups().size() == 1);
  ok.load_state_dict(sd);  // and the right one loads
  CHECK(ok.state(1).count("momentum_buffer") == 1);
}

TEST_CASE("optim: load_state_dict checks options as the constructor does, steps as counts, ids as PyTorch") {
  Tensor p = param(), q = param({1.0, 2.0});
  Adam src({p, q}, AdamOptions{0.1});
  set_grad(p, grad_at(0));
  set_grad(q, {1.0, 1.0});
  src.step();
  const StateDict sd = src.state_dict();
  Adam target({param(), param({1.0, 2.0})}, AdamOptions{0.1});
  const auto refused = [&](const std::string& key, const Tensor& value, std::initializer_list<const char*> parts) {
    StateDict bad = sd;
    bad[key] = value;
    INFO(key);
    expect_error<ValueError>(key.c_str(), [&] { target.load_state_dict(bad); }, parts);
    CHECK(target.param_groups()[0].options.at("lr") == 0.1);  // nothing changed
    CHECK(target.state(0).empty());
  };
  const double nan = std::numeric_limits<double>::quiet_NaN();
  refused("param_groups.0.lr", scalar_f64(nan), {"param_groups.0", "invalid lr nan"});
  refused("param_groups.0.lr", scalar_f64(-1), {"invalid lr -1"});
  refused("param_groups.0.beta2", scalar_f64(1.5), {"invalid beta2 1.5"});
  refused("param_groups.0.amsgrad", scalar_f64(2), {"invalid amsgrad 2"});
  refused("param_groups.0.initial_lr", scalar_f64(std::numeric_limits<double>::infinity()), {"initial_lr is inf"});
  refused("state.0.step", scalar_f64(-1), {"state.0.step is -1, not a step count"});
  refused("state.0.step", scalar_f64(2.5), {"not a step count"});
  refused("param_groups.0.params", from_vector(std::vector<int64_t>{0, 0}, {2}), {"parameter id 0 is listed twice"});
  refused("param_groups.0.params", from_vector(std::vector<int64_t>{0, -3}, {2}), {"holds -3, not a parameter id"});
  refused("state.1.exp_avg", from_vector(std::vector<int64_t>{1, 2}, {2}), {"state.1.exp_avg is int64"});
  SGD sgd({param()}, {0.1, 0.9});
  StateDict nesterov = sgd.state_dict();
  nesterov["param_groups.0.nesterov"] = scalar_f64(2);
  expect_error<ValueError>("nesterov 2", [&] { sgd.load_state_dict(nesterov); }, {"invalid nesterov 2"});

  // PyTorch's rule: "params" holds the ids the state keys use, matched to the parameters by position.
  StateDict renumbered;
  for (const auto& [key, t] : sd) {
    std::string k = key;
    if (k.starts_with("state.0.")) k = "state.7." + k.substr(8);
    if (k.starts_with("state.1.")) k = "state.3." + k.substr(8);
    renumbered[k] = t;
  }
  renumbered["param_groups.0.params"] = from_vector(std::vector<int64_t>{7, 3}, {2});
  target.load_state_dict(renumbered);
  CHECK(equal(target.state(1).at("exp_avg"), src.state(1).at("exp_avg")));
  CHECK(equal(target.state(0).at("exp_avg"), src.state(0).at("exp_avg")));
  renumbered["state.5.exp_avg"] = src.state(0).at("exp_avg");
  expect_error<ValueError>("unlisted id", [&] { target.load_state_dict(renumbered); },
                           {"state for parameter id 5, which no param group lists"});
  // A group added with options the constructor would refuse is refused too.
  expect_error<ValueError>("add_param_group", [&] { target.add_param_group({param()}, {{"lr", -2.0}}); },
                           {"invalid lr -2"});
}

TEST_CASE("optim: clip_grad_norm_ and clip_grad_value_") {
  Tensor a = param({3.0, 0.0}), b = param({0.0, 4.0, 0.0}), c = param({1.0});  // c: no grad
  set_grad(a, {3.0, 0.0});
  set_grad(b, {0.0, 4.0, 0.0});
  std::vector<Tensor> ps = {a, b, c};
  double total = clip_grad_norm_(ps, 10.0).item<double>();
  CHECK(total == doctest::Approx(5.0).epsilon(1e-15));
  check_vec(a.grad(), {3.0, 0.0}, "below max_norm: untouched");
  total = clip_grad_norm_(ps, 1.0).item<double>();
  CHECK(total == doctest::Approx(5.0).epsilon(1e-15));
  const double coef = 1.0 / (5.0 + 1e-6);
  check_vec(a.grad(), {3.0 * coef, 0.0}, "scaled a");
  check_vec(b.grad(), {0.0, 4.0 * coef, 0.0}, "scaled b");

  set_grad(a, {3.0, -7.0});
  set_grad(b, {0.0, 4.0, 0.0});
  total = clip_grad_norm_(ps, 2.0, std::numeric_limits<double>::infinity()).item<double>();
  CHECK(total == 7.0);
  check_vec(a.grad(), {3.0 * 2 / (7 + 1e-6), -7.0 * 2 / (7 + 1e-6)}, "inf-norm scaling");
  set_grad(a, {1.0, -2.0});
  set_grad(b, {2.0, 0.0, 0.0});
  total = clip_grad_norm_(ps, 100.0, 1.0).item<double>();
  CHECK(total == 5.0);

  set_grad(a, {std::nan(""), 1.0});
  total = clip_grad_norm_(ps, 1.0).item<double>();
  CHECK(std::isnan(total));
  CHECK(b.grad().to_vector<double>() == Vec{2.0, 0.0, 0.0});  // untouched
  set_grad(a, {std::numeric_limits<double>::infinity(), 1.0});
  CHECK(std::isinf(clip_grad_norm_(ps, 1.0).item<double>()));
  expect_error<ValueError>("non-finite", [&] { clip_grad_norm_(ps, 1.0, 2.0, true); }, {"inf", "error_if_nonfinite"});
  CHECK(clip_grad_norm_({c}, 1.0).item<double>() == 0.0);

  set_grad(a, {3.0, -0.5});
  clip_grad_value_(ps, 1.0);
  check_vec(a.grad(), {1.0, -0.5}, "clip_grad_value_");
}

TEST_CASE("optim: found_inf skips the whole step, leaving parameters and state bit-identical") {
  const Tensor skip = f32_scalar(1), go = f32_scalar(0);
  for (const Config& c : configs()) {
    INFO(c.name);
    Tensor p = param();
    auto opt = c.make(p);
    // A skipped first step leaves the parameter as it was and no trace in the trajectory.
    p.set_grad(from_vector(Vec{kNaN, 1.0, -2.0, 3.0}, {4}));
    opt->step({skip});
    CHECK(bytes_of(p) == bytes_of(param()));
    for (int k = 0; k < 2; ++k) {
      set_grad(p, grad_at(k));
      opt->step({go});
    }
    const auto before = snapshot(*opt);
    set_grad(p, {kInf, kNaN, 1e300, -1.0});
    opt->step({skip});
    CHECK(snapshot(*opt) == before);
    for (int k = 2; k < 5; ++k) {
      set_grad(p, grad_at(k));
      opt->step({go});
    }
    check_vec(p, c.ref(5), "five steps taken around two skipped ones");
    if (opt->state(0).count("step")) CHECK(opt->state(0).at("step").item<double>() == 5);
    CHECK(opt->steps_taken() == 7);
  }
}

TEST_CASE("optim: grad_scale divides the gradients before use") {
  for (const Config& c : configs()) {
    for (double scale : {1024.0, 3.0}) {
      INFO(c.name, " scale ", scale);
      Tensor p = param(), q = param();
      auto plain = c.make(p), scaled = c.make(q);
      for (int k = 0; k < 5; ++k) {
        set_grad(p, grad_at(k));
        plain->step();
        Vec g = grad_at(k);
        for (auto& x : g) x *= scale;
        set_grad(q, g);
        scaled->step({f32_scalar(0), f32_scalar(scale)});
      }
      if (scale == 1024.0) CHECK(equal(p, q));  // a power of two unscales exactly
      else check_vec(q, values(p), "scaled by 3");
    }
  }
  Tensor p = param();
  SGD opt({p}, {0.1});
  set_grad(p, grad_at(0));
  expect_error<DTypeError>("f64 found_inf", [&] { opt.step({scalar_f64(0)}); }, {"found_inf", "float32", "float64"});
  expect_error<DTypeError>("two-element grad_scale", [&] { opt.step({Tensor(), zeros({2})}); }, {"grad_scale", "(2,)"});
  p.set_grad(zeros({4}, DType::f32));
  expect_error<DTypeError>("f32 gradient of an f64 parameter", [&] { opt.step(); }, {"parameter 0", "float64", "float32"});
}

TEST_CASE("optim: f16 and bf16 parameters track the f32 trajectory") {
  constexpr int kSteps = 6;
  for (const Config& c : configs()) {
    for (DType d : {DType::f16, DType::bf16}) {
      INFO(c.name, " ", name(d));
      // Leaves of the lower dtypes (a cast of a parameter is an op's result, which optimizers refuse).
      Tensor p32 = param().detach().to(DType::f32).requires_grad_(true);
      Tensor p16 = param().detach().to(d).requires_grad_(true);
      auto o32 = c.make(p32), o16 = c.make(p16);
      for (auto* o : {o32.get(), o16.get()}) o->param_groups()[0].set_lr(0.05);  // moves the weights well past rounding
      for (int k = 0; k < kSteps; ++k) {
        p32.set_grad(from_vector(grad_at(k), {4}).to(DType::f32));
        p16.set_grad(from_vector(grad_at(k), {4}).to(d));
        o32->step();
        o16->step();
      }
      CHECK(p16.dtype() == d);
      for (const auto& [k, t] : o16->state(0))
        if (k != "step") CHECK(t.dtype() == d);
      // Each step rounds the weights (|p| < 2.5) to d: at most half an ulp, 2^-11 (f16) or 2^-8 (bf16)
      // of 2.5 per step, and the rounded state adds as much again.
      const double ulp = d == DType::f16 ? std::ldexp(1.0, -10) : std::ldexp(1.0, -7);
      check_values(p16, to_host(p32), Tol{kSteps * 2.5 * ulp, 0}, "half trajectory");
    }
  }
}

TEST_CASE("optim: total_grad_norm against an f64 reference") {
  const std::vector<Shape> shapes = {{70000}, {3, 5}, {0}, {1}};  // 70000: two chunks of 65536
  for (DType d : kFloats) {
    std::vector<Tensor> ps;
    Vec all;
    for (size_t i = 0; i < shapes.size(); ++i) {
      Tensor p = zeros(shapes[i], d);
      p.set_grad(make_tensor(random_values(numel(shapes[i]), d, -2, 2, false, 7 + i), shapes[i], d));
      for (double x : values(p.grad())) all.push_back(x);  // the values as stored in d
      ps.push_back(p);
    }
    ps.push_back(zeros({2}, d));  // no gradient: ignored
    for (double p : {1.0, 2.0, 3.0, kInf}) {
      INFO(name(d), " p ", p);
      double want = 0;
      for (double x : all) want = std::isinf(p) ? std::max(want, std::fabs(x)) : want + std::pow(std::fabs(x), p);
      if (!std::isinf(p)) want = std::pow(want, 1 / p);
      const Tensor got = total_grad_norm(ps, p);
      CHECK(got.dim() == 0);
      CHECK(got.dtype() == (d == DType::f64 ? DType::f64 : DType::f32));
      check_values(got, Host{{}, {want}}, d == DType::f64 ? Tol{0, 1e-12} : Tol{0, 1e-6}, "total norm");
    }
  }
  Tensor a = zeros({2}), b = zeros({3}, DType::f32);
  a.set_grad(from_vector(Vec{3.0, 0.0}, {2}));
  b.set_grad(from_vector(std::vector<float>{0, 4, 0}, {3}));
  CHECK(total_grad_norm({a, b}).dtype() == DType::f64);  // mixed: the wider
  CHECK(total_grad_norm({a, b}).item<double>() == 5.0);
  for (double bad : {kNaN, kInf}) {
    a.set_grad(from_vector(Vec{bad, 1.0}, {2}));
    for (double p : {1.0, 2.0, kInf}) {
      const double got = total_grad_norm({a, b}, p).item<double>();
      CHECK(std::isnan(bad) ? std::isnan(got) : std::isinf(got));
    }
  }
  CHECK(total_grad_norm({zeros({2})}).item<double>() == 0.0);
  expect_error<ValueError>("norm_type 0", [&] { total_grad_norm({a}, 0.0); }, {"norm_type", "0"});
}

TEST_CASE("optim: clip_grad_norm_ on f32 gradients, and non-finite totals leave them bit-identical") {
  Tensor a = zeros({70000}, DType::f32), b = zeros({5}, DType::f32);
  a.set_grad(make_tensor(random_values(70000, DType::f32, -1, 1, false, 3), {70000}, DType::f32));
  b.set_grad(make_tensor(random_values(5, DType::f32, -1, 1, false, 4), {5}, DType::f32));
  const Vec ga = values(a.grad()), gb = values(b.grad());
  double sq = 0;
  for (double x : ga) sq += x * x;
  for (double x : gb) sq += x * x;
  const double total = std::sqrt(sq), coef = 2.0 / (total + 1e-6);
  CHECK(clip_grad_norm_({a, b}, 2.0).item<double>() == doctest::Approx(total).epsilon(1e-6));
  Vec wa = ga, wb = gb;
  for (auto& x : wa) x *= coef;
  for (auto& x : wb) x *= coef;
  check_values(a.grad(), Host{{70000}, wa}, tolerance(DType::f32), "a clipped");
  check_values(b.grad(), Host{{5}, wb}, tolerance(DType::f32), "b clipped");

  for (DType d : {DType::f32, DType::f64})
    for (double bad : {kNaN, kInf}) {
      INFO(name(d), " ", bad);
      Tensor x = zeros({3}, d), y = zeros({2}, d);
      x.set_grad(from_vector(Vec{bad, -3.0, 0.5}, {3}).to(d));
      y.set_grad(from_vector(Vec{7.0, 1e-3}, {2}).to(d));
      const auto bx = bytes_of(x.grad()), by = bytes_of(y.grad());
      const double t = clip_grad_norm_({x, y}, 1.0).item<double>();
      CHECK(!std::isfinite(t));
      CHECK(bytes_of(x.grad()) == bx);
      CHECK(bytes_of(y.grad()) == by);
    }
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

// ---- the CUDA kernels against the CPU kernels

namespace {

const Device kCuda{DeviceType::cuda, 0};

// Runs `steps` steps of a config over several parameters on `device` (one of them longer than a
// chunk), skipping step 2 with found_inf and scaling the gradients by 256; returns the parameters
// and the state on the host.
std::map<std::string, Tensor> cuda_trajectory(const Config& c, DType d, Device device, int steps) {
  const std::vector<Shape> shapes = {{4}, {70000}, {0}, {3, 7}};
  std::vector<Tensor> ps;
  for (size_t i = 0; i < shapes.size(); ++i)
    ps.push_back(make_tensor(random_values(numel(shapes[i]), d, -2, 2, false, 11 + i), shapes[i], d, device));
  auto opt = c.make(ps[0]);
  opt->add_param_group({ps[1], ps[2], ps[3]});
  Tensor found_inf = f32_scalar(0, device);
  const Tensor scale = f32_scalar(256, device);
  for (int k = 0; k < steps; ++k) {
    for (size_t i = 0; i < ps.size(); ++i) {
      Vec g = random_values(ps[i].numel(), DType::f64, -256, 256, false, 100 * k + i);
      if (k == 2 && i == 1) g[5] = kNaN;  // the skipped step's gradients
      ps[i].set_grad(make_tensor(g, ps[i].shape(), d, device));
    }
    fill_(found_inf, k == 2 ? 1.0 : 0.0);
    opt->step({found_inf, scale});
  }
  std::map<std::string, Tensor> result;
  for (size_t i = 0; i < ps.size(); ++i) {
    result["param." + std::to_string(i)] = ps[i].to(kCPU);
    for (const auto& [k, t] : opt->state(static_cast<int64_t>(i))) result["state." + std::to_string(i) + "." + k] = t.to(kCPU);
  }
  return result;
}

}  // namespace

EMBER_CUDA_TEST_CASE("cuda optimizers: trajectories with a skipped and a scaled step match the CPU kernels") {
  for (const Config& c : configs())
    for (DType d : kFloats) {
      INFO(c.name, " ", name(d));
      const auto cpu = cuda_trajectory(c, d, kCPU, 5);
      const auto gpu = cuda_trajectory(c, d, kCuda, 5);
      REQUIRE(cpu.size() == gpu.size());
      for (const auto& [k, t] : cpu) {
        REQUIRE(gpu.count(k) == 1);
        // The GPU contracts into FMAs and sums LAMB's norms in float (the CPU in double): an ulp apart.
        check_values(gpu.at(k), to_host(t), tolerance(d), k);
      }
      if (gpu.count("state.0.step")) CHECK(gpu.at("state.0.step").item<double>() == 4);  // step 2 skipped
    }
}

EMBER_CUDA_TEST_CASE("cuda total_grad_norm and clip_grad_norm_ match the CPU, over more tensors than one launch takes") {
  for (DType d : kFloats)
    for (double p : {1.0, 2.0, 3.0, kInf}) {
      INFO(name(d), " p ", p);
      std::vector<Tensor> cpu, gpu;
      for (int i = 0; i < 90; ++i) {  // 90 tensors: three launches of at most 40
        const Shape s{i == 7 ? 140000 : 1 + i * 13};
        Tensor x = zeros(s, d);
        x.set_grad(make_tensor(random_values(numel(s), d, -3, 3, false, 50 + i), s, d));
        Tensor y = x.to(kCuda);
        y.set_grad(x.grad().to(kCuda));
        cpu.push_back(x);
        gpu.push_back(y);
      }
      const Tensor want = total_grad_norm(cpu, p), got = total_grad_norm(gpu, p);
      CHECK(got.device() == kCuda);
      check_values(got.to(kCPU), to_host(want), d == DType::f64 ? Tol{0, 1e-12} : Tol{0, 1e-5}, "norm");
      clip_grad_norm_(cpu, 1.0, p);
      clip_grad_norm_(gpu, 1.0, p);
      for (size_t i = 0; i < cpu.size(); i += 7)
        check_values(gpu[i].grad().to(kCPU), to_host(cpu[i].grad()), tolerance(d), "clipped " + std::to_string(i));
    }
}
