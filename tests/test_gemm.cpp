// GEMM: the linear primitive against its composite matmul(x, w.t()) + b (forward and backward, every
// float dtype, batched and non-contiguous inputs), the matmul TF32 switch, and on a GPU the cuBLASLt
// matmul and linear against the CPU (odd sizes, transposed, broadcast and misaligned operands, TF32
// on and off) and the reuse of its plan cache.
#include <algorithm>
#include <string>

#include "autograd/node.h"
#include "nn/layers/linear.h"
#include "tensor/cuda_settings.h"
#include "tests/helpers.h"

using namespace ember;
using namespace ember_test;

namespace {

const Device kCuda{DeviceType::cuda, 0};

uint64_t next_seed() {
  static uint64_t s = 1;
  return s++;
}

// Values uniform in [-1, 1] rounded to dtype d, on `device`.
Tensor uniform(const Shape& s, DType d, Device device = kCPU) {
  return make_tensor(random_values(numel(s), DType::f64, -1, 1, false, next_seed()), s, d, device);
}

// A (rows, cols) view whose data starts one element into its storage: its address is then a
// multiple of the element size but not of 16 bytes.
Tensor offset_by_one(const Tensor& t) {
  const Tensor flat = uniform({t.numel() + 1}, t.dtype(), t.device());
  Tensor view = reshape(slice(flat, 0, 1, t.numel() + 1), t.shape());
  copy_(view, t);
  return view;
}

// The composite linear is the reference: matmul(x, w.t()) + b.
Tensor composite(const Tensor& x, const Tensor& w, const Tensor& b) {
  const Tensor y = matmul(x, w.t());
  return b.defined() ? y + b : y;
}

// The inputs of one linear case: x (layout as named), w, and b or none.
struct LinearCase {
  std::string what;
  Tensor x, w, b;
};

std::vector<LinearCase> linear_cases(DType d, Device device = kCPU) {
  std::vector<LinearCase> v;
  for (bool bias : {true, false}) {
    const std::string tail = bias ? ", bias" : ", no bias";
    auto b = [&](int64_t out) { return bias ? uniform({out}, d, device) : Tensor(); };
    v.push_back({"x (5, 7)" + tail, uniform({5, 7}, d, device), uniform({4, 7}, d, device), b(4)});
    v.push_back({"x (2, 3, 7)" + tail, uniform({2, 3, 7}, d, device), uniform({4, 7}, d, device), b(4)});
    v.push_back({"x (7), 1-D" + tail, uniform({7}, d, device), uniform({4, 7}, d, device), b(4)});
    v.push_back({"x (5, 7) transposed" + tail, uniform({7, 5}, d, device).t(), uniform({4, 7}, d, device), b(4)});
    v.push_back({"x (3, 2, 7) every other row" + tail, slice(uniform({3, 4, 7}, d, device), 1, 0, 4, 2),
                 uniform({4, 7}, d, device), b(4)});
    v.push_back({"x (2, 3, 7) permuted, w transposed" + tail, uniform({3, 2, 7}, d, device).transpose(0, 1),
                 uniform({7, 4}, d, device).t(), b(4)});
    v.push_back({"one output feature" + tail, uniform({5, 7}, d, device), uniform({1, 7}, d, device), b(1)});
    v.push_back({"one input feature" + tail, uniform({5, 1}, d, device), uniform({4, 1}, d, device), b(4)});
    v.push_back({"no input features" + tail, uniform({5, 0}, d, device), uniform({4, 0}, d, device), b(4)});
    v.push_back({"no rows" + tail, uniform({0, 7}, d, device), uniform({4, 7}, d, device), b(4)});
  }
  return v;
}

Tensor to_f64(const Tensor& t) { return t.defined() ? t.to(kCPU).to(DType::f64) : Tensor(); }

// x, w and b as fresh leaves requiring grad.
LinearCase leaves(const LinearCase& c) {
  auto leaf = [](const Tensor& t) { return t.defined() ? t.detach().requires_grad_(true) : Tensor(); };
  return {c.what, leaf(c.x), leaf(c.w), leaf(c.b)};
}

// y = f(x, w, b) and, after y.backward(g), the gradients of x, w and b.
template <class F>
std::vector<Tensor> value_and_grads(const LinearCase& in, const Tensor& g, F f) {
  const LinearCase c = leaves(in);
  const Tensor y = f(c.x, c.w, c.b);
  y.backward(g);
  return {y, c.x.grad(), c.w.grad(), c.b.defined() ? c.b.grad() : Tensor()};
}

struct MatmulSwitchGuard {
  bool tf32 = cuda::matmul_allow_tf32();
  ~MatmulSwitchGuard() { cuda::set_matmul_allow_tf32(tf32); }
};

}  // namespace

TEST_SUITE("cpu") {
  TEST_CASE("linear: forward matches the composite matmul(x, w.t()) + b in every float dtype") {
    for (DType d : kFloats)
      for (const LinearCase& c : linear_cases(d)) {
        INFO(c.what, " ", name(d));
        const Tensor y = linear(c.x, c.w, c.b);
        CHECK(y.dtype() == d);
        // The composite in f64 on the same (rounded) values; the fused kernel rounds once to d.
        check_values(y, to_host(composite(to_f64(c.x), to_f64(c.w), to_f64(c.b))), tolerance(d), "y");
      }
  }

  TEST_CASE("linear: gradients match the composite's (f64)") {
    for (const LinearCase& c : linear_cases(DType::f64)) {
      INFO(c.what);
      Shape y_shape = c.x.shape();
      y_shape[y_shape.size() - 1] = c.w.shape()[0];
      const Tensor g = uniform(y_shape, DType::f64);
      const std::vector<Tensor> got = value_and_grads(c, g, [](auto x, auto w, auto b) { return linear(x, w, b); });
      const std::vector<Tensor> want = value_and_grads(c, g, composite);
      const char* what[] = {"y", "x.grad", "w.grad", "b.grad"};
      for (size_t i = 0; i < want.size(); ++i)
        if (want[i].defined()) check_values(got[i], to_host(want[i]), tolerance(DType::f64), what[i]);
    }
  }

  TEST_CASE("linear: a graph node of its own, whose vjp saves no bias") {
    const Tensor x = uniform({3, 5}, DType::f32).requires_grad_(true);
    const Tensor w = uniform({2, 5}, DType::f32).requires_grad_(true);
    const Tensor b = uniform({2}, DType::f32).requires_grad_(true);
    const Tensor y = linear(x, w, b);
    REQUIRE(y.grad_fn());
    CHECK(std::string(y.grad_fn()->name()) == "linear");
    {
      NoGradGuard no_grad;  // an in-place write to the bias leaves backward valid: it is not saved
      Tensor bias = b;
      mul_(bias, 2.0);
    }
    CHECK_NOTHROW(y.sum().backward());
    check_values(b.grad(), to_host(ones({2}) * 3.0), tolerance(DType::f32), "b.grad = rows");
  }

  TEST_CASE("linear: mixed dtypes promote as the composite does") {
    const Tensor x = uniform({3, 4}, DType::f16), w = uniform({2, 4}, DType::f32), b = uniform({2}, DType::f64);
    CHECK(linear(x, w).dtype() == DType::f32);
    const Tensor y = linear(x, w, b);
    CHECK(y.dtype() == DType::f64);
    check_values(y, to_host(composite(to_f64(x), to_f64(w), to_f64(b))), tolerance(DType::f64), "promoted");
    const Tensor xi = make_tensor({1, 2, 3, 4, 5, 6}, {2, 3}, DType::i64), wi = make_tensor({1, 0, -2}, {1, 3}, DType::i64);
    check_values(linear(xi, wi, make_tensor({10}, {1}, DType::i64)), Host{{2, 1}, {5, 2}}, tolerance(DType::i64),
                 "integers");
  }

  TEST_CASE("linear: argument errors name the shapes") {
    const Tensor x = ones({3, 4});
    expect_error<ShapeError>("3-D weight", [&] { (void)linear(x, ones({2, 2, 4})); },
                             {"linear", "(3, 4)", "weight (2, 2, 4)", "2-D"});
    expect_error<ShapeError>("in_features", [&] { (void)linear(x, ones({2, 5})); },
                             {"linear", "(3, 4)", "(2, 5)", "in_features=5"});
    expect_error<ShapeError>("bias length", [&] { (void)linear(x, ones({2, 4}), ones({3})); },
                             {"linear", "bias (3,)", "out_features=2"});
    expect_error<ShapeError>("0-dim input", [&] { (void)linear(ones({}), ones({2, 4})); }, {"linear", "()"});
    expect_error<DTypeError>("bool", [&] { (void)linear(x.to(DType::boolean), ones({2, 4}).to(DType::boolean)); },
                             {"linear", "bool"});
  }

  TEST_CASE("nn::Linear runs the linear primitive and matches the composite") {
    nn::Linear layer(6, 3);
    const Tensor x = uniform({2, 4, 6}, DType::f32).requires_grad_(true);
    const Tensor y = layer(x);
    REQUIRE(y.grad_fn());
    CHECK(std::string(y.grad_fn()->name()) == "linear");
    NoGradGuard no_grad;
    check_values(y, to_host(composite(x, layer.weight, layer.bias)), tolerance(DType::f32), "y");
  }

  TEST_CASE("the matmul TF32 switch: off by default, set and read in every build") {
    const MatmulSwitchGuard restore;
    CHECK_FALSE(cuda::matmul_allow_tf32());
    cuda::set_matmul_allow_tf32(true);
    CHECK(cuda::matmul_allow_tf32());
    cuda::set_matmul_allow_tf32(false);
    CHECK_FALSE(cuda::matmul_allow_tf32());
    const size_t plans = cuda::matmul_plan_cache_size();
    (void)matmul(ones({3, 4}), ones({4, 5}));
    CHECK(cuda::matmul_plan_cache_size() == plans);  // the CPU makes no cuBLASLt plans
  }
}

// ---- CUDA: cuBLASLt against the CPU

namespace {

// Tolerance of a GPU GEMM result of dtype d against the f64 product of the same values: the
// dtype's own (f32 must match tightly with TF32 off), or TF32's 10-bit mantissa when it is on.
Tol gemm_tolerance(DType d, bool tf32) { return tf32 && d == DType::f32 ? Tol{1e-2, 1e-2} : tolerance(d); }

struct MatmulCase {
  std::string what;
  Tensor a, b;
};

// Operands in dtype d on `device`, in the layouts named.
std::vector<MatmulCase> matmul_cases(DType d, Device device) {
  auto u = [&](const Shape& s) { return uniform(s, d, device); };
  std::vector<MatmulCase> v;
  v.push_back({"17x33 @ 33x65", u({17, 33}), u({33, 65})});
  v.push_back({"transposed a and b", u({33, 17}).t(), u({65, 33}).t()});
  v.push_back({"a starting at element 1", offset_by_one(u({17, 33})), u({33, 65})});
  v.push_back({"b starting at element 1, transposed", u({17, 33}), offset_by_one(u({65, 33})).t()});
  v.push_back({"batched (3, 17, 33) @ (3, 33, 65)", u({3, 17, 33}), u({3, 33, 65})});
  v.push_back({"broadcast batch (2, 1, 5, 9) @ (3, 9, 7)", u({2, 1, 5, 9}), u({3, 9, 7})});
  v.push_back({"expanded b (1, 9, 7) -> (4, 9, 7), transposed a", u({4, 9, 5}).transpose(1, 2),
               u({1, 9, 7}).expand({4, 9, 7})});
  v.push_back({"batch times matrix (4, 5, 9) @ (9, 7)", u({4, 5, 9}), u({9, 7})});
  v.push_back({"every other row of a", slice(u({34, 33}), 0, 0, 34, 2), u({33, 65})});
  v.push_back({"vector @ matrix", u({33}), u({33, 65})});
  v.push_back({"empty inner dim", u({3, 0}), u({0, 4})});
  return v;
}

void check_matmuls(bool tf32) {
  const MatmulSwitchGuard restore;
  cuda::set_matmul_allow_tf32(tf32);
  for (DType d : kFloats)
    for (const MatmulCase& c : matmul_cases(d, kCuda)) {
      INFO(c.what, " ", name(d), tf32 ? " TF32" : "");
      const Tensor got = matmul(c.a, c.b);
      CHECK(got.device() == kCuda);
      check_values(got.to(kCPU), to_host(matmul(to_f64(c.a), to_f64(c.b))), gemm_tolerance(d, tf32), "matmul");
    }
}

}  // namespace

EMBER_CUDA_TEST_CASE("cuda matmul through cuBLASLt matches the f64 product, TF32 off") { check_matmuls(false); }

EMBER_CUDA_TEST_CASE("cuda matmul through cuBLASLt matches the f64 product, TF32 on (loose)") { check_matmuls(true); }

EMBER_CUDA_TEST_CASE("cuda linear: bias epilogue and gradients match the CPU") {
  for (DType d : kFloats) {
    std::vector<LinearCase> cases = linear_cases(d, kCuda);
    auto u = [&](const Shape& s) { return uniform(s, d, kCuda); };
    cases.push_back({"17x33 @ (65x33)^T, bias", u({17, 33}), u({65, 33}), u({65})});
    cases.push_back({"x and bias starting at element 1", offset_by_one(u({17, 33})), u({65, 33}), offset_by_one(u({65}))});
    for (const LinearCase& c : cases) {
      INFO(c.what, " ", name(d));
      Shape y_shape = c.x.shape();
      y_shape[y_shape.size() - 1] = c.w.shape()[0];
      const Tensor g = uniform(y_shape, d, kCuda);
      const std::vector<Tensor> got = value_and_grads(c, g, [](auto x, auto w, auto b) { return linear(x, w, b); });
      const LinearCase in_f64{c.what, to_f64(c.x), to_f64(c.w), to_f64(c.b)};
      const std::vector<Tensor> want = value_and_grads(in_f64, to_f64(g), composite);
      // The gradients sum over the rows too: at most this many products each.
      const int64_t terms = std::max({c.w.shape()[1], c.w.shape()[0], c.x.numel() / std::max<int64_t>(c.w.shape()[1], 1)});
      Tol tol = tolerance(d);
      if (d != DType::f32 && d != DType::f64) tol.atol *= static_cast<double>(terms);
      const char* what[] = {"y", "x.grad", "w.grad", "b.grad"};
      for (size_t i = 0; i < want.size(); ++i) {
        if (!want[i].defined()) continue;
        CHECK(got[i].device() == kCuda);
        check_values(got[i].to(kCPU), to_host(want[i]), i == 0 ? tolerance(d) : tol, what[i]);
      }
    }
  }
}

EMBER_CUDA_TEST_CASE("cuda cuBLASLt plan cache: one plan per distinct problem, reused on repeats") {
  const MatmulSwitchGuard restore;
  cuda::set_matmul_allow_tf32(false);
  // Sizes no other test uses, so each problem is new to the cache.
  const Tensor a = uniform({19, 23}, DType::f32, kCuda), b = uniform({23, 29}, DType::f32, kCuda);
  const size_t start = cuda::matmul_plan_cache_size();
  (void)matmul(a, b);
  CHECK(cuda::matmul_plan_cache_size() == start + 1);
  for (int i = 0; i < 3; ++i) (void)matmul(a, b);  // the same problem: no new plan
  (void)matmul(uniform({19, 23}, DType::f32, kCuda), uniform({23, 29}, DType::f32, kCuda));  // new buffers, same key
  CHECK(cuda::matmul_plan_cache_size() == start + 1);
  (void)matmul(a, b.t().contiguous().t());  // b transposed: another layout
  CHECK(cuda::matmul_plan_cache_size() == start + 2);
  (void)matmul(a.to(DType::bf16), b.to(DType::bf16));  // another dtype
  CHECK(cuda::matmul_plan_cache_size() == start + 3);
  (void)matmul(offset_by_one(a), b);  // a only 4-byte aligned
  CHECK(cuda::matmul_plan_cache_size() == start + 4);
  cuda::set_matmul_allow_tf32(true);  // another compute type
  (void)matmul(a, b);
  CHECK(cuda::matmul_plan_cache_size() == start + 5);
  cuda::set_matmul_allow_tf32(false);
  (void)linear(a, b.t(), uniform({29}, DType::f32, kCuda));  // the bias epilogue
  const size_t with_bias = cuda::matmul_plan_cache_size();
  CHECK(with_bias == start + 6);
  (void)linear(a, b.t(), uniform({29}, DType::f32, kCuda));
  CHECK(cuda::matmul_plan_cache_size() == with_bias);
}
