// nn::Module, init, layers and models: naming, modes, state dicts, init statistics, parameter counts,
// and forward + backward through ResNet-18 and ViT-tiny.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>

#include "helpers.h"
#include "nn/nn.h"
#include "tensor/error.h"

using namespace ember;
using namespace ember_test;

namespace {

struct Net : nn::Module {
  Net() {
    fc1 = register_module("fc1", std::make_shared<nn::Linear>(4, 3));
    seq = register_module("seq", std::make_shared<nn::Sequential>());
    seq->push_back(std::make_shared<nn::Linear>(3, 5));
    seq->push_back(std::make_shared<nn::ReLU>());
    seq->push_back(std::make_shared<nn::Linear>(5, 2, false));
    scale = register_parameter("scale", ones({2}));
    bn = register_module("bn", std::make_shared<nn::BatchNorm2d>(2));
    steps = register_buffer("steps", zeros({}, DType::i64));
  }
  std::string name() const override { return "Net"; }
  std::shared_ptr<nn::Linear> fc1;
  std::shared_ptr<nn::Sequential> seq;
  std::shared_ptr<nn::BatchNorm2d> bn;
  Tensor scale, steps;
};

std::vector<std::string> keys(const std::vector<std::pair<std::string, Tensor>>& v) {
  std::vector<std::string> out;
  for (auto& kv : v) out.push_back(kv.first);
  return out;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const ValueError& e) {
    return e.what();
  }
  return "<no ValueError>";
}

}  // namespace

TEST_SUITE("cpu") {

TEST_CASE("module: dotted names in registration order, nesting, modules()") {
  auto net = std::make_shared<Net>();
  // As in PyTorch: a module's own tensors first, then its children's, in registration order.
  CHECK(keys(net->named_parameters()) == std::vector<std::string>{"scale", "fc1.weight", "fc1.bias",
                                                                  "seq.0.weight", "seq.0.bias", "seq.2.weight",
                                                                  "bn.weight", "bn.bias"});
  CHECK(keys(net->named_parameters(false)) == std::vector<std::string>{"scale"});
  CHECK(keys(net->named_buffers()) ==
        std::vector<std::string>{"steps", "bn.running_mean", "bn.running_var", "bn.num_batches_tracked"});
  CHECK(net->buffers().size() == 4);
  CHECK(net->buffer("steps").is_same(net->steps));
  CHECK(net->parameter("scale").is_same(net->scale));
  CHECK(net->children().size() == 3);
  std::vector<std::string> mods;
  for (auto& [n, m] : net->named_modules()) mods.push_back(n + ":" + m->name());
  CHECK(mods == std::vector<std::string>{":Net", "fc1:Linear", "seq:Sequential", "seq.0:Linear", "seq.1:ReLU",
                                         "seq.2:Linear", "bn:BatchNorm2d"});
  CHECK(net->num_parameters() == 4 * 3 + 3 + 3 * 5 + 5 + 5 * 2 + 2 + 2 + 2);
  for (auto& p : net->parameters()) CHECK(p.requires_grad());
  CHECK_FALSE(net->steps.requires_grad());
  CHECK(net->str().find("(seq): Sequential(") != std::string::npos);

  // A tensor shared by two modules is listed once (like PyTorch).
  auto shared = std::make_shared<nn::Module>();
  Tensor w = shared->register_parameter("a", zeros({2}));
  auto child = shared->register_module("child", std::make_shared<nn::Module>());
  child->register_parameter("b", w);
  CHECK(shared->parameters().size() == 1);

  CHECK_THROWS_AS(net->register_parameter("scale", zeros({1})), ValueError);
  CHECK_THROWS_AS(net->register_buffer("a.b", zeros({1})), ValueError);
  CHECK_THROWS_AS(net->register_parameter("idx", zeros({1}, DType::i64)), DTypeError);
  CHECK_THROWS_AS((*net->seq)[7], IndexError);
}

TEST_CASE("module: train/eval propagate to every descendant") {
  auto net = std::make_shared<Net>();
  CHECK(net->is_training());
  net->eval();
  for (auto& m : net->modules()) CHECK_FALSE(m->is_training());
  net->train();
  for (auto& m : net->modules()) CHECK(m->is_training());
  net->seq->train(false);
  CHECK(net->is_training());
  CHECK_FALSE((*net->seq)[1]->is_training());
}

TEST_CASE("module: to(dtype) keeps tensor identity and casts floating tensors only; zero_grad") {
  auto net = std::make_shared<Net>();
  Tensor w = net->fc1->weight;
  const std::vector<double> before = values(w);
  net->to(DType::f64);
  CHECK(w.is_same(net->fc1->weight));
  CHECK(w.dtype() == DType::f64);
  CHECK(w.requires_grad());
  CHECK(values(w) == before);  // f32 -> f64 is exact
  CHECK(net->bn->running_var.dtype() == DType::f64);
  CHECK(net->bn->num_batches_tracked.dtype() == DType::i64);
  CHECK(net->steps.dtype() == DType::i64);
  net->to(kCPU);
  CHECK_THROWS_AS(net->to(DType::i32), DTypeError);

  Tensor y = (*net->seq)((*net->fc1)(ones({2, 4}, DType::f64))).sum();
  y.backward();
  CHECK(net->fc1->weight.grad().defined());
  net->zero_grad(false);
  CHECK(values(net->fc1->weight.grad()) == std::vector<double>(12, 0.0));
  net->zero_grad();
  CHECK_FALSE(net->fc1->weight.grad().defined());
}

TEST_CASE("module: to(dtype, keep) leaves the kept modules and their children as they are") {
  auto net = std::make_shared<Net>();
  const auto is_batch_norm = [](const nn::Module& m) { return dynamic_cast<const nn::BatchNorm2d*>(&m) != nullptr; };
  Tensor w = net->fc1->weight;
  net->to(DType::f16, is_batch_norm);
  CHECK(w.is_same(net->fc1->weight));
  CHECK(w.dtype() == DType::f16);
  CHECK(net->bn->weight.dtype() == DType::f32);
  CHECK(net->bn->running_var.dtype() == DType::f32);
  for (auto& [name, p] : net->named_parameters())
    CHECK_MESSAGE(p.dtype() == (name.rfind("bn.", 0) == 0 ? DType::f32 : DType::f16), name);
  net->to(DType::f32, [](const nn::Module&) { return true; });  // keeps everything
  CHECK(w.dtype() == DType::f16);
}

TEST_CASE("module: state_dict round trip") {
  auto net = std::make_shared<Net>();
  StateDict sd = net->state_dict();
  CHECK(sd.size() == 12);
  CHECK(sd.count("seq.2.weight") == 1);
  CHECK(sd.count("bn.num_batches_tracked") == 1);
  StateDict saved;
  for (auto& [k, v] : sd) saved[k] = v.clone();

  {
    NoGradGuard ng;
    for (auto& p : net->parameters()) fill_(p, 7.0);
    fill_(net->bn->running_mean, 3.0);
    fill_(net->steps, 11);
  }
  CHECK_FALSE(equal(net->fc1->weight, saved["fc1.weight"]));
  Tensor handle = net->fc1->weight;
  net->load_state_dict(saved);
  CHECK(handle.is_same(net->fc1->weight));
  for (auto& [k, v] : net->state_dict()) {
    INFO(k);
    CHECK(equal(v, saved[k]));
  }
  CHECK(net->fc1->weight.requires_grad());

  // Into a fresh model of the same shape.
  auto other = std::make_shared<Net>();
  other->load_state_dict(net->state_dict());
  CHECK(equal(other->seq->operator[](0)->parameter("weight"), saved["seq.0.weight"]));
}

TEST_CASE("module: load_state_dict reports every missing, unexpected and mismatched key") {
  auto net = std::make_shared<Net>();
  StateDict sd = net->state_dict();
  sd.erase("fc1.bias");
  sd.erase("bn.running_var");
  sd["extra.weight"] = zeros({1});
  sd["seq.0.weight"] = zeros({5, 4});
  const std::string msg = error_of([&] { net->load_state_dict(sd); });
  INFO(msg);
  CHECK(msg.find("missing keys (2): fc1.bias; bn.running_var") != std::string::npos);
  CHECK(msg.find("unexpected keys (1): extra.weight") != std::string::npos);
  CHECK(msg.find("seq.0.weight: checkpoint (5, 4) vs model (5, 3)") != std::string::npos);
  // Nothing was copied.
  CHECK_FALSE(equal(net->seq->operator[](0)->parameter("weight"), zeros({5, 3})));

  // Non-strict: missing and unexpected are allowed, a shape mismatch is not.
  CHECK_THROWS_AS(net->load_state_dict(sd, false), ValueError);
  sd["seq.0.weight"] = zeros({5, 3});
  net->load_state_dict(sd, false);
  CHECK(equal(net->seq->operator[](0)->parameter("weight"), zeros({5, 3})));
}

// A module has one way in, m(x): forward() is protected in every module ember defines, so no call
// can skip the hooks (and with them ZeRO-3's gathering).
template <class M>
constexpr bool forward_callable = requires(M& m, const Tensor& x) { m.forward(x); };
static_assert(!forward_callable<nn::Linear> && !forward_callable<nn::Conv2d> && !forward_callable<nn::Sequential> &&
              !forward_callable<nn::BatchNorm2d> && !forward_callable<nn::LayerNorm> && !forward_callable<nn::ReLU> &&
              !forward_callable<nn::MultiheadAttention> && !forward_callable<nn::ResNet> &&
              !forward_callable<nn::VisionTransformer> && !forward_callable<nn::UnaryModule>);
static_assert(requires(nn::Linear& m, const Tensor& x) { m(x); });

TEST_CASE("module: forward hooks run around m(x) in registration order; removed hooks run none") {
  auto seq = std::make_shared<nn::Sequential>();
  seq->push_back(std::make_shared<nn::Linear>(2, 3));
  seq->push_back(std::make_shared<nn::ReLU>());
  std::vector<std::string> calls;
  Tensor seen_output;
  auto note = [&](const std::string& what) {
    return [&calls, what](nn::Module& m, const Tensor& input) {
      calls.push_back(what + " " + m.name() + " " + to_string(input.shape()));
    };
  };
  nn::HookHandle outer_pre = seq->register_forward_pre_hook(note("pre"));
  nn::HookHandle linear_pre = (*seq)[0]->register_forward_pre_hook(note("pre"));
  nn::HookHandle linear_pre2 = (*seq)[0]->register_forward_pre_hook(note("pre2"));
  nn::HookHandle relu_post = (*seq)[1]->register_forward_hook([&](nn::Module& m, const Tensor& input, const Tensor& output) {
    calls.push_back("post " + m.name() + " " + to_string(input.shape()));
    seen_output = output;
  });
  const Tensor x = randn({4, 2});
  const Tensor y = (*seq)(x);
  CHECK(calls == std::vector<std::string>{"pre Sequential (4, 2)", "pre Linear (4, 2)", "pre2 Linear (4, 2)",
                                          "post ReLU (4, 3)"});
  CHECK(seen_output.is_same(y));

  calls.clear();
  linear_pre.remove();
  linear_pre.remove();  // again: nothing
  outer_pre.remove();
  (void)(*seq)(x);
  CHECK(calls == std::vector<std::string>{"pre2 Linear (4, 2)", "post ReLU (4, 3)"});

  // A hook may remove itself while the hooks run.
  calls.clear();
  nn::HookHandle once;
  once = (*seq)[0]->register_forward_pre_hook([&](nn::Module&, const Tensor&) {
    calls.push_back("once");
    once.remove();
  });
  (void)(*seq)(x);
  (void)(*seq)(x);
  CHECK(std::count(calls.begin(), calls.end(), "once") == 1);
  CHECK_THROWS_AS(seq->register_forward_hook(nullptr), ValueError);

  // A handle outlives its module harmlessly.
  nn::HookHandle orphan;
  {
    nn::ReLU relu;
    orphan = relu.register_forward_hook([](nn::Module&, const Tensor&, const Tensor&) {});
  }
  orphan.remove();
  linear_pre2.remove();
  relu_post.remove();
}

TEST_CASE("init: gains and fans") {
  CHECK(nn::init::calculate_gain("relu") == doctest::Approx(std::sqrt(2.0)));
  CHECK(nn::init::calculate_gain("tanh") == doctest::Approx(5.0 / 3.0));
  CHECK(nn::init::calculate_gain("leaky_relu", std::sqrt(5.0)) == doctest::Approx(std::sqrt(2.0 / 6.0)));
  CHECK(nn::init::calculate_gain("leaky_relu") == doctest::Approx(std::sqrt(2.0 / 1.0001)));
  CHECK_THROWS_AS(nn::init::calculate_gain("swish"), ValueError);
  Tensor w = empty({16, 8, 3, 3});
  CHECK(nn::init::fan_in(w) == 72);
  CHECK(nn::init::fan_out(w) == 144);
  CHECK_THROWS_AS(nn::init::fan_in(empty({4})), ValueError);
}

TEST_CASE("init: kaiming, xavier, normal and trunc_normal statistics on large tensors") {
  Generator gen(123);
  auto stats = [](const Tensor& t) {
    const std::vector<double> v = values(t);
    double s = 0, s2 = 0, lo = 1e300, hi = -1e300;
    for (double x : v) s += x, s2 += x * x, lo = std::min(lo, x), hi = std::max(hi, x);
    const double n = static_cast<double>(v.size()), mean = s / n;
    return std::array<double, 4>{mean, std::sqrt(s2 / n - mean * mean), lo, hi};
  };
  Tensor w = empty({512, 400});
  nn::init::kaiming_uniform_(w, 0.0, nn::init::FanMode::fan_in, "relu", &gen);
  double bound = std::sqrt(2.0) * std::sqrt(3.0 / 400);
  auto s = stats(w);
  CHECK(s[2] >= -bound);
  CHECK(s[3] <= bound);
  CHECK(s[3] > 0.99 * bound);
  CHECK(s[1] == doctest::Approx(bound / std::sqrt(3.0)).epsilon(0.02));
  CHECK(std::fabs(s[0]) < 0.01 * bound);

  nn::init::kaiming_normal_(w, 0.0, nn::init::FanMode::fan_out, "relu", &gen);
  CHECK(stats(w)[1] == doctest::Approx(std::sqrt(2.0 / 512)).epsilon(0.02));

  nn::init::xavier_uniform_(w, 1.0, &gen);
  bound = std::sqrt(6.0 / (512 + 400));
  s = stats(w);
  CHECK(s[2] >= -bound);
  CHECK(s[3] <= bound);
  CHECK(s[1] == doctest::Approx(bound / std::sqrt(3.0)).epsilon(0.02));

  nn::init::xavier_normal_(w, 2.0, &gen);
  CHECK(stats(w)[1] == doctest::Approx(2.0 * std::sqrt(2.0 / 912)).epsilon(0.02));

  nn::init::normal_(w, 3.0, 0.5, &gen);
  s = stats(w);
  CHECK(s[0] == doctest::Approx(3.0).epsilon(0.01));
  CHECK(s[1] == doctest::Approx(0.5).epsilon(0.02));

  nn::init::trunc_normal_(w, 0.0, 1.0, -1.0, 2.0, &gen);
  s = stats(w);
  CHECK(s[2] >= -1.0);
  CHECK(s[3] <= 2.0);
  CHECK(s[2] < -0.99);
  CHECK(s[3] > 1.99);
  // The mean of N(0,1) truncated to [-1, 2]: (phi(-1) - phi(2)) / (Phi(2) - Phi(-1)).
  const double phi_a = std::exp(-0.5) / std::sqrt(2 * M_PI), phi_b = std::exp(-2.0) / std::sqrt(2 * M_PI);
  const double Z = 0.5 * (std::erf(2 / std::sqrt(2.0)) - std::erf(-1 / std::sqrt(2.0)));
  CHECK(s[0] == doctest::Approx((phi_a - phi_b) / Z).epsilon(0.03));

  Tensor h = empty({64, 64}, DType::bf16);
  nn::init::constant_(h, 0.25);
  CHECK(values(h) == std::vector<double>(64 * 64, 0.25));
  nn::init::uniform_(h, -1, 1, &gen);
  CHECK(all_finite(h));

  // The same generator state gives the same draws.
  Generator g1(5), g2(5);
  Tensor a = empty({10, 10}), b = empty({10, 10});
  nn::init::kaiming_uniform_(a, std::sqrt(5.0), nn::init::FanMode::fan_in, "leaky_relu", &g1);
  nn::init::kaiming_uniform_(b, std::sqrt(5.0), nn::init::FanMode::fan_in, "leaky_relu", &g2);
  CHECK(equal(a, b));
}

TEST_CASE("layers: Linear default init bounds and forward against a manual product") {
  nn::Linear lin(300, 200);
  const double bound = 1.0 / std::sqrt(300.0);  // kaiming_uniform_(a=sqrt(5)) gives 1/sqrt(fan_in) too
  for (double v : values(lin.weight)) REQUIRE(std::fabs(v) <= bound);
  for (double v : values(lin.bias)) REQUIRE(std::fabs(v) <= bound);

  nn::Linear small(3, 2);
  Tensor x = uniform_f64({4, 3}, -1, 1, 7, false).to(DType::f32);
  Tensor y = small(x);
  REQUIRE(y.shape() == Shape{4, 2});
  const auto xv = values(x), wv = values(small.weight), bv = values(small.bias), yv = values(y);
  for (int i = 0; i < 4; ++i)
    for (int o = 0; o < 2; ++o) {
      double acc = bv[o];
      for (int k = 0; k < 3; ++k) acc += xv[i * 3 + k] * wv[o * 3 + k];
      CHECK(yv[i * 2 + o] == doctest::Approx(acc).epsilon(1e-5));
    }
  CHECK_THROWS_AS(small(zeros({4, 5})), ShapeError);
  // Leading batch dims broadcast.
  CHECK(small(zeros({2, 5, 3})).shape() == Shape{2, 5, 2});
  nn::Linear nobias(3, 2, false);
  CHECK(nobias.parameters().size() == 1);
  CHECK(allclose(nobias(x), matmul(x, nobias.weight.t())));
}

TEST_CASE("layers: activations, Flatten, Identity, Sequential, MLP, ModuleList") {
  Tensor x = from_vector(std::vector<float>{-2, -0.5, 0, 1.5}, {2, 2});
  CHECK(values(nn::ReLU()(x)) == std::vector<double>{0, 0, 0, 1.5});
  CHECK(allclose(nn::GELU(true)(x), gelu(x, true)));
  CHECK(allclose(nn::SiLU()(x), silu(x)));
  CHECK(nn::Flatten()(zeros({2, 3, 4, 5})).shape() == Shape{2, 60});
  CHECK(nn::Flatten(0, 1)(zeros({2, 3, 4})).shape() == Shape{6, 4});
  CHECK(nn::Identity()(x).is_same(x));

  auto mlp = std::make_shared<nn::MLP>(4, std::vector<int64_t>{8, 6}, 3);
  CHECK(keys(mlp->named_parameters()) == std::vector<std::string>{"0.weight", "0.bias", "2.weight", "2.bias",
                                                                  "4.weight", "4.bias"});
  Tensor in = randn({5, 4});
  auto lin = [&](size_t i) { return std::static_pointer_cast<nn::Linear>((*mlp)[i]); };
  Tensor want = (*lin(4))(relu((*lin(2))(relu((*lin(0))(in)))));
  CHECK(allclose((*mlp)(in), want));
  CHECK(mlp->num_parameters() == 4 * 8 + 8 + 8 * 6 + 6 + 6 * 3 + 3);

  nn::ModuleList list;
  list.push_back(std::make_shared<nn::Linear>(2, 2));
  list.push_back(std::make_shared<nn::ReLU>());
  CHECK(list.size() == 2);
  CHECK(list.at<nn::Linear>(0)->in_features == 2);
  CHECK_THROWS_AS(list.at<nn::Linear>(1), ValueError);
  CHECK(keys(list.named_parameters()) == std::vector<std::string>{"0.weight", "0.bias"});
}

TEST_CASE("layers: MultiheadAttention against a per-head reference, and masks") {
  manual_seed(3);
  nn::MultiheadAttention mha(8, 2);
  CHECK(keys(mha.named_parameters()) ==
        std::vector<std::string>{"in_proj_weight", "in_proj_bias", "out_proj.weight", "out_proj.bias"});
  CHECK(values(mha.in_proj_bias) == std::vector<double>(24, 0.0));
  Tensor x = randn({2, 3, 8});
  {
    NoGradGuard ng;
    nn::init::uniform_(mha.in_proj_bias, -0.5, 0.5);
  }
  Tensor y = mha(x);
  REQUIRE(y.shape() == Shape{2, 3, 8});
  // Reference: one head at a time with 2-D ops.
  std::vector<Tensor> outs;
  for (int64_t b = 0; b < 2; ++b) {
    Tensor xb = select(x, 0, b);  // (3, 8)
    Tensor qkv = matmul(xb, mha.in_proj_weight.t()) + mha.in_proj_bias;  // (3, 24)
    std::vector<Tensor> hs;
    for (int64_t h = 0; h < 2; ++h) {
      Tensor q = narrow(qkv, 1, h * 4, 4), k = narrow(qkv, 1, 8 + h * 4, 4), v = narrow(qkv, 1, 16 + h * 4, 4);
      hs.push_back(matmul(softmax(matmul(q, k.t()) / 2.0, 1), v));
    }
    outs.push_back((*mha.out_proj)(cat(hs, 1)));
  }
  CHECK(allclose(y, stack(outs, 0), 1e-4, 1e-5));

  // A causal mask (true = masked): the first query sees only the first key.
  Tensor causal = gt(arange(3).unsqueeze(0), arange(3).unsqueeze(1));  // (3, 3), j > i
  Tensor ym = mha.forward(x, x, x, causal);
  Tensor first_only = mha(narrow(x, 1, 0, 1));
  CHECK(allclose(narrow(ym, 1, 0, 1), first_only, 1e-4, 1e-5));
  CHECK_THROWS_AS(mha(zeros({2, 3, 7})), ShapeError);
  CHECK_THROWS_AS(nn::MultiheadAttention(10, 3), ValueError);
}

TEST_CASE("models: parameter counts match torchvision and timm") {
  CHECK(nn::resnet18()->num_parameters() == 11689512);
  CHECK(nn::resnet34()->num_parameters() == 21797672);
  CHECK(nn::resnet50()->num_parameters() == 25557032);
  CHECK(nn::vit_base()->num_parameters() == 86567656);
  auto r = nn::resnet18();
  const auto names = keys(r->named_parameters());
  CHECK(names.front() == "conv1.weight");
  CHECK(std::find(names.begin(), names.end(), "layer2.0.downsample.0.weight") != names.end());
  CHECK(std::find(names.begin(), names.end(), "layer2.0.downsample.1.bias") != names.end());
  CHECK(names.back() == "fc.bias");
  CHECK(r->state_dict().count("layer4.1.bn2.num_batches_tracked") == 1);
  auto r50 = nn::resnet50();
  CHECK(r50->state_dict().count("layer1.0.conv3.weight") == 1);
  CHECK(r50->fc->in_features == 2048);
}

TEST_CASE("module: replace_module puts a new child where the forward calls it, or changes nothing") {
  manual_seed(0);
  auto r = nn::resnet18({.num_classes = 10, .small_input = true});
  const Tensor x = randn({2, 3, 8, 8});
  auto head = std::make_shared<nn::Linear>(512, 3);
  auto old = r->replace_module("fc", head);
  CHECK(old->name() == "Linear");
  CHECK(r->fc == head);
  CHECK((*r)(x).shape() == Shape{2, 3});  // the forward calls the new head
  const auto params = r->named_parameters();
  CHECK(params.back().first == "fc.bias");
  CHECK(params[params.size() - 2].second.is_same(head->weight));  // parameters() finds it by the same name
  CHECK(r->state_dict().at("fc.weight").shape() == Shape{3, 512});

  // A child of another type than the forward calls: a ValueError naming both, and nothing changed.
  const std::string wrong = error_of([&] { r->replace_module("fc", std::make_shared<nn::ReLU>()); });
  CHECK(wrong.find("ResNet.fc must be a Linear") != std::string::npos);
  CHECK(wrong.find("got a ReLU") != std::string::npos);
  CHECK(r->fc == head);
  CHECK(r->named_children().back().second == head);
  CHECK(error_of([&] { r->replace_module("head", head); }).find("no child 'head' (its children: conv1, bn1") !=
        std::string::npos);
  CHECK_THROWS_AS(r->replace_module("fc", nullptr), ValueError);

  // Containers: a Sequential takes any one-input module, a ModuleList any module.
  auto stage = r->layer4;
  stage->replace_module("1", std::make_shared<nn::Identity>());
  CHECK((*stage)[1]->name() == "Identity");
  CHECK((*r)(x).shape() == Shape{2, 3});
  auto vit = nn::vit_tiny({.image_size = 16, .patch_size = 8, .num_classes = 4, .depth = 2});
  vit->blocks->replace_module("1", std::make_shared<nn::Identity>());
  vit->replace_module("head", std::make_shared<nn::Linear>(192, 7));
  CHECK((*vit)(randn({2, 3, 16, 16})).shape() == Shape{2, 7});

  // A module that keeps its own pointers and does not say how to update them refuses.
  Net net;
  CHECK_THROWS_AS(net.replace_module("fc1", std::make_shared<nn::Linear>(4, 3)), NotImplementedError);
  CHECK(net.named_children().front().second == net.fc1);
}

TEST_CASE("models: SmallCNN forward and backward") {
  manual_seed(1);
  nn::SmallCNN net;
  Tensor y = net(randn({2, 1, 28, 28}));
  CHECK(y.shape() == Shape{2, 10});
  y.sum().backward();
  for (auto& [n, p] : net.named_parameters()) {
    INFO(n);
    REQUIRE(p.grad().defined());
    CHECK(all_finite(p.grad()));
  }
  CHECK(net.bn1->num_batches_tracked.item<int64_t>() == 1);
}

TEST_CASE("models: ResNet-18 (small stem) and ViT-tiny forward + backward give every parameter a finite gradient") {
  manual_seed(2);
  Tensor x = randn({2, 1, 28, 28});
  auto check_grads = [](nn::Module& m) {
    for (auto& [n, p] : m.named_parameters()) {
      INFO(n);
      REQUIRE(p.grad().defined());
      CHECK(all_finite(p.grad()));
    }
  };
  SUBCASE("resnet18") {
    auto r = nn::resnet18({.num_classes = 10, .in_channels = 1, .small_input = true});
    Tensor y = (*r)(x);
    REQUIRE(y.shape() == Shape{2, 10});
    y.sum().backward();
    check_grads(*r);
    r->eval();
    CHECK(all_finite((*r)(x)));
  }
  SUBCASE("vit_tiny") {
    nn::ViTOptions o;
    o.image_size = 28;
    o.patch_size = 7;
    o.in_channels = 1;
    o.num_classes = 10;
    auto v = nn::vit_tiny(o);
    Tensor y = (*v)(x);
    REQUIRE(y.shape() == Shape{2, 10});
    y.sum().backward();
    check_grads(*v);
  }
}

TEST_CASE("models: a ResNet fed channels-last runs channels-last throughout, forward and backward") {
  // Each convolution and batch norm sees channels-last activations, and each gets channels-last
  // gradients: the ReLUs, residual adds and pooling between them keep the layout.
  manual_seed(3);
  auto r = nn::resnet18({.num_classes = 10});
  std::vector<std::string> nchw_inputs, nchw_grads;
  for (auto& [name, m] : r->named_modules()) {
    if (m->name() != "Conv2d" && m->name() != "BatchNorm2d") continue;
    m->register_forward_hook([&, name](nn::Module&, const Tensor& in, const Tensor& out) {
      if (!is_channels_last(in)) nchw_inputs.push_back(name);
      out.register_hook([&, name](const Tensor& g) {
        if (!is_channels_last(g)) nchw_grads.push_back(name);
        return g;
      });
    });
  }
  const Tensor x = to_channels_last(randn({2, 3, 64, 64}));  // layer4 runs at 2 x 2
  (*r)(x).sum().backward();
  CHECK_MESSAGE(nchw_inputs.empty(), "NCHW inputs: ", nchw_inputs.size(), ", the first ",
                nchw_inputs.empty() ? "" : nchw_inputs.front());
  CHECK_MESSAGE(nchw_grads.empty(), "NCHW gradients: ", nchw_grads.size(), ", the first ",
                nchw_grads.empty() ? "" : nchw_grads.front());
}

}  // TEST_SUITE
