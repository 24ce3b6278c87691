// sort, argsort and topk against std::stable_sort of each slice (every dtype, every dim, ties,
// NaN and signed zeros, non-contiguous input), their gradients (gradcheck), empty and 0-dim input,
// their errors, and on a GPU against the CPU.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "autograd/gradcheck.h"
#include "tensor/sort.h"
#include "tests/helpers.h"

using namespace ember;
using namespace ember_test;

namespace {

const Device kCuda{DeviceType::cuda, 0};

// Whether a sorts strictly before b ascending: NaN above every number, -0 equal to +0.
bool less_value(double a, double b) {
  if (std::isnan(a)) return false;
  if (std::isnan(b)) return true;
  return a < b;
}

// The reference: each slice along dim stably sorted (values and indices as doubles), first k kept.
std::pair<Host, Host> reference(const Tensor& x, int dim, int64_t k, bool descending) {
  const Host h = to_host(x);
  Shape out_shape = x.shape();
  out_shape[dim] = k;
  Host values{out_shape, std::vector<double>(numel(out_shape))}, indices = values;
  const int64_t n = x.size(dim);
  for (int64_t flat = 0; flat < values.numel(); flat += 1) {
    Shape at = unravel(flat, out_shape);
    if (at[dim] != 0) continue;  // once per slice
    std::vector<int64_t> order(n);
    std::iota(order.begin(), order.end(), 0);
    auto value = [&](int64_t i) {
      Shape idx = at;
      idx[dim] = i;
      return h.v[ravel(idx, x.shape())];
    };
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
      return descending ? less_value(value(b), value(a)) : less_value(value(a), value(b));
    });
    for (int64_t i = 0; i < k; ++i) {
      at[dim] = i;
      values.v[ravel(at, out_shape)] = value(order[i]);
      indices.v[ravel(at, out_shape)] = static_cast<double>(order[i]);
    }
  }
  return {values, indices};
}

// Values drawn from a few levels, so that rows hold ties.
Tensor with_ties(const Shape& shape, DType d, uint64_t seed, Device device = kCPU) {
  std::vector<double> v = random_values(numel(shape), DType::f64, -3, 3, true, seed);
  if (d == DType::u8) for (double& e : v) e = std::fabs(e);
  if (d == DType::boolean) for (double& e : v) e = e > 0;
  return make_tensor(v, shape, d, device);
}

void check(const ValuesIndices& got, const std::pair<Host, Host>& want, const std::string& what) {
  check_values(got.values, want.first, {0, 0}, what + " values");
  check_values(got.indices, want.second, {0, 0}, what + " indices");
  CHECK(got.indices.dtype() == DType::i64);
}

}  // namespace

TEST_CASE("sort: every dtype and dim, both orders, ties in index order (stable)") {
  uint64_t seed = 1;
  for (DType d : kAll) {
    const Tensor x = with_ties({4, 5, 6}, d, seed++);
    for (int dim = -3; dim < 3; ++dim) {
      const int wrapped = dim < 0 ? dim + 3 : dim;
      for (bool descending : {false, true}) {
        const std::string what = name(d) + " dim " + std::to_string(dim) + (descending ? " descending" : " ascending");
        const ValuesIndices s = sort(x, dim, descending);
        check(s, reference(x, wrapped, x.size(wrapped), descending), what);
        CHECK(s.values.dtype() == d);
        check_values(argsort(x, dim, descending), reference(x, wrapped, x.size(wrapped), descending).second, {0, 0},
                     what + " argsort");
      }
    }
  }
}

TEST_CASE("sort: NaN above every number, -0 equal to +0, non-contiguous input") {
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  for (DType d : kFloats) {
    const Tensor x = make_tensor({3, nan, -0.0, 0.0, -inf, inf, 1, nan}, {8}, d);
    const ValuesIndices up = sort(x);
    CHECK(values(up.indices) == std::vector<double>{4, 2, 3, 6, 0, 5, 1, 7});
    const ValuesIndices down = sort(x, 0, true);
    CHECK(values(down.indices) == std::vector<double>{1, 7, 5, 0, 6, 2, 3, 4});
    CHECK(std::isnan(values(down.values)[0]));
    CHECK(values(topk(x, 3).indices) == std::vector<double>{1, 7, 5});  // NaN counts as largest
    CHECK(values(topk(x, 2, 0, false).indices) == std::vector<double>{4, 2});
  }
  const Tensor base = with_ties({6, 5}, DType::f32, 99);
  const Tensor strided = base.t();  // (5, 6), not contiguous
  CHECK_FALSE(strided.is_contiguous());
  check(sort(strided, 1), reference(strided, 1, 6, false), "transposed");
  check(topk(strided, 2, 0), reference(strided, 0, 2, true), "transposed topk");
}

TEST_CASE("topk: the first k of a descending (or ascending) stable sort, for every k") {
  const Tensor x = with_ties({3, 7}, DType::f32, 5);
  for (int64_t k = 0; k <= 7; ++k)
    for (bool largest : {true, false}) {
      const std::string what = "k " + std::to_string(k) + (largest ? " largest" : " smallest");
      check(topk(x, k, 1, largest), reference(x, 1, k, largest), what);
      check(topk(x.t(), k, 0, largest), reference(x.t(), 0, k, largest), what + " along dim 0");
    }
}

TEST_CASE("topk: a small k (one pass over each row) agrees with the stable sort, ties and NaN included") {
  // Rows of 100: k up to 12 takes the CPU's one-pass selection, larger k the partial sort.
  const double nan = std::numeric_limits<double>::quiet_NaN();
  std::vector<double> v = random_values(400, DType::f64, -3, 3, true, 77);  // few levels: many ties
  v[5] = nan;
  v[150] = nan;
  v[151] = -0.0;
  for (DType d : {DType::f32, DType::i64, DType::bf16}) {
    std::vector<double> vd = v;
    if (!is_floating(d)) for (double& e : vd) e = std::isnan(e) ? 7 : e;
    const Tensor x = make_tensor(vd, {4, 100}, d);
    for (int64_t k : {1, 2, 5, 12, 13, 40})
      for (bool largest : {true, false})
        check(topk(x, k, 1, largest), reference(x, 1, k, largest),
              name(d) + " k " + std::to_string(k) + (largest ? " largest" : " smallest"));
  }
}

TEST_CASE("sort: empty and 0-dim tensors") {
  const ValuesIndices e = sort(zeros({0, 3}), 0);
  CHECK(e.values.shape() == Shape{0, 3});
  CHECK(topk(zeros({4, 0}), 0).indices.shape() == Shape{4, 0});
  const ValuesIndices s = sort(full({}, 2.5));
  CHECK(s.values.shape() == Shape{});
  CHECK(s.values.item<double>() == 2.5);
  CHECK(s.indices.item<int64_t>() == 0);
  CHECK(topk(full({}, 1.0), 1).values.item<double>() == 1.0);
}

TEST_CASE("sort: gradients reach the elements the values came from (gradcheck)") {
  // Distinct values: at a tie the order, and so the Jacobian, would jump under central differences.
  const Tensor x = uniform_f64({3, 4}, -1, 1, 17);
  CHECK(autograd::gradcheck([](const std::vector<Tensor>& in) { return sort(in[0], 1).values; }, {x}).entries > 0);
  CHECK(autograd::gradcheck([](const std::vector<Tensor>& in) { return topk(in[0], 2, 0, false).values; }, {x}).entries > 0);
  Tensor leaf = make_tensor({1, 5, 3, 4}, {4}, DType::f64).requires_grad_(true);
  topk(leaf, 2).values.sum().backward();
  CHECK(values(leaf.grad()) == std::vector<double>{0, 1, 0, 1});
}

TEST_CASE("sort: a dim or k out of range raises, naming it") {
  const Tensor x = zeros({2, 3});
  expect_error<IndexError>("dim", [&] { sort(x, 2); }, {"sort"});
  expect_error<IndexError>("k too large", [&] { topk(x, 4); }, {"topk", "k = 4", "size 3", "(2, 3)"});
  expect_error<IndexError>("k negative", [&] { topk(x, -1, 0); }, {"k = -1", "size 2"});
  expect_error<IndexError>("topk dim", [&] { topk(x, 1, -3); }, {"topk"});
}

EMBER_CUDA_TEST_CASE("sort: on a GPU as on the CPU, every dtype, NaN and ties") {
  uint64_t seed = 50;
  for (DType d : kAll) {
    const Tensor cpu = with_ties({3, 4, 33}, d, seed++);
    const Tensor gpu = cpu.to(kCuda);
    for (int dim = 0; dim < 3; ++dim)
      for (bool descending : {false, true}) {
        const std::string what = name(d) + " dim " + std::to_string(dim);
        const ValuesIndices got = sort(gpu, dim, descending);
        CHECK(got.indices.device() == kCuda);
        check({got.values.to(kCPU), got.indices.to(kCPU)}, reference(cpu, dim, cpu.size(dim), descending), what);
        const ValuesIndices top = topk(gpu, 3, dim, !descending);
        check({top.values.to(kCPU), top.indices.to(kCPU)}, reference(cpu, dim, 3, !descending), what + " topk");
      }
  }
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const Tensor special = make_tensor({3, nan, -0.0, 0.0, -1, nan}, {6}, DType::f32);
  CHECK(values(sort(special.to(kCuda)).indices.to(kCPU)) == values(sort(special).indices));
  CHECK(values(sort(special.to(kCuda), 0, true).indices.to(kCPU)) == values(sort(special, 0, true).indices));
}
