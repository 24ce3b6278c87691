// The deterministic mode (tensor/deterministic.h): ember's GEMM against the ordered sum it promises,
// on every instruction set of this CPU; GEMM, reductions and the kernels that split sums across
// threads, bit for bit at 1 and 2 threads; the transcendentals; the switch, its error and the
// default mode beside it. The whole training program under other thread counts and CPU kernels is
// in test_train.cpp.
#include <bit>
#include <cstring>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "cpu/gemm.h"
#include "cpu/simd_math.h"
#include "nn/nn.h"
#include "optim/clip_grad.h"
#include "tensor/cuda_settings.h"
#include "tensor/math.h"
#include "tests/helpers.h"

using namespace ember;
using namespace ember_test;

namespace {

bool bit_equal(const Tensor& a, const Tensor& b) {
  if (!(a.shape() == b.shape()) || a.dtype() != b.dtype()) return false;
  const Tensor x = a.contiguous(), y = b.contiguous();
  return std::memcmp(x.raw_data(), y.raw_data(), static_cast<size_t>(x.numel()) * dtype_size(x.dtype())) == 0;
}

// f() run at 1 and at 2 threads gives the same tensors, bit for bit.
void check_same_at_1_and_2_threads(const std::string& what, const std::function<std::vector<Tensor>()>& f) {
  INFO(what);
  set_num_threads(1);
  const std::vector<Tensor> one = f();
  set_num_threads(2);
  const std::vector<Tensor> two = f();
  REQUIRE(one.size() == two.size());
  for (size_t i = 0; i < one.size(); ++i) CHECK_MESSAGE(bit_equal(one[i], two[i]), "result ", i);
}

// A row-major rows x cols matrix of values in [-1, 1], stored transposed (cols x rows) when asked.
template <class T>
std::vector<T> matrix_values(int64_t rows, int64_t cols, uint64_t seed) {
  const std::vector<double> v = random_values(rows * cols, DType::f64, -1, 1, false, seed);
  return std::vector<T>(v.begin(), v.end());
}

template <class T>
T element(const std::vector<T>& x, bool transposed, int64_t rows, int64_t cols, int64_t i, int64_t j) {
  return transposed ? x[static_cast<size_t>(j * rows + i)] : x[static_cast<size_t>(i * cols + j)];
}

// deterministic_gemm on every instruction set this CPU runs, at 1 and 2 threads, against the sum it
// promises (each element: 0 or C, then + a*b for k = 0, 1, ..., one rounding per operation: the
// tests are built with -ffp-contract=off) and against the f64 product.
template <class T>
void check_deterministic_gemm(int64_t m, int64_t n, int64_t k, bool ta, bool tb, T beta) {
  INFO("m ", m, ", n ", n, ", k ", k, std::string(ta ? ", A transposed" : ""), std::string(tb ? ", B transposed" : ""),
       ", beta ", beta, std::string(sizeof(T) == 4 ? ", f32" : ", f64"));
  const std::vector<T> a = matrix_values<T>(m, k, 1), b = matrix_values<T>(k, n, 2), c0 = matrix_values<T>(m, n, 3);
  std::vector<T> ordered(c0.size());
  std::vector<double> exact(c0.size());
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      T acc = beta != T(0) ? c0[static_cast<size_t>(i * n + j)] : T(0);
      double wide = static_cast<double>(acc);
      for (int64_t p = 0; p < k; ++p) {
        const T x = element(a, ta, m, k, i, p), y = element(b, tb, k, n, p, j);
        acc = acc + x * y;
        wide += static_cast<double>(x) * static_cast<double>(y);
      }
      ordered[static_cast<size_t>(i * n + j)] = acc;
      exact[static_cast<size_t>(i * n + j)] = wide;
    }
  const double tol = (sizeof(T) == 4 ? 1e-6 : 1e-15) * static_cast<double>(k + 1);
  const DeterministicScope scope;
  for (int isa = 0; isa <= static_cast<int>(cpu::best_gemm_isa()); ++isa)
    for (int threads : {1, 2}) {
      INFO("instruction set ", isa, ", ", threads, " threads");
      set_num_threads(threads);
      std::vector<T> c = c0;
      cpu::deterministic_gemm<T>(m, n, k, {a.data(), ta, ta ? m : k}, {b.data(), tb, tb ? k : n}, beta,
                                 {c.data(), false, n}, static_cast<cpu::GemmIsa>(isa));
      CHECK(std::memcmp(c.data(), ordered.data(), c.size() * sizeof(T)) == 0);
      double worst = 0;
      for (size_t e = 0; e < c.size(); ++e) worst = std::max(worst, std::abs(static_cast<double>(c[e]) - exact[e]));
      CHECK(worst <= tol);
    }
}

}  // namespace

TEST_SUITE("cpu") {

TEST_CASE("deterministic_gemm: the ordered sum, bit for bit, on every instruction set and thread count") {
  // Edges of the register tiles (6 rows, 8 to 64 columns), several k blocks (192), every layout.
  for (const auto& [m, n, k] : std::vector<std::tuple<int64_t, int64_t, int64_t>>{
           {1, 1, 1}, {7, 13, 5}, {6, 64, 192}, {37, 129, 200}, {200, 530, 400}, {3, 1000, 17}})
    for (bool ta : {false, true})
      for (bool tb : {false, true}) {
        check_deterministic_gemm<float>(m, n, k, ta, tb, 0.0f);
        check_deterministic_gemm<double>(m, n, k, ta, tb, 1.0);
      }
  check_deterministic_gemm<float>(64, 100, 300, false, false, 1.0f);
}

TEST_CASE("deterministic_gemm: k = 0 leaves beta * C; an instruction set the CPU lacks or a column-major C raises") {
  std::vector<float> a(4, 1.0f), b(4, 1.0f), c(4, 5.0f);
  cpu::deterministic_gemm<float>(2, 2, 0, {a.data(), false, 1}, {b.data(), false, 2}, 1.0f, {c.data(), false, 2},
                                 cpu::GemmIsa::sse2);
  CHECK(c == std::vector<float>(4, 5.0f));
  cpu::deterministic_gemm<float>(2, 2, 0, {a.data(), false, 1}, {b.data(), false, 2}, 0.0f, {c.data(), false, 2},
                                 cpu::GemmIsa::sse2);
  CHECK(c == std::vector<float>(4, 0.0f));
  expect_error<ValueError>("column-major C", [&] {
    cpu::deterministic_gemm<float>(2, 2, 2, {a.data(), false, 2}, {b.data(), false, 2}, 0.0f, {c.data(), true, 2},
                                   cpu::GemmIsa::sse2);
  }, {"row-major"});
  if (cpu::best_gemm_isa() != cpu::GemmIsa::avx512)
    expect_error<ValueError>("avx512 on a CPU without it", [&] {
      cpu::deterministic_gemm<float>(2, 2, 2, {a.data(), false, 2}, {b.data(), false, 2}, 0.0f, {c.data(), false, 2},
                                     cpu::GemmIsa::avx512);
    }, {"cannot run"});
}

TEST_CASE("deterministic mode: matmul, linear and conv2d go through ember's GEMM, the same bits at 1 and 2 threads") {
  const DeterministicScope scope;
  CHECK(cpu_gemm_name().starts_with("ember deterministic ("));
  const Tensor a = randn({300, 257}), b = randn({257, 190}), batched = randn({4, 33, 257}), lb = randn({190});
  const Tensor x = randn({8, 3, 20, 20}), w = randn({16, 3, 3, 3}), bias = randn({16});
  check_same_at_1_and_2_threads("matmul, bmm, linear", [&] {
    return std::vector<Tensor>{matmul(a, b), matmul(batched, b), linear(a, b.transpose(0, 1), lb)};
  });
  check_same_at_1_and_2_threads("conv2d forward and both backward halves", [&] {
    Tensor xg = x.detach().requires_grad_(true), wg = w.detach().requires_grad_(true);
    Tensor y = conv2d(xg, wg, bias, {1, 1}, {1, 1});
    (y * y).sum().backward();
    return std::vector<Tensor>{y, xg.grad(), wg.grad()};
  });
  // The same products as the f64 ones, within f32's rounding.
  check_values(matmul(a, b), to_host(matmul(a.to(DType::f64), b.to(DType::f64))), {1e-4, 1e-5}, "matmul vs f64");
}

TEST_CASE("reductions: the same bits at 1 and 2 threads, in the default mode too (pieces follow the shape)") {
  // f64 sums accumulate in f64, so a change of grouping would show in the last bits.
  const Tensor big = uniform_f64({1 << 21}, -1, 1, 5, false), cols = uniform_f64({4, 1 << 17, 3}, -1, 1, 6, false);
  for (bool deterministic : {false, true}) {
    const DeterministicScope scope(deterministic);
    check_same_at_1_and_2_threads(deterministic ? "deterministic mode" : "default mode", [&] {
      return std::vector<Tensor>{sum(big), mean(big), var(big), sum(cols, {1}), amax(cols, {1}), sum(cols, {0, 2}),
                                 log_softmax(big.view({1 << 10, 1 << 11}), 1), softmax(cols, 1)};
    });
  }
  check_values(sum(big), Host{{}, {sum(big.to(DType::f64)).item<double>()}}, tolerance(DType::f64), "sum");
}

TEST_CASE("deterministic mode: every kernel that sums across threads gives the same bits at 1 and 2 threads") {
  const DeterministicScope scope;
  const Tensor images = randn({16, 4, 24, 24}), tokens = randint(0, 50, {64, 40});
  const Tensor labels = randint(0, 10, {16});
  check_same_at_1_and_2_threads("a CNN step: conv, batch norm, pooling, cross entropy, clipping", [&] {
    manual_seed(3);
    Tensor w1 = (randn({8, 4, 3, 3}) * 0.3).requires_grad_(true);
    Tensor w2 = (randn({10, 8 * 6 * 6}) * 0.1).requires_grad_(true);
    Tensor h = conv2d(images, w1, Tensor(), {1, 1}, {1, 1});
    h = relu(batch_norm(h, Tensor(), Tensor(), Tensor(), Tensor(), true, 0.1, 1e-5));
    h = avg_pool2d(max_pool2d(h, {3, 3}, std::array<int64_t, 2>{2, 2}, {1, 1}), {2, 2});  // overlapping windows
    Tensor loss = cross_entropy(linear(h.flatten(1), w2), labels, "mean", -100, 0.1);
    loss.backward();
    const Tensor norm = optim::clip_grad_norm_({w1, w2}, 0.5);
    return std::vector<Tensor>{loss, w1.grad(), w2.grad(), norm};
  });
  // In f64, where sums grouped otherwise would show in the last bits (f32 results round them away).
  check_same_at_1_and_2_threads("a transformer piece in f64: embedding, layer norm, attention-like matmuls, gelu", [&] {
    manual_seed(4);
    Tensor table = randn({50, 96}, DType::f64).requires_grad_(true), g = randn({96}, DType::f64).requires_grad_(true);
    Tensor e = layer_norm(embedding(table, tokens), {96}, g, Tensor(), 1e-5);
    Tensor scores = softmax(matmul(e, e.transpose(1, 2)) * 0.1, -1);
    Tensor loss = mean(pow(gelu(matmul(scores, e)), 2));
    loss.backward();
    return std::vector<Tensor>{loss, table.grad(), g.grad()};
  });
}

// The default mode's are the vector kernels' (cpu/simd_math.h, whose own test bounds their errors) on
// a CPU that has them, else the C library's.
TEST_CASE("deterministic mode: transcendentals are SLEEF's, the default mode's the vector kernels' or the C library's") {
  struct Case {
    const char* name;
    Tensor (*op)(const Tensor&);
    float (*sleef)(float);
    float (*libm)(float);
    double lo, hi;
    cpu::simd::Kernels::Map cpu::simd::Kernels::*vector = nullptr;
  };
  const std::vector<Case> cases = {
      {"exp", [](const Tensor& t) { return exp(t); }, [](float v) { return math::deterministic::exp(v); },
       [](float v) { return std::exp(v); }, -20, 20, &cpu::simd::Kernels::exp},
      {"log", [](const Tensor& t) { return log(t); }, [](float v) { return math::deterministic::log(v); },
       [](float v) { return std::log(v); }, 1e-3, 100, &cpu::simd::Kernels::log},
      {"log1p", [](const Tensor& t) { return log1p(t); }, [](float v) { return math::deterministic::log1p(v); },
       [](float v) { return std::log1p(v); }, -0.9, 10, &cpu::simd::Kernels::log1p},
      {"sin", [](const Tensor& t) { return sin(t); }, [](float v) { return math::deterministic::sin(v); },
       [](float v) { return std::sin(v); }, -10, 10, &cpu::simd::Kernels::sin},
      {"cos", [](const Tensor& t) { return cos(t); }, [](float v) { return math::deterministic::cos(v); },
       [](float v) { return std::cos(v); }, -10, 10, &cpu::simd::Kernels::cos},
      {"tanh", [](const Tensor& t) { return tanh(t); }, [](float v) { return math::deterministic::tanh(v); },
       [](float v) { return std::tanh(v); }, -5, 5, &cpu::simd::Kernels::tanh},
      {"erf", [](const Tensor& t) { return erf(t); }, [](float v) { return math::deterministic::erf(v); },
       [](float v) { return std::erf(v); }, -3, 3, &cpu::simd::Kernels::erf},
      // An exponent exact in float: f32 pow rounds it to float, the f64 reference would not.
      {"pow", [](const Tensor& t) { return pow(t, 1.75); }, [](float v) { return math::deterministic::pow(v, 1.75f); },
       [](float v) { return std::pow(v, 1.75f); }, 1e-3, 50},
  };
  const cpu::simd::Kernels* vector = cpu::simd::active_kernels();
  for (const Case& c : cases) {
    INFO(std::string(c.name));
    const Tensor x = from_vector(random_values(4096, DType::f64, c.lo, c.hi, false, 9), {4096}).to(DType::f32);
    const std::vector<float> xs = x.to_vector<float>();
    const std::vector<double> exact = c.op(x.to(DType::f64)).to_vector<double>();
    std::vector<float> det, plain = c.op(x).to_vector<float>();
    {
      const DeterministicScope scope;
      det = c.op(x).to_vector<float>();
    }
    const bool vectorized = vector != nullptr && c.vector != nullptr;
    std::vector<float> fast(xs.size());
    if (vectorized) (vector->*c.vector)(xs.data(), fast.data(), static_cast<int64_t>(xs.size()));
    double worst_det = 0, worst_plain = 0;
    int64_t not_sleef = 0, not_libm = 0;
    for (size_t i = 0; i < xs.size(); ++i) {
      not_sleef += std::bit_cast<uint32_t>(det[i]) != std::bit_cast<uint32_t>(c.sleef(xs[i]));
      not_libm += std::bit_cast<uint32_t>(plain[i]) != std::bit_cast<uint32_t>(vectorized ? fast[i] : c.libm(xs[i]));
      const double ulp = std::abs(std::nextafter(static_cast<float>(exact[i]), 1e30f) - static_cast<float>(exact[i]));
      worst_det = std::max(worst_det, std::abs(det[i] - exact[i]) / ulp);
      worst_plain = std::max(worst_plain, std::abs(plain[i] - exact[i]) / ulp);
    }
    CHECK(not_sleef == 0);
    CHECK(not_libm == 0);
    CHECK(worst_det <= 1.5);    // SLEEF's u10 functions: within 1.0 ulp
    if (!vectorized) CHECK(worst_plain <= 2.5);  // glibc's libm-test-ulps allow up to 2 ulps (tanhf gave 1.8 here)
  }
  // f64 too: the deterministic mode's exp and log of doubles are SLEEF's.
  const Tensor d = uniform_f64({512}, 0.1, 5, 10, false);
  std::vector<double> e, l;
  {
    const DeterministicScope scope;
    e = exp(d).to_vector<double>();
    l = log(d).to_vector<double>();
  }
  const std::vector<double> ds = d.to_vector<double>();
  for (size_t i = 0; i < ds.size(); ++i) {
    CHECK(e[i] == math::deterministic::exp(ds[i]));
    CHECK(l[i] == math::deterministic::log(ds[i]));
  }
}

TEST_CASE("set_deterministic: the switch, the GEMM it picks, and the error of an op without a deterministic version") {
  CHECK_FALSE(is_deterministic());
  CHECK_FALSE(cpu_gemm_name().starts_with("ember"));
  alert_not_deterministic("scatter_reduce");  // off: nothing happens
  {
    const DeterministicScope scope;
    CHECK(is_deterministic());
    const std::string msg = message_of<NotDeterministicError>([] { alert_not_deterministic("scatter_reduce"); });
    CHECK(msg == "scatter_reduce does not have a deterministic implementation, but you set set_deterministic(true)");
    CHECK_THROWS_AS(alert_not_deterministic("x"), NotImplementedError);  // caught as its base too
  }
  CHECK_FALSE(is_deterministic());
  // Off again: the library GEMM, whose results agree with the deterministic kernel's to f32 rounding.
  const Tensor a = randn({129, 70}), b = randn({70, 65});
  const Tensor library = matmul(a, b);
  Tensor ordered;
  {
    const DeterministicScope scope;
    ordered = matmul(a, b);
  }
  check_values(library, to_host(ordered), {1e-5, 1e-5}, "library vs deterministic GEMM");
}

}  // TEST_SUITE

// ---- CUDA: deterministic algorithms only (a GPU machine runs these; elsewhere they are skipped)

EMBER_CUDA_TEST_CASE("cuda, deterministic mode: index_add and scatter_add add in order, the CPU's bits exactly") {
  const DeterministicScope scope;
  const Device gpu(DeviceType::cuda, 0);
  const Tensor self = randn({7, 33}), src = randn({4000, 33}), slots = randint(0, 7, {4000});
  const Tensor cpu_sum = index_add(self, 0, slots, src);
  const Tensor gpu_sum = index_add(self.to(gpu), 0, slots.to(gpu), src.to(gpu));
  CHECK(bit_equal(gpu_sum.to(kCPU), cpu_sum));  // both add src rows 0, 1, ... in order, in f32
  const Tensor index = randint(0, 5, {3, 900}), values = randn({3, 900});
  const Tensor cpu_scatter = scatter_add(zeros({3, 5}), 1, index, values);
  const Tensor gpu_zeros = zeros({3, 5}, TensorOptions().with_device(gpu));
  CHECK(bit_equal(scatter_add(gpu_zeros, 1, index.to(gpu), values.to(gpu)).to(kCPU), cpu_scatter));
}

EMBER_CUDA_TEST_CASE("cuda, deterministic mode: conv2d and linear repeat bit for bit; benchmark mode is ignored") {
  const DeterministicScope scope;
  cuda::set_benchmark(true);
  const Device gpu(DeviceType::cuda, 0);
  const Tensor x = randn({32, 16, 28, 28}).to(gpu), w = randn({32, 16, 3, 3}).to(gpu);
  const Tensor lw = randn({10, 32 * 14 * 14}).to(gpu);
  auto step = [&] {
    Tensor wg = w.detach().requires_grad_(true), lg = lw.detach().requires_grad_(true);
    Tensor h = max_pool2d(conv2d(x, wg, Tensor(), {1, 1}, {1, 1}), {3, 3}, std::array<int64_t, 2>{2, 2}, {1, 1});
    Tensor loss = mean(pow(linear(h.flatten(1), lg), 2));
    loss.backward();
    return std::vector<Tensor>{loss.to(kCPU), wg.grad().to(kCPU), lg.grad().to(kCPU)};
  };
  const std::vector<Tensor> first = step(), second = step();
  cuda::set_benchmark(false);
  for (size_t i = 0; i < first.size(); ++i) CHECK_MESSAGE(bit_equal(first[i], second[i]), "result ", i);
}
