// The autograd engine: graph shapes, accumulation, retain_graph, grad modes, hooks, retain_grad,
// in-place checks, anomaly mode, autograd::grad, and double backward.
#include <cmath>
#include <limits>

#include "autograd/node.h"
#include "tensor/layout.h"
#include "tests/helpers.h"

using namespace ember;
using namespace ember_test;

namespace {

Tensor leaf(const std::vector<double>& v, const Shape& s) { return from_vector(v, s).requires_grad_(true); }
Tensor leaf(const std::vector<double>& v) { return leaf(v, {static_cast<int64_t>(v.size())}); }

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

}  // namespace

TEST_SUITE("cpu") {

TEST_CASE("autograd: leaves, grad_fn and requires_grad propagation") {
  Tensor x = leaf({1, 2, 3});
  Tensor c = from_vector<double>({1, 1, 1}, {3});
  CHECK(x.is_leaf());
  CHECK(x.requires_grad());
  CHECK_FALSE(c.requires_grad());
  Tensor y = x * c;
  CHECK(y.requires_grad());
  CHECK_FALSE(y.is_leaf());
  REQUIRE(y.grad_fn());
  CHECK(std::string(y.grad_fn()->name()) == "mul");
  CHECK_FALSE((c * 2).requires_grad());
  // Integer and bool results carry no history.
  CHECK_FALSE(gt(x, 1).requires_grad());
  CHECK_FALSE(argmax(x).requires_grad());
}

TEST_CASE("autograd: diamond graph and shared subexpressions") {
  // y = a * b with a = 2x and b = exp(x): both paths meet at x. dy/dx = 2 exp(x) (1 + x).
  Tensor x = leaf({0.5, -1.0, 2.0});
  Tensor a = x * 2, b = exp(x);
  (a * b).sum().backward();
  const auto gx = values(x.grad());
  const std::vector<double> xs = {0.5, -1.0, 2.0};
  for (size_t i = 0; i < xs.size(); ++i) CHECK(gx[i] == doctest::Approx(2 * std::exp(xs[i]) * (1 + xs[i])));

  // s = x * w used three times: z = s * s + s, dz/dx = (2 s + 1) w, dz/dw = (2 s + 1) x.
  Tensor p = leaf({1.5}), w = leaf({-2.0});
  Tensor s = p * w;
  (s * s + s).sum().backward();
  CHECK(p.grad().item<double>() == doctest::Approx((2 * -3.0 + 1) * -2.0));
  CHECK(w.grad().item<double>() == doctest::Approx((2 * -3.0 + 1) * 1.5));

  // The same leaf on both sides of an op.
  Tensor q = leaf({3.0});
  (q * q * q).sum().backward();
  CHECK(q.grad().item<double>() == doctest::Approx(27.0));
}

TEST_CASE("autograd: gradients accumulate over backward calls") {
  Tensor x = leaf({1, 2});
  (x * 3).sum().backward();
  (x * 3).sum().backward();
  CHECK(values(x.grad()) == std::vector<double>{6, 6});
  // Resetting .grad starts over.
  x.set_grad(Tensor());
  (x * x).sum().backward();
  CHECK(values(x.grad()) == std::vector<double>{2, 4});
}

TEST_CASE("autograd: .grad is laid out as its leaf, whatever layout the gradient arrived in") {
  // sum's gradient is a broadcast scalar (stride 0), t()'s a transposed tensor: the optimizers' and
  // the scaler's multi-tensor kernels need .grad dense in the parameter's order.
  Tensor x = leaf({1, 2, 3});
  x.sum().backward();
  CHECK(x.grad().is_contiguous());
  CHECK(values(x.grad()) == std::vector<double>{1, 1, 1});
  Tensor w = leaf({1, 2, 3, 4, 5, 6}, {2, 3});
  (w.t() * from_vector(std::vector<double>{1, 2, 3, 4, 5, 6}, {3, 2})).sum().backward();
  CHECK(w.grad().is_contiguous());
  CHECK(values(w.grad()) == std::vector<double>{1, 3, 5, 2, 4, 6});
  Tensor c = to_channels_last(randn({2, 3, 4, 5})).detach().requires_grad_(true);
  (c * 2).sum().backward();
  CHECK(is_channels_last(c.grad()));
  CHECK(values(c.grad()) == std::vector<double>(120, 2.0));
}

TEST_CASE("autograd: a second backward needs retain_graph") {
  Tensor x = leaf({1, 2});
  Tensor y = (x * x).sum();  // mul saves its inputs
  y.backward();
  const std::string msg = message_of<AutogradError>([&] { y.backward(); });
  CHECK_MESSAGE(contains(msg, "mul"), msg);
  CHECK_MESSAGE(contains(msg, "retain_graph"), msg);

  Tensor e = exp(x).sum();  // exp saves its output
  e.backward();
  CHECK_THROWS_AS(e.backward(), AutogradError);

  Tensor z = leaf({1, 2});
  Tensor w = (z * z).sum();
  w.backward({}, /*retain_graph=*/true);
  w.backward();
  CHECK(values(z.grad()) == std::vector<double>{4, 8});
}

TEST_CASE("autograd: grad mode guards nest and restore") {
  Tensor x = leaf({1, 2});
  CHECK(autograd::GradMode::is_enabled());
  {
    NoGradGuard no_grad;
    CHECK_FALSE(autograd::GradMode::is_enabled());
    Tensor y = x * 2;
    CHECK_FALSE(y.requires_grad());
    CHECK_FALSE(y.grad_fn());
    {
      EnableGradGuard enable;
      CHECK(autograd::GradMode::is_enabled());
      Tensor z = x * 2;
      CHECK(z.requires_grad());
      {
        NoGradGuard inner;
        CHECK_FALSE((x * 2).requires_grad());
      }
      CHECK(autograd::GradMode::is_enabled());
    }
    CHECK_FALSE(autograd::GradMode::is_enabled());
    CHECK_FALSE((x * 2).requires_grad());
  }
  CHECK(autograd::GradMode::is_enabled());
  CHECK((x * 2).requires_grad());
}

TEST_CASE("autograd: detach shares storage and cuts the graph") {
  Tensor x = leaf({1, 2, 3});
  Tensor d = x.detach();
  CHECK_FALSE(d.requires_grad());
  CHECK(d.is_leaf());
  CHECK(d.raw_data() == x.raw_data());
  // y = x * stop_gradient(x): dy/dx = x, not 2x.
  (x * d).sum().backward();
  CHECK(values(x.grad()) == std::vector<double>{1, 2, 3});
  // A detached non-leaf is a fresh leaf that can require grad.
  Tensor y = (x * 2).detach();
  CHECK_NOTHROW(y.requires_grad_(true));
  CHECK(y.is_leaf());
}

TEST_CASE("autograd: requires_grad_ errors") {
  Tensor x = leaf({1, 2});
  Tensor y = x * 2;
  const std::string msg = message_of<AutogradError>([&] { y.requires_grad_(false); });
  CHECK_MESSAGE(contains(msg, "leaf"), msg);
  CHECK_MESSAGE(contains(msg, "mul"), msg);
  Tensor i = from_vector<int64_t>({1, 2}, {2});
  const std::string imsg = message_of<DTypeError>([&] { i.requires_grad_(); });
  CHECK_MESSAGE(contains(imsg, "int64"), imsg);
  CHECK_THROWS_AS(from_vector<bool>({true}, {1}).requires_grad_(), DTypeError);
  CHECK_NOTHROW(i.requires_grad_(false));
  CHECK_THROWS_AS(ones({2}, TensorOptions(DType::i32).with_requires_grad()), DTypeError);
  // requires_grad_(false) on a leaf stops recording.
  Tensor z = leaf({1.0});
  z.requires_grad_(false);
  CHECK_FALSE((z * 2).requires_grad());
}

TEST_CASE("autograd: tensor hooks run in order and may replace the gradient") {
  std::vector<int> order;
  Tensor x = leaf({1, 2});
  x.register_hook([&](const Tensor&) {
    order.push_back(1);
    return Tensor();  // keep the gradient
  });
  x.register_hook([&](const Tensor& g) {
    order.push_back(2);
    return g * 10;
  });
  std::vector<double> seen_by_third;
  x.register_hook([&](const Tensor& g) {
    order.push_back(3);
    seen_by_third = values(g);
    return Tensor();
  });
  (x * 2).sum().backward();
  CHECK(order == std::vector<int>{1, 2, 3});
  CHECK(seen_by_third == std::vector<double>{20, 20});
  CHECK(values(x.grad()) == std::vector<double>{20, 20});

  // Hooks on a tensor that does not require grad are refused.
  CHECK_THROWS_AS(from_vector<double>({1}, {1}).register_hook([](const Tensor& g) { return g; }), AutogradError);
}

TEST_CASE("autograd: hooks on non-leaves") {
  Tensor x = leaf({1, 2});
  Tensor y = x * 3;
  std::vector<std::string> order;
  std::vector<double> seen;
  y.register_hook([&](const Tensor& g) {
    order.push_back("first");
    seen = values(g);
    return g * 2;
  });
  y.register_hook([&](const Tensor& g) {
    order.push_back("second");
    return g + 1;
  });
  (y * y).sum().backward();  // dL/dy = 2y = (6, 12); hooks make it 2 * (6, 12) + 1
  CHECK(order == std::vector<std::string>{"first", "second"});
  CHECK(seen == std::vector<double>{6, 12});
  CHECK(values(x.grad()) == std::vector<double>{3 * 13, 3 * 25});
  // A non-leaf keeps no .grad unless asked.
  CHECK_FALSE(y.grad().defined());
}

TEST_CASE("autograd: a hook may change a gradient's values, not its shape, dtype or device") {
  Tensor x = leaf({1, 2, 3});
  x.register_hook([](const Tensor&) { return ones({5}); });
  expect_error<AutogradError>("leaf shape", [&] { (x * 2).sum().backward(); }, {"shape (5,)", "(3,)"});
  Tensor y = leaf({1, 2, 3});
  y.register_hook([](const Tensor& g) { return g.to(DType::f32); });  // the leaves here are f64
  expect_error<AutogradError>("leaf dtype", [&] { (y * 2).sum().backward(); }, {"float32", "float64"});
  Tensor z = leaf({1, 2, 3});
  Tensor mid = z * 3;
  mid.register_hook([](const Tensor&) { return ones({2, 3}); });  // broadcasting would sum it: 4 4 4
  expect_error<AutogradError>("non-leaf shape", [&] { (mid * 2).sum().backward(); }, {"(2, 3)", "(3,)"});
}

TEST_CASE("autograd: post-accumulate-grad hooks see the updated .grad") {
  Tensor w = leaf({1, 2});
  std::vector<std::vector<double>> seen;
  w.register_post_accumulate_grad_hook([&](const Tensor& p) {
    REQUIRE(p.grad().defined());
    seen.push_back(values(p.grad()));
  });
  (w * 2).sum().backward();
  (w * 3).sum().backward();
  REQUIRE(seen.size() == 2);
  CHECK(seen[0] == std::vector<double>{2, 2});
  CHECK(seen[1] == std::vector<double>{5, 5});
  // Once per backward even when the leaf is used several times.
  seen.clear();
  (w * w + w).sum().backward();
  CHECK(seen.size() == 1);
  // Only leaves accumulate.
  CHECK_THROWS_AS((w * 2).register_post_accumulate_grad_hook([](const Tensor&) {}), AutogradError);
}

TEST_CASE("autograd: .grad accumulates in place, so a view into a flat buffer stays one") {
  Tensor flat = zeros({5});
  Tensor w = leaf({1, 2});
  w.set_grad(flat.narrow(0, 1, 2));  // as DDP's buckets hold gradients
  (w * 3).sum().backward();
  (w * 4).sum().backward();
  CHECK(values(flat) == std::vector<double>{0, 7, 7, 0, 0});
  CHECK(w.grad().raw_data() == flat.narrow(0, 1, 2).raw_data());
  // create_graph keeps accumulating out of place (the result has history).
  Tensor v = leaf({2});
  (v * v).sum().backward({}, false, true);
  (v * v).sum().backward({}, false, true);
  CHECK(v.grad().requires_grad());
  CHECK(values(v.grad()) == std::vector<double>{8});
  v.set_grad(Tensor());  // v's .grad has a graph that holds v: a reference cycle until .grad goes
  // A gradient that arrives broadcast (sum's backward expands one value) is not added into in place.
  Tensor s = leaf({1, 2, 3});
  s.sum().backward();
  s.sum().backward();
  CHECK(values(s.grad()) == std::vector<double>{2, 2, 2});
  s.sum().backward();
  CHECK(values(s.grad()) == std::vector<double>{3, 3, 3});
}

TEST_CASE("autograd: queue_callback runs after every node of the backward pass, in order") {
  Tensor a = leaf({1, 2}), b = leaf({3});
  std::vector<std::string> log;
  a.register_post_accumulate_grad_hook([&](const Tensor&) {
    log.push_back("a");
    autograd::queue_callback([&] {
      log.push_back("first callback: b.grad " + std::to_string(values(b.grad())[0]));
      autograd::queue_callback([&] { log.push_back("queued by a callback"); });
    });
    autograd::queue_callback([&] { log.push_back("second callback"); });
  });
  b.register_post_accumulate_grad_hook([&](const Tensor&) { log.push_back("b"); });
  ((a * 2).sum() * b).sum().backward();  // a's accumulator runs before b's or after: the callbacks after both
  REQUIRE(log.size() == 5);
  CHECK(log[2] == "first callback: b.grad 6.000000");
  CHECK(log[3] == "second callback");
  CHECK(log[4] == "queued by a callback");
  CHECK_THROWS_AS(autograd::queue_callback([] {}), AutogradError);  // no backward running
  // A callback's error leaves backward; the next backward starts without callbacks.
  Tensor c = leaf({1});
  bool armed = true;
  c.register_post_accumulate_grad_hook([&](const Tensor&) {
    if (armed) autograd::queue_callback([] { throw ValueError("callback failed"); });
  });
  CHECK_THROWS_WITH_AS((c * 2).sum().backward(), "callback failed", ValueError);
  armed = false;
  (c * 2).sum().backward();
  CHECK(values(c.grad()) == std::vector<double>{4});
}

TEST_CASE("autograd: retain_grad keeps a non-leaf's gradient") {
  Tensor x = leaf({1, 2});
  Tensor y = x * 2;
  y.retain_grad();
  Tensor z = y * 5;
  (y * z).sum().backward();  // L = 5 y^2, dL/dy = 10 y
  REQUIRE(y.grad().defined());
  CHECK(values(y.grad()) == std::vector<double>{20, 40});
  CHECK_FALSE(z.grad().defined());
  CHECK(values(x.grad()) == std::vector<double>{40, 80});
  // retain_grad on a leaf is a no-op; on a tensor without grad it is refused.
  CHECK_NOTHROW(x.retain_grad());
  CHECK_THROWS_AS(from_vector<double>({1}, {1}).retain_grad(), AutogradError);
}

TEST_CASE("autograd: in-place ops are recorded on non-leaves") {
  Tensor x = leaf({1, -2, 3});
  Tensor a = x * 1;
  add_(a, 1);
  sub_(a, from_vector<double>({0, 0, 2}, {3}));
  relu_(a);  // (2, -1, 2) -> (2, 0, 2)
  a.sum().backward();
  CHECK(values(x.grad()) == std::vector<double>{1, 0, 1});
  CHECK(values(a) == std::vector<double>{2, 0, 2});
}

TEST_CASE("autograd: in-place mul_, div_, clamp_ on a non-leaf (PyTorch allows them)") {
  // d/dx of (x * 3 / 2) is 1.5: the old value of self is not needed for the gradient wrt self.
  Tensor x = leaf({1, -2, 3});
  Tensor a = x * 1;
  mul_(a, 3);
  div_(a, 2);
  CHECK(values(a) == std::vector<double>{1.5, -3, 4.5});
  try {
    a.sum().backward();
    CHECK(values(x.grad()) == std::vector<double>{1.5, 1.5, 1.5});
  } catch (const std::exception& e) {
    FAIL_CHECK("backward through mul_/div_ threw: ", std::string(e.what()));
  }
  // clamp_ needs the input's old value for its mask: it must be kept from before the write.
  Tensor y = leaf({-2, 0.5, 2});
  Tensor b = y * 1;
  clamp_(b, -1.0, 1.0);
  try {
    b.sum().backward();
    CHECK(values(y.grad()) == std::vector<double>{0, 1, 0});
  } catch (const std::exception& e) {
    FAIL_CHECK("backward through clamp_ threw: ", std::string(e.what()));
  }
}

TEST_CASE("autograd: in-place write to a tensor saved for backward is detected") {
  Tensor x = leaf({1, 2});
  Tensor a = x * 2;
  Tensor b = a * a;  // mul saved a at version 0
  add_(a, 1);         // version 1
  const std::string msg = message_of<AutogradError>([&] { b.sum().backward(); });
  CHECK_MESSAGE(contains(msg, "mul"), msg);
  CHECK_MESSAGE(contains(msg, "version 1"), msg);
  CHECK_MESSAGE(contains(msg, "expected version 0"), msg);

  // The same through an op that saves its output.
  Tensor y = leaf({0.5});
  Tensor e = exp(y * 1);
  mul_(e, 2);
  const std::string emsg = message_of<AutogradError>([&] { e.sum().backward(); });
  CHECK_MESSAGE(contains(emsg, "exp"), emsg);
  CHECK_MESSAGE(contains(emsg, "version"), emsg);

  // A write through a view bumps the shared version counter too.
  Tensor z = leaf({1, 2, 3, 4});
  Tensor s = z * 1;
  Tensor t = s * s;
  {
    NoGradGuard no_grad;
    Tensor v = s.narrow(0, 1, 2);
    fill_(v, 0.0);
  }
  CHECK_THROWS_AS(t.sum().backward(), AutogradError);
}

TEST_CASE("autograd: in-place on a leaf that requires grad is refused") {
  Tensor x = leaf({1, 2});
  const std::string msg = message_of<AutogradError>([&] { add_(x, 1); });
  CHECK_MESSAGE(contains(msg, "leaf"), msg);
  CHECK_THROWS_AS(mul_(x, 2), AutogradError);
  CHECK_THROWS_AS(relu_(x), AutogradError);
  // Allowed without recording (how an optimizer updates parameters).
  {
    NoGradGuard no_grad;
    CHECK_NOTHROW(add_(x, 1));
  }
  CHECK(values(x) == std::vector<double>{2, 3});
  // In-place on a view of a tensor being recorded is refused as well.
  Tensor a = x * 1;
  Tensor v = a.narrow(0, 0, 1);
  CHECK_THROWS_AS(mul_(v, 2), AutogradError);
}

TEST_CASE("autograd: grad() returns gradients without touching .grad") {
  Tensor x = leaf({1, 2}), w = leaf({3, 4}), unused = leaf({5});
  Tensor y = (x * w).sum();
  const auto g = autograd::grad({y}, {x, w}, {}, /*retain_graph=*/true);
  REQUIRE(g.size() == 2);
  CHECK(values(g[0]) == std::vector<double>{3, 4});
  CHECK(values(g[1]) == std::vector<double>{1, 2});
  CHECK_FALSE(x.grad().defined());
  CHECK_FALSE(w.grad().defined());

  const std::string msg = message_of<AutogradError>([&] { autograd::grad({y}, {x, unused}, {}, true); });
  CHECK_MESSAGE(contains(msg, "allow_unused"), msg);
  const auto g2 = autograd::grad({y}, {x, unused}, {}, true, false, /*allow_unused=*/true);
  CHECK(g2[0].defined());
  CHECK_FALSE(g2[1].defined());

  // With respect to a non-leaf.
  Tensor h = x * 2;
  Tensor out = (h * h).sum();
  CHECK(values(autograd::grad({out}, {h})[0]) == std::vector<double>{4, 8});
  // Explicit grad_outputs for a non-scalar output.
  Tensor v = x * 3;
  CHECK(values(autograd::grad({v}, {x}, {from_vector<double>({1, -1}, {2})})[0]) == std::vector<double>{3, -3});
}

TEST_CASE("autograd: backward argument errors") {
  Tensor x = leaf({1, 2});
  CHECK_THROWS_AS((x * 2).backward(), AutogradError);  // non-scalar without a gradient
  CHECK_THROWS_AS((x * 2).backward(from_vector<double>({1, 1, 1}, {3})), ShapeError);
  CHECK_THROWS_AS(from_vector<double>({1}, {1}).backward(), AutogradError);  // no graph
  (x * 2).backward(from_vector<double>({1, 0.5}, {2}));
  CHECK(values(x.grad()) == std::vector<double>{2, 1});
}

TEST_CASE("autograd: double backward with create_graph") {
  // d/dx x^3 = 3x^2, d2/dx2 x^3 = 6x.
  Tensor x = leaf({1.5, -2.0});
  Tensor y = (x * x * x).sum();
  const Tensor g = autograd::grad({y}, {x}, {}, false, /*create_graph=*/true)[0];
  CHECK(g.requires_grad());
  CHECK(values(g) == std::vector<double>{6.75, 12});
  const Tensor g2 = autograd::grad({g.sum()}, {x})[0];
  CHECK(values(g2) == std::vector<double>{9, -12});

  // The same through pow and backward(create_graph): .grad keeps its history.
  Tensor z = leaf({2.0});
  pow(z, 3).sum().backward({}, false, /*create_graph=*/true);
  Tensor dz = z.grad();
  CHECK(dz.item<double>() == doctest::Approx(12));
  REQUIRE(dz.requires_grad());
  z.set_grad(Tensor());
  dz.sum().backward();
  CHECK(z.grad().item<double>() == doctest::Approx(12));  // 6z

  // Third derivative of x^4 at 1: 24x = 24.
  Tensor t = leaf({1.0});
  Tensor d1 = autograd::grad({pow(t, 4).sum()}, {t}, {}, false, true)[0];
  Tensor d2 = autograd::grad({d1.sum()}, {t}, {}, false, true)[0];
  Tensor d3 = autograd::grad({d2.sum()}, {t})[0];
  CHECK(d3.item<double>() == doctest::Approx(24));
}

TEST_CASE("autograd: gradients take their input's dtype and shape") {
  Tensor x = ones({2, 3}, TensorOptions(DType::f32).with_requires_grad());
  (x.to(DType::f16) * 2).to(DType::f32).sum().backward();
  CHECK(x.grad().dtype() == DType::f32);
  CHECK(values(x.grad()) == std::vector<double>(6, 2.0));
  // Broadcasting reduces the gradient back to the input's shape.
  Tensor b = ones({3}, TensorOptions(DType::f32).with_requires_grad());
  (ones({4, 2, 3}) * b).sum().backward();
  CHECK(b.grad().shape() == Shape{3});
  CHECK(values(b.grad()) == std::vector<double>{8, 8, 8});
  // Views route the gradient to the base's layout.
  Tensor m = ones({2, 3}, TensorOptions(DType::f64).with_requires_grad());
  (m.t() * from_vector<double>({1, 2, 3, 4, 5, 6}, {3, 2})).sum().backward();
  CHECK(values(m.grad()) == std::vector<double>{1, 3, 5, 2, 4, 6});
}

TEST_CASE("autograd: anomaly mode names the op that produced a non-finite value") {
  Tensor x = leaf({1.0, -1.0});
  {
    DetectAnomalyGuard anomaly;
    CHECK(autograd::AnomalyMode::is_enabled());
    const std::string msg = message_of<AutogradError>([&] { (void)log(x); });
    CHECK_MESSAGE(contains(msg, "log"), msg);
    // Finite results pass, and so does a forward infinity (masks, log(0) are legitimate).
    CHECK_NOTHROW(exp(x));
    CHECK_NOTHROW(log(zeros({2}, DType::f64)));
    const std::string dmsg = message_of<AutogradError>([] { (void)div(zeros({2}), zeros({2})); });
    CHECK_MESSAGE(contains(dmsg, "div"), dmsg);
  }
  CHECK_FALSE(autograd::AnomalyMode::is_enabled());
  CHECK_NOTHROW(log(x));  // without anomaly mode NaN goes through silently
  CHECK(std::isnan(values(log(x))[1]));

  // Backward: sqrt at 0 is finite forward, its gradient 1 / (2 sqrt(x)) is not.
  Tensor z = leaf({0.0, 4.0});
  Tensor y = sqrt(z).sum();
  {
    DetectAnomalyGuard anomaly;
    const std::string msg = message_of<AutogradError>([&] { y.backward(); });
    CHECK_MESSAGE(contains(msg, "sqrt"), msg);
  }
}

TEST_CASE("autograd: a backward observer sees each node's results in the order backward runs them") {
  Tensor x = leaf({1.0, 4.0});
  const uint64_t before = autograd::next_sequence_nr();
  Tensor r = sqrt(x);
  Tensor y = mul(r, 3.0).sum();
  const uint64_t after = autograd::next_sequence_nr();
  // The two readings bracket the nodes recorded between them.
  CHECK(r.grad_fn()->sequence_nr() >= before);
  CHECK(y.grad_fn()->sequence_nr() < after);

  std::vector<std::string> seen;
  std::vector<double> sqrt_grad;
  const autograd::BackwardObserver observer = [&](const autograd::Node& node, const std::vector<Tensor>& grads) {
    seen.emplace_back(node.name());
    if (seen.back() == "sqrt") sqrt_grad = values(grads.at(0));
  };
  {
    autograd::BackwardObserverGuard outer(observer);
    {
      autograd::BackwardObserverGuard off(nullptr);  // sets the outer one aside
      mul(x, 2.0).sum().backward();
    }
    CHECK(seen.empty());
    y.backward();
  }
  CHECK(seen == std::vector<std::string>{"sum", "mul", "sqrt", "accumulate_grad"});
  CHECK(sqrt_grad == std::vector<double>{1.5, 0.75});  // 3 / (2 sqrt(x)), what sqrt passes to x
  seen.clear();
  mul(x, 2.0).sum().backward();
  CHECK(seen.empty());  // the guard is gone
}

}  // TEST_SUITE("cpu")
