// amp::Autocast: every op of the policy table run under autocast (table-driven, each entry called),
// nested and disabled regions, thread-locality, the weight cast cache, gradients to f32 weights,
// batch norm with half inputs and f32 statistics, and an MLP against f32; on a GPU, the same on CUDA.
#include <functional>
#include <map>
#include <set>
#include <stdexcept>
#include <thread>

#include "nn/attention.h"
#include "nn/conv.h"
#include "nn/dropout.h"
#include "nn/embedding.h"
#include "nn/layers/attention.h"
#include "nn/layers/linear.h"
#include "nn/layers/normalization.h"
#include "nn/loss.h"
#include "nn/models/mlp.h"
#include "nn/normalization.h"
#include "nn/pooling.h"
#include "tensor/autocast.h"
#include "tensor/einsum.h"
#include "tensor/sort.h"
#include "tests/helpers.h"

using namespace ember;
using namespace ember_test;
using amp::Autocast;
using amp::Policy;

namespace {

const Device kCuda{DeviceType::cuda};
const std::vector<DType> kHalves = {DType::bf16, DType::f16};

// Deterministic tensors on one device, each call with a fresh seed; with `grad`, leaves that
// require grad, kept in `made`.
struct Maker {
  explicit Maker(Device device, uint64_t seed = 1) : device(device), seed(seed) {}
  Device device;
  uint64_t seed;
  bool grad = false;
  std::vector<Tensor> made;
  Tensor operator()(const Shape& s, DType d, double lo = -1, double hi = 1) {
    Tensor t = make_tensor(random_values(numel(s), DType::f64, lo, hi, false, seed++), s, d, device);
    if (grad) made.push_back(t.requires_grad_(true));
    return t;
  }
  Tensor index(const std::vector<int64_t>& v, const Shape& s) const { return from_vector(v, s).to(device); }
  Tensor mask(const Shape& s) { return gt((*this)(s, DType::f32), 0); }
};

// One call of an op: x is the dtype of its first floating argument, w of the others.
using Call = std::function<Tensor(Maker&, DType x, DType w)>;

// A call for every op name of the policy table; the tests below check that the two lists agree.
std::map<std::string, Call> op_calls() {
  using M = Maker;
  auto unary = [](Tensor (*f)(const Tensor&), double lo = -1, double hi = 1) {
    return Call([f, lo, hi](M& m, DType x, DType) { return f(m({2, 3}, x, lo, hi)); });
  };
  auto binary = [](Tensor (*f)(const Tensor&, const Tensor&)) {
    return Call([f](M& m, DType x, DType w) { return f(m({2, 3}, x), m({2, 3}, w)); });
  };
  std::map<std::string, Call> c;
  c["matmul"] = [](M& m, DType x, DType w) { return matmul(m({3, 4}, x), m({4, 5}, w)); };
  c["mm"] = [](M& m, DType x, DType w) { return mm(m({3, 4}, x), m({4, 5}, w)); };
  c["bmm"] = [](M& m, DType x, DType w) { return bmm(m({2, 3, 4}, x), m({2, 4, 5}, w)); };
  // elementwise, so that the result's dtype shows einsum's own cast rather than matmul's
  c["einsum"] = [](M& m, DType x, DType w) { return einsum("ij,ij->ij", {m({2, 3}, x), m({2, 3}, w)}); };
  c["conv2d"] = [](M& m, DType x, DType w) { return conv2d(m({1, 2, 5, 5}, x), m({3, 2, 3, 3}, w), m({3}, w)); };
  c["cumsum"] = [](M& m, DType x, DType) { return cumsum(m({2, 3}, x), 1); };
  c["cumprod"] = [](M& m, DType x, DType) { return cumprod(m({2, 3}, x), 1); };
  c["conv_transpose2d"] = [](M& m, DType x, DType w) {
    return conv_transpose2d(m({1, 2, 3, 3}, x), m({2, 3, 3, 3}, w), m({3}, w), {2, 2});
  };
  c["linear"] = [](M& m, DType x, DType w) {
    nn::Linear layer(4, 3);
    layer.to(w).to(m.device);
    return layer(m({2, 4}, x));
  };
  c["scaled_dot_product_attention"] = [](M& m, DType x, DType w) {
    return scaled_dot_product_attention(m({2, 3, 4}, x), m({2, 5, 4}, w), m({2, 5, 3}, w));
  };
  c["exp"] = unary(exp);
  c["log"] = unary(log, 0.5, 2);
  c["log1p"] = unary(log1p, 0.5, 2);
  c["pow"] = [](M& m, DType x, DType w) { return pow(m({2, 3}, x, 0.5, 2), m({2, 3}, w)); };
  c["pow_scalar"] = [](M& m, DType x, DType) { return pow(m({2, 3}, x, 0.5, 2), 2.5); };
  c["reciprocal"] = unary(reciprocal, 0.5, 2);
  c["rsqrt"] = unary(rsqrt, 0.5, 2);
  c["layer_norm"] = [](M& m, DType x, DType w) { return layer_norm(m({2, 5}, x), {5}, m({5}, w), m({5}, w)); };
  c["norm"] = [](M& m, DType x, DType) { return norm(m({2, 3}, x)); };
  c["logsumexp"] = [](M& m, DType x, DType) { return logsumexp(m({3, 4}, x), {1}); };
  c["cross_entropy"] = [](M& m, DType x, DType) { return cross_entropy(m({3, 5}, x), m.index({0, 4, 2}, {3})); };
  c["nll_loss"] = [](M& m, DType x, DType) { return nll_loss(m({3, 5}, x), m.index({1, 3, 2}, {3})); };
  c["mse_loss"] = [](M& m, DType x, DType w) { return mse_loss(m({2, 3}, x), m({2, 3}, w)); };
  c["sum"] = [](M& m, DType x, DType) { return sum(m({2, 3}, x)); };
  c["prod"] = [](M& m, DType x, DType) { return prod(m({2, 3}, x)); };
  c["softmax"] = [](M& m, DType x, DType) { return softmax(m({2, 3}, x), 1); };
  c["log_softmax"] = [](M& m, DType x, DType) { return log_softmax(m({2, 3}, x), 1); };
  c["cat"] = [](M& m, DType x, DType w) { return cat({m({2, 3}, x), m({1, 3}, w)}); };
  c["stack"] = [](M& m, DType x, DType w) { return stack({m({2, 3}, x), m({2, 3}, w)}, 1); };
  c["scatter_add"] = [](M& m, DType x, DType w) {
    return scatter_add(m({3, 4}, x), 1, m.index({0, 3, 1, 1, 2, 0}, {3, 2}), m({3, 2}, w));
  };
  c["index_add"] = [](M& m, DType x, DType w) { return index_add(m({3, 4}, x), 0, m.index({2, 0}, {2}), m({2, 4}, w)); };
  c["where"] = [](M& m, DType x, DType w) { return where(m.mask({2, 3}), m({2, 3}, x), m({2, 3}, w)); };
  c["neg"] = unary(neg);
  c["abs"] = unary(abs);
  c["sign"] = unary(sign);
  c["square"] = unary(square);
  c["relu"] = unary(relu);
  c["clamp"] = [](M& m, DType x, DType) { return clamp(m({2, 3}, x), -0.5, 0.5); };
  c["sqrt"] = unary(sqrt, 0.5, 2);
  c["sin"] = unary(sin);
  c["cos"] = unary(cos);
  c["tanh"] = unary(tanh);
  c["sigmoid"] = unary(sigmoid);
  c["gelu"] = [](M& m, DType x, DType) { return gelu(m({2, 3}, x)); };
  c["gelu_tanh"] = [](M& m, DType x, DType) { return gelu(m({2, 3}, x), true); };
  c["silu"] = unary(silu);
  c["erf"] = unary(erf);
  c["add"] = binary(add);
  c["sub"] = binary(sub);
  c["mul"] = binary(mul);
  c["div"] = binary(div);
  c["maximum"] = binary(maximum);
  c["minimum"] = binary(minimum);
  c["eq"] = binary(eq);
  c["ne"] = binary(ne);
  c["lt"] = binary(lt);
  c["le"] = binary(le);
  c["gt"] = binary(gt);
  c["ge"] = binary(ge);
  c["logical_not"] = unary(logical_not);
  c["masked_fill"] = [](M& m, DType x, DType) { return masked_fill(m({2, 3}, x), m.mask({2, 3}), 0.5); };
  c["index_select"] = [](M& m, DType x, DType) { return index_select(m({3, 4}, x), 0, m.index({2, 0}, {2})); };
  c["gather"] = [](M& m, DType x, DType) { return gather(m({3, 4}, x), 1, m.index({0, 3, 1, 1, 2, 0}, {3, 2})); };
  c["mean"] = [](M& m, DType x, DType) { return mean(m({2, 3}, x)); };
  c["amax"] = [](M& m, DType x, DType) { return amax(m({2, 3}, x), {1}); };
  c["amin"] = [](M& m, DType x, DType) { return amin(m({2, 3}, x), {1}); };
  c["max"] = [](M& m, DType x, DType) { return max(m({2, 3}, x), 1).values; };
  c["min"] = [](M& m, DType x, DType) { return min(m({2, 3}, x), 1).values; };
  c["argmax"] = [](M& m, DType x, DType) { return argmax(m({2, 3}, x), 1); };
  c["argmin"] = [](M& m, DType x, DType) { return argmin(m({2, 3}, x), 1); };
  c["sort"] = [](M& m, DType x, DType) { return sort(m({2, 3}, x), 1).values; };
  c["topk"] = [](M& m, DType x, DType) { return topk(m({2, 3}, x), 2, 1).values; };
  c["var"] = [](M& m, DType x, DType) { return var(m({2, 3}, x), {1}); };
  c["std"] = [](M& m, DType x, DType) { return ember::std(m({2, 3}, x), {1}); };
  c["batch_norm"] = [](M& m, DType x, DType w) {
    return batch_norm(m({4, 3, 2, 2}, x), m({3}, w), m({3}, w, 0.5, 2), m({3}, w), m({3}, w), /*training=*/true);
  };
  c["max_pool2d"] = [](M& m, DType x, DType) { return max_pool2d(m({1, 2, 4, 4}, x), {2, 2}); };
  c["avg_pool2d"] = [](M& m, DType x, DType) { return avg_pool2d(m({1, 2, 4, 4}, x), {2, 2}); };
  c["adaptive_avg_pool2d"] = [](M& m, DType x, DType) { return adaptive_avg_pool2d(m({1, 2, 5, 5}, x), {2, 2}); };
  c["embedding"] = [](M& m, DType x, DType) { return embedding(m({5, 3}, x), m.index({4, 0, 2}, {3})); };
  c["dropout"] = [](M& m, DType x, DType) { return dropout(m({4, 5}, x), 0.5, /*training=*/true); };
  return c;
}

// The output dtype of call(x, w) on `device` outside any region.
DType plain_dtype(const Call& call, Device device, DType x, DType w) {
  Maker m{device};
  return call(m, x, w).dtype();
}

// Runs every table entry under Autocast(device_type, dt) with inputs that reveal its policy.
void check_table(Device device) {
  const auto calls = op_calls();
  for (const amp::OpPolicy& e : amp::policy_table()) {
    const std::string op(e.op);
    INFO("op ", op, ", policy ", std::string(amp::policy_name(e.policy)));
    const auto it = calls.find(op);
    REQUIRE_MESSAGE(it != calls.end(), "the test has no call for table entry ", op);
    const Call& call = it->second;
    for (DType dt : kHalves) {
      INFO("autocast dtype ", name(dt));
      auto inside = [&](DType x, DType w) {
        Autocast region(device.type, dt);
        Maker m{device};
        return call(m, x, w).dtype();
      };
      switch (e.policy) {
        case Policy::lower:  // f32 arguments compute in dt, as do f32 weights beside a dt input
          CHECK(name(inside(DType::f32, DType::f32)) == name(dt));
          CHECK(name(inside(dt, DType::f32)) == name(dt));
          CHECK(name(plain_dtype(call, device, DType::f32, DType::f32)) == name(DType::f32));
          break;
        case Policy::fp32:
        case Policy::fp32_unless_dtype:  // half arguments compute in f32
          CHECK(name(inside(dt, dt)) == name(DType::f32));
          CHECK(name(plain_dtype(call, device, dt, dt)) == name(dt));
          break;
        case Policy::promote:  // the widest argument wins; all-half stays half
          CHECK(name(inside(dt, DType::f32)) == name(DType::f32));
          CHECK(name(inside(dt, dt)) == name(dt));
          break;
        case Policy::none:  // unchanged, inner ops included (mean sums in its input type)
          CHECK(name(inside(dt, dt)) == name(plain_dtype(call, device, dt, dt)));
          CHECK(name(inside(DType::f32, DType::f32)) == name(plain_dtype(call, device, DType::f32, DType::f32)));
          break;
      }
    }
  }
}

// Autocast of the other device type leaves ops on `device` alone.
void check_other_device_untouched(Device device, DeviceType other) {
  const auto calls = op_calls();
  for (const amp::OpPolicy& e : amp::policy_table()) {
    if (e.policy != Policy::lower) continue;
    INFO("op ", std::string(e.op));
    Autocast region(other, DType::f16);
    Maker m{device};
    CHECK(name(calls.at(std::string(e.op))(m, DType::f32, DType::f32).dtype()) == name(DType::f32));
  }
}

// Checks that got (any dtype) is close to want with the tolerance of dtype d.
void check_close(const Tensor& got, const Tensor& want, DType d, const std::string& what) {
  check_values(got.to(kCPU), to_host(want.to(kCPU)), tolerance(d), what);
}

// y = sum(op(x, w) * r) under Autocast(dt) against f32 on the dt-rounded inputs: the forward
// value and the f32 weight's gradient (which must stay f32).
void check_gradient_to_f32_weight(Device device, DType dt, const std::string& what,
                                  const std::function<Tensor(const Tensor&, const Tensor&)>& op, const Shape& xs,
                                  const Shape& ws) {
  INFO(what, " ", name(dt));
  Maker m{device};
  const Tensor x = m(xs, DType::f32).to(dt).to(DType::f32), w0 = m(ws, DType::f32).to(dt).to(DType::f32);
  Tensor w = w0.clone().requires_grad_(true);
  Tensor y;
  {
    Autocast region(device.type, dt);
    y = op(x, w);
    CHECK(name(y.dtype()) == name(dt));
    sum(y.to(DType::f32)).backward();
  }
  REQUIRE(w.grad().defined());
  CHECK(name(w.grad().dtype()) == name(DType::f32));
  Tensor wr = w0.clone().requires_grad_(true);
  const Tensor yr = op(x, wr);
  sum(yr).backward();
  check_close(y, yr, dt, "forward");
  check_close(w.grad(), wr.grad(), dt, "weight gradient");
}

void check_gradients_to_f32_weights(Device device) {
  for (DType dt : kHalves) {
    check_gradient_to_f32_weight(device, dt, "matmul", [](const Tensor& x, const Tensor& w) { return matmul(x, w); },
                                 {3, 8}, {8, 4});
    check_gradient_to_f32_weight(
        device, dt, "conv2d", [](const Tensor& x, const Tensor& w) { return conv2d(x, w, {}, {1, 1}, {1, 1}); },
        {2, 2, 5, 5}, {3, 2, 3, 3});
    check_gradient_to_f32_weight(
        device, dt, "linear",
        [](const Tensor& x, const Tensor& w) {
          nn::Linear layer(6, 4, /*bias=*/false);
          layer.weight = w;  // the test's weight, a leaf of its own
          return layer(x);
        },
        {3, 6}, {4, 6});
  }
}

// A training step of BatchNorm2d(3) (f32 parameters and statistics) on x, under Autocast(dt) when
// dt is given, backpropagating sum(y * g): output, running statistics, weight and input gradients.
std::vector<Tensor> batch_norm_step(Device device, std::optional<DType> dt, const Tensor& x, const Tensor& g) {
  nn::BatchNorm2d bn(3);
  bn.to(device);
  Tensor xi = x.to(device).detach().requires_grad_(true);
  std::optional<Autocast> region;
  if (dt) region.emplace(device.type, *dt);
  const Tensor y = bn(xi);
  sum(y.to(DType::f32) * g.to(device)).backward();
  return {y, bn.running_mean, bn.running_var, bn.weight.grad(), xi.grad()};
}

// batch_norm_step on `device` under autocast against the CPU's, in f32 on the same half values
// (against_f32) or under autocast too.
void check_batch_norm(Device device, const Shape& shape, bool against_f32) {
  const char* what[] = {"output", "running_mean", "running_var", "weight gradient", "input gradient"};
  Maker m{kCPU};
  for (DType dt : kHalves) {
    INFO(name(dt));
    const Tensor x = m(shape, DType::f32).to(dt), g = m(shape, DType::f32);
    const std::vector<Tensor> got = batch_norm_step(device, dt, x, g);
    const std::vector<Tensor> want = against_f32 ? batch_norm_step(kCPU, std::nullopt, x.to(DType::f32), g)
                                                 : batch_norm_step(kCPU, dt, x, g);
    const DType dtypes[] = {dt, DType::f32, DType::f32, DType::f32, dt};
    for (size_t i = 0; i < got.size(); ++i) {
      CHECK(name(got[i].dtype()) == name(dtypes[i]));
      // The statistics are computed in f32 from the half values, as the f32 reference does.
      check_close(got[i], want[i], i == 1 || i == 2 ? DType::f32 : dt, what[i]);
    }
  }
}

}  // namespace

TEST_SUITE("cpu") {

TEST_CASE("autocast table: names are unique, every entry has a test call and every call an entry") {
  const auto calls = op_calls();
  std::set<std::string> names;
  for (const amp::OpPolicy& e : amp::policy_table()) {
    CHECK_MESSAGE(names.insert(std::string(e.op)).second, "duplicate table entry ", std::string(e.op));
    CHECK(amp::policy_of(e.op) == e.policy);
  }
  for (const auto& [op, call] : calls) CHECK_MESSAGE(names.count(op) == 1, "no table entry for ", op);
  CHECK(names.size() == calls.size());
  expect_error<ValueError>("unknown op", [] { amp::policy_of("matmull"); }, {"matmull", "register_policy"});
}

TEST_CASE("autocast table: every op runs in the dtype its policy says, and unchanged outside a region") {
  check_table(kCPU);
}

TEST_CASE("every table op runs forward and backward in f16 and bf16 on the CPU, gradients in the input dtype") {
  for (const auto& [op, call] : op_calls())
    for (DType dt : kHalves) {
      INFO(op, " ", name(dt));
      Maker m{kCPU};
      m.grad = true;
      const Tensor y = call(m, dt, dt);
      if (!y.requires_grad()) continue;  // comparisons, argmax: no gradient
      CHECK(name(y.dtype()) == name(dt));
      sum(y).backward();
      int with_grad = 0;
      for (const Tensor& t : m.made) {
        if (!t.grad().defined()) continue;
        ++with_grad;
        CHECK(name(t.grad().dtype()) == name(dt));
        CHECK(all_finite(t.grad()));
      }
      CHECK(with_grad > 0);
    }
}

TEST_CASE("casts carry gradients back in the source dtype") {
  for (DType src : kFloats)
    for (DType dst : kFloats) {
      INFO(name(src), " -> ", name(dst));
      Tensor x = from_vector<double>({0.5, -1.25, 2.0}, {3}).to(src).requires_grad_(true);
      sum(x.to(dst) * 3.0).backward();
      CHECK(name(x.grad().dtype()) == name(src));
      CHECK(x.grad().to_vector<double>() == std::vector<double>{3.0, 3.0, 3.0});
    }
}

TEST_CASE("autocast: a CUDA region leaves CPU ops alone") { check_other_device_untouched(kCPU, DeviceType::cuda); }

TEST_CASE("autocast: lower-precision ops compute in the half type, not merely round their f32 result") {
  Maker m{kCPU};
  const Tensor a = m({5, 7}, DType::f32), b = m({7, 3}, DType::f32);
  for (DType dt : kHalves) {
    Autocast region(DeviceType::cpu, dt);
    const Tensor got = matmul(a, b);
    Autocast off(DeviceType::cpu, std::nullopt, /*enabled=*/false);
    CHECK(equal(got, matmul(a.to(dt), b.to(dt))));
  }
}

TEST_CASE("autocast: an explicit dtype turns fp32_unless_dtype off for the call") {
  Maker m{kCPU};
  const Tensor x = m({2, 3}, DType::bf16);
  Autocast region(DeviceType::cpu, DType::bf16);
  CHECK(name(sum(x).dtype()) == name(DType::f32));
  CHECK(name(sum(x, {}, false, DType::bf16).dtype()) == name(DType::bf16));
  CHECK(name(sum(x, {1}, false, DType::f64).dtype()) == name(DType::f64));
  CHECK(name(prod(x, {}, false, DType::bf16).dtype()) == name(DType::bf16));
  CHECK(name(softmax(x, 1, DType::bf16).dtype()) == name(DType::bf16));
  CHECK(name(log_softmax(x, 1, DType::f16).dtype()) == name(DType::f16));
  // The conversion happens before the op, as PyTorch's dtype argument does.
  CHECK(equal(softmax(x, 1, DType::f64), softmax(x.to(DType::f64), 1)));
}

TEST_CASE("autocast: defaults, state queries and a refused dtype") {
  CHECK_FALSE(amp::is_autocast_enabled(DeviceType::cpu));
  CHECK(name(amp::get_autocast_dtype(DeviceType::cpu)) == name(DType::bf16));
  CHECK(name(amp::get_autocast_dtype(DeviceType::cuda)) == name(DType::f16));
  {
    Autocast region(DeviceType::cpu);
    CHECK(amp::is_autocast_enabled(DeviceType::cpu));
    CHECK_FALSE(amp::is_autocast_enabled(DeviceType::cuda));
    CHECK(name(amp::get_autocast_dtype(DeviceType::cpu)) == name(DType::bf16));
    CHECK(amp::is_autocast_cache_enabled());
  }
  {
    Autocast region(DeviceType::cuda);
    CHECK(amp::is_autocast_enabled(DeviceType::cuda));
    CHECK(name(amp::get_autocast_dtype(DeviceType::cuda)) == name(DType::f16));
  }
  expect_error<ValueError>("f32 region", [] { Autocast region(DeviceType::cpu, DType::f32); },
                           {"float16 or bfloat16", "float32"});
  CHECK_FALSE(amp::is_autocast_enabled(DeviceType::cpu));
}

TEST_CASE("autocast: nested regions, a disabled inner region, state restored after exit and exceptions") {
  Maker m{kCPU};
  const Tensor a = m({2, 3}, DType::f32), b = m({3, 2}, DType::f32);
  {
    Autocast outer(DeviceType::cpu, DType::bf16);
    CHECK(name(matmul(a, b).dtype()) == name(DType::bf16));
    {
      Autocast inner(DeviceType::cpu, DType::f16);
      CHECK(name(matmul(a, b).dtype()) == name(DType::f16));
    }
    CHECK(name(matmul(a, b).dtype()) == name(DType::bf16));
    {
      Autocast inherits(DeviceType::cpu);  // no dtype: the current one, as torch.autocast
      CHECK(name(matmul(a, b).dtype()) == name(DType::bf16));
    }
    {
      Autocast off(DeviceType::cpu, std::nullopt, /*enabled=*/false);
      CHECK_FALSE(amp::is_autocast_enabled(DeviceType::cpu));
      CHECK(name(matmul(a, b).dtype()) == name(DType::f32));
      {
        Autocast on_again(DeviceType::cpu, DType::f16);
        CHECK(name(matmul(a, b).dtype()) == name(DType::f16));
      }
      CHECK(name(matmul(a, b).dtype()) == name(DType::f32));
    }
    CHECK(amp::is_autocast_enabled(DeviceType::cpu));
    try {
      Autocast inner(DeviceType::cpu, DType::f16, true, /*cache_enabled=*/false);
      CHECK_FALSE(amp::is_autocast_cache_enabled());
      throw std::runtime_error("leaving the region by an exception");
    } catch (const std::runtime_error&) {
    }
    CHECK(name(amp::get_autocast_dtype(DeviceType::cpu)) == name(DType::bf16));
    CHECK(amp::is_autocast_cache_enabled());
    CHECK(name(matmul(a, b).dtype()) == name(DType::bf16));
  }
  CHECK_FALSE(amp::is_autocast_enabled(DeviceType::cpu));
  CHECK(name(matmul(a, b).dtype()) == name(DType::f32));
  try {
    Autocast region(DeviceType::cpu, DType::f16);
    throw std::runtime_error("leaving the outermost region by an exception");
  } catch (const std::runtime_error&) {
  }
  CHECK_FALSE(amp::is_autocast_enabled(DeviceType::cpu));
  CHECK(name(amp::get_autocast_dtype(DeviceType::cpu)) == name(DType::bf16));
}

TEST_CASE("autocast: the state is thread-local") {
  Maker m{kCPU};
  const Tensor a = m({2, 3}, DType::f32), b = m({3, 2}, DType::f32);
  Autocast region(DeviceType::cpu, DType::bf16);
  bool other_enabled = true;
  DType other_dtype = DType::bf16;
  std::thread other([&] {
    other_enabled = amp::is_autocast_enabled(DeviceType::cpu);
    other_dtype = matmul(a, b).dtype();
  });
  other.join();
  CHECK_FALSE(other_enabled);
  CHECK(name(other_dtype) == name(DType::f32));
  CHECK(name(matmul(a, b).dtype()) == name(DType::bf16));
}

TEST_CASE("autocast cast cache: one cast per weight and region, invalidated by in-place writes, cleared on exit") {
  Maker m{kCPU};
  const Tensor x = m({2, 4}, DType::f32);
  Tensor w = m({4, 3}, DType::f32).requires_grad_(true);
  CHECK(amp::cast_cache_size() == 0);
  {
    Autocast region(DeviceType::cpu, DType::bf16);
    const Tensor c1 = amp::cached_cast(w, DType::bf16);
    CHECK(amp::cast_cache_size() == 1);
    CHECK(c1.is_same(amp::cached_cast(w, DType::bf16)));
    // matmul takes the cached cast: the gradient reaches c1, then w in f32.
    c1.retain_grad();
    const Tensor y = matmul(x, w);
    CHECK(amp::cast_cache_size() == 1);
    sum(y.to(DType::f32)).backward();
    REQUIRE(c1.grad().defined());
    CHECK(name(c1.grad().dtype()) == name(DType::bf16));
    CHECK(name(w.grad().dtype()) == name(DType::f32));
    CHECK(equal(w.grad(), c1.grad().to(DType::f32)));
    // An in-place update (an optimizer step) bumps the version: the next use casts again.
    {
      NoGradGuard no_grad;
      add_(w, 1.0);
    }
    const Tensor c2 = amp::cached_cast(w, DType::bf16);
    CHECK_FALSE(c2.is_same(c1));
    CHECK(equal(c2, w.detach().to(DType::bf16)));
    CHECK(amp::cast_cache_size() == 1);
    {
      Autocast inner(DeviceType::cpu, DType::f16);
      CHECK(amp::cached_cast(w, DType::f16).is_same(amp::cached_cast(w, DType::f16)));
      CHECK(amp::cast_cache_size() == 2);  // keyed by the target dtype too
    }
    CHECK(amp::cast_cache_size() == 2);  // an inner region's exit keeps the outermost region's cache
  }
  CHECK(amp::cast_cache_size() == 0);
}

TEST_CASE("autocast cast cache: only f32 leaves that require grad, with grad mode and the cache on") {
  Maker m{kCPU};
  Tensor w = m({4, 3}, DType::f32).requires_grad_(true);
  const Tensor plain = m({4, 3}, DType::f32);
  CHECK_FALSE(amp::cached_cast(w, DType::bf16).is_same(amp::cached_cast(w, DType::bf16)));  // outside a region
  Autocast region(DeviceType::cpu, DType::bf16);
  CHECK_FALSE(amp::cached_cast(plain, DType::bf16).is_same(amp::cached_cast(plain, DType::bf16)));
  const Tensor nonleaf = w * 2.0;
  CHECK_FALSE(amp::cached_cast(nonleaf, DType::bf16).is_same(amp::cached_cast(nonleaf, DType::bf16)));
  {
    NoGradGuard no_grad;  // a cast without an autograd node must not serve a later use that needs one
    amp::cached_cast(w, DType::bf16);
  }
  CHECK(amp::cast_cache_size() == 0);
  {
    Autocast uncached(DeviceType::cpu, DType::bf16, true, /*cache_enabled=*/false);
    amp::cached_cast(w, DType::bf16);
    CHECK(amp::cast_cache_size() == 0);
  }
  nn::Linear layer(4, 3);
  const Tensor x = m({2, 4}, DType::f32);
  layer(x);
  layer(x);
  CHECK(amp::cast_cache_size() == 2);  // weight and bias, once each for the two calls
}

TEST_CASE("autocast: gradients reach f32 weights through matmul, conv2d and linear") {
  check_gradients_to_f32_weights(kCPU);
}

TEST_CASE("autocast: batch norm takes a half input with f32 weight, bias and running statistics") {
  check_batch_norm(kCPU, {4, 3, 2, 2}, /*against_f32=*/true);
}

TEST_CASE("autocast: MultiheadAttention projects and multiplies in the half type, softmax in f32") {
  Maker m{kCPU};
  nn::MultiheadAttention mha(8, 2);
  const Tensor x = m({2, 5, 8}, DType::f32);
  Autocast region(DeviceType::cpu, DType::bf16);
  const Tensor y = mha(x);
  CHECK(name(y.dtype()) == name(DType::bf16));
  sum(y.to(DType::f32)).backward();
  CHECK(name(mha.in_proj_weight.grad().dtype()) == name(DType::f32));
  CHECK(name(mha.out_proj->weight.grad().dtype()) == name(DType::f32));
}

TEST_CASE("autocast: an MLP's loss and gradients match f32 within bf16's tolerance") {
  Maker m{kCPU};
  nn::MLP model(6, {16}, 4);
  // bf16-exact parameters and inputs, so that the difference is the rounding inside the region.
  {
    NoGradGuard no_grad;
    for (Tensor& p : model.parameters()) copy_(p, p.to(DType::bf16));
  }
  const Tensor x = m({8, 6}, DType::f32).to(DType::bf16).to(DType::f32);
  const Tensor target = m.index({0, 1, 2, 3, 3, 2, 1, 0}, {8});
  auto run = [&](bool autocast) {
    model.zero_grad();
    std::optional<Autocast> region;
    if (autocast) region.emplace(DeviceType::cpu, DType::bf16);
    const Tensor loss = cross_entropy(model(x), target);
    CHECK(name(loss.dtype()) == name(DType::f32));  // losses are fp32 ops
    loss.backward();
    std::vector<Tensor> out{loss.detach()};
    for (const Tensor& p : model.parameters()) out.push_back(p.grad());
    return out;
  };
  const std::vector<Tensor> got = run(true), want = run(false);
  for (size_t i = 0; i < got.size(); ++i) {
    CHECK(name(got[i].dtype()) == name(DType::f32));
    check_close(got[i], want[i], DType::bf16, i == 0 ? "loss" : "gradient " + std::to_string(i));
  }
}

TEST_CASE("autocast: backward ops run in the forward's dtypes, even when backward runs inside a region") {
  Maker m{kCPU};
  const Tensor a = m({3, 8}, DType::f32);
  Tensor w = m({8, 4}, DType::f32).requires_grad_(true);
  sum(matmul(a, w)).backward();
  const Tensor want = w.grad();
  w.set_grad({});
  const Tensor y = sum(matmul(a, w));  // recorded in f32
  {
    Autocast region(DeviceType::cpu, DType::bf16);
    y.backward();  // matmul's vjp must not run in bf16
  }
  CHECK(equal(w.grad(), want));
}

}  // TEST_SUITE("cpu")

EMBER_CUDA_TEST_CASE("cuda autocast table: every op runs in the dtype its policy says") { check_table(kCuda); }

EMBER_CUDA_TEST_CASE("cuda autocast: a CPU region leaves CUDA ops alone") {
  check_other_device_untouched(kCuda, DeviceType::cpu);
}

EMBER_CUDA_TEST_CASE("cuda autocast: matmul, conv2d and linear match f32 and send f32 gradients") {
  check_gradients_to_f32_weights(kCuda);
}

EMBER_CUDA_TEST_CASE("cuda autocast: batch norm with a half input and f32 parameters matches the CPU") {
  check_batch_norm(kCuda, {4, 3, 5, 5}, /*against_f32=*/false);
}
