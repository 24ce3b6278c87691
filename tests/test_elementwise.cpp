// The elementwise kernels on the layouts they branch on: lengths around the 16-byte vector step and
// its tail, views that start one element in (misaligned), broadcast scalars and strided views, in
// every float dtype and across dtypes. Each output is poisoned first (NaN, or 77 for integers) inside
// a buffer with poisoned guards around it, so an element left unwritten, or one written past the
// output, fails. The same cases run on the CPU and, in the cuda suite, on the GPU.
#include <cmath>
#include <string>
#include <vector>

#include "tensor/layout.h"
#include "tensor/primitives/elementwise.h"
#include "tests/helpers.h"

using namespace ember;
using namespace ember_test;

namespace {

const Device kCuda{DeviceType::cuda, 0};

// Around the GPU's vector step (16 bytes: 2 to 16 elements) and its tail, and a length that gives
// every thread of the capped grid several steps; on the CPU, one that splits across its threads
// (cpu/parallel.h's grain is 131072).
std::vector<int64_t> lengths(Device device) {
  if (device.is_cuda()) return {1, 3, 4097, (int64_t{1} << 20) + 5, (int64_t{1} << 23) + 3};
  return {1, 3, 4097, (int64_t{1} << 18) + 3};
}

enum class Layout { contiguous, offset, scalar, strided };
std::string layout_name(Layout l) {
  switch (l) {
    case Layout::contiguous: return "contiguous";
    case Layout::offset: return "from element 1";
    case Layout::scalar: return "0-dim scalar";
    case Layout::strided: return "every other element";
  }
  return "";
}

// n values that every dtype holds exactly (eighths in [0, 12]; whole numbers for integers), so
// sums, products and conversions have one right answer.
std::vector<double> pattern(int64_t n, DType d, uint64_t seed) {
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const double x = static_cast<double>((i * 37 + static_cast<int64_t>(seed) * 11) % 97) / 8.0;
    v[static_cast<size_t>(i)] = is_floating(d) ? x : std::floor(x);
  }
  return v;
}

// An input of n elements (as the op sees them after broadcasting) and its values.
struct Input {
  Tensor t;
  std::vector<double> v;
};
Input input(int64_t n, DType d, Device device, Layout l, uint64_t seed) {
  switch (l) {
    case Layout::contiguous: return {make_tensor(pattern(n, d, seed), {n}, d, device), pattern(n, d, seed)};
    case Layout::offset: {
      std::vector<double> v = pattern(n + 1, d, seed);
      const Tensor t = make_tensor(v, {n + 1}, d, device).narrow(0, 1, n);
      v.erase(v.begin());
      return {t, v};
    }
    case Layout::scalar: {
      const double x = pattern(1, d, seed)[0] + 1;
      return {make_tensor({x}, {}, d, device), std::vector<double>(static_cast<size_t>(n), x)};
    }
    case Layout::strided: {
      const std::vector<double> all = pattern(2 * n, d, seed);
      std::vector<double> v(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = all[static_cast<size_t>(2 * i)];
      return {slice(make_tensor(all, {2 * n}, d, device), 0, 0, 2 * n, 2), v};
    }
  }
  return {};
}

double poison(DType d) { return is_floating(d) ? std::nan("") : 77; }
bool is_poison(double x, DType d) { return is_floating(d) ? std::isnan(x) : x == 77; }

// An output of n elements, poisoned, in a buffer of n + 2 with guards on both sides: it starts at
// element 1 (misaligned for the vector path) or at element 0 (aligned, two guards after).
struct Output {
  Tensor buffer, out;
  int64_t start = 0;
};
Output output(int64_t n, DType d, Device device, bool misaligned) {
  const Tensor buffer = full({n + 2}, poison(d), TensorOptions(d).with_device(device));
  const int64_t start = misaligned ? 1 : 0;
  return {buffer, buffer.narrow(0, start, n), start};
}

// The values rounded to dtype d, as the CPU's conversion stores them.
std::vector<double> stored(const std::vector<double>& v, DType d) {
  return values(from_vector(v, {static_cast<int64_t>(v.size())}).to(d));
}

// The output holds `want` (already rounded to its dtype) exactly, and the guards are untouched.
void check_output(const Output& o, const std::vector<double>& want, const std::string& what) {
  const DType d = o.out.dtype();
  const std::vector<double> all = values(o.buffer);
  const int64_t n = o.out.numel();
  for (int64_t i = 0; i < n + 2; ++i) {
    const double got = all[static_cast<size_t>(i)];
    if (i < o.start || i >= o.start + n) {
      if (is_poison(got, d)) continue;
      FAIL_CHECK(what, ": element ", i, " of the buffer, outside the output, was written (", got, ")");
      return;
    }
    const double expected = want[static_cast<size_t>(i - o.start)];
    if (got == expected) continue;
    FAIL_CHECK(what, ": element ", i - o.start, " is ", got, ", expected ", expected);
    return;
  }
  CHECK(true);
}

template <class P>
void eval(P& prim, Device device, const std::vector<Tensor>& in, const Tensor& out) {
  std::vector<Tensor> outs = {out};
  detail::dispatch(prim, device, in, outs);
}

// add and mul: the sums and products of the patterns are exact in every float dtype's compute type,
// so the double result rounded to the dtype is the one answer.
void check_add_mul(Device device) {
  const std::pair<Layout, Layout> pairs[] = {{Layout::contiguous, Layout::contiguous},
                                             {Layout::offset, Layout::contiguous},
                                             {Layout::contiguous, Layout::scalar},
                                             {Layout::scalar, Layout::offset},
                                             {Layout::strided, Layout::contiguous}};
  for (DType d : kFloats)
    for (int64_t n : lengths(device))
      for (auto [la, lb] : pairs) {
        const Input a = input(n, d, device, la, 1), b = input(n, d, device, lb, 2);
        std::vector<double> sum(a.v.size()), product(a.v.size());
        for (size_t i = 0; i < a.v.size(); ++i) {
          sum[i] = a.v[i] + b.v[i];
          product[i] = a.v[i] * b.v[i];
        }
        const std::string what = name(d) + " n=" + std::to_string(n) + ", " + layout_name(la) + " and " + layout_name(lb);
        Binary<ew::Add> add_op;
        Output o = output(n, d, device, false);
        eval(add_op, device, {a.t, b.t}, o.out);
        check_output(o, stored(sum, d), "add " + what);
        Binary<ew::Mul> mul_op;
        o = output(n, d, device, false);
        eval(mul_op, device, {a.t, b.t}, o.out);
        check_output(o, stored(product, d), "mul " + what);
      }
}

// Cast between dtypes of every width (2 to 16 elements a step, so that the widest moves 16 bytes).
void check_cast(Device device) {
  const std::vector<DType> dtypes = {DType::f32, DType::f16, DType::bf16, DType::f64, DType::i32, DType::u8};
  for (DType from : dtypes)
    for (DType to : dtypes)
      for (int64_t n : lengths(device))
        for (Layout l : {Layout::contiguous, Layout::offset, Layout::strided}) {
          const Input x = input(n, from, device, l, 3);
          Cast cast(to);
          const Output o = output(n, to, device, false);
          eval(cast, device, {x.t}, o.out);
          check_output(o, stored(x.v, to),
                       "cast " + name(from) + " to " + name(to) + " n=" + std::to_string(n) + ", " + layout_name(l));
        }
}

// copy_ into an aligned or misaligned view, from a source of another dtype or a broadcast scalar.
void check_copy(Device device) {
  for (DType to : kFloats)
    for (DType from : {DType::f32, DType::bf16, DType::f64})
      for (int64_t n : lengths(device))
        for (bool misaligned : {false, true})
          for (Layout l : {Layout::contiguous, Layout::offset, Layout::scalar}) {
            const Input src = input(n, from, device, l, 4);
            const Output o = output(n, to, device, misaligned);
            CopyInto copy;
            eval(copy, device, {o.out, src.t}, o.out);
            check_output(o, stored(src.v, to),
                         "copy_ " + name(from) + " into " + name(to) + " n=" + std::to_string(n) + ", " +
                             (misaligned ? "output from element 1, " : "") + layout_name(l));
          }
}

// where: a bool operand beside wider ones.
void check_where(Device device) {
  for (DType d : kFloats)
    for (int64_t n : lengths(device))
      for (Layout lc : {Layout::contiguous, Layout::offset}) {
        std::vector<double> flags(static_cast<size_t>(n + 1));
        for (size_t i = 0; i < flags.size(); ++i) flags[i] = (i * 7) % 3 == 0;
        Tensor condition = make_tensor(flags, {n + 1}, DType::boolean, device);
        condition = lc == Layout::offset ? condition.narrow(0, 1, n) : condition.narrow(0, 0, n);
        const size_t first = lc == Layout::offset ? 1 : 0;
        const Input a = input(n, d, device, Layout::contiguous, 5), b = input(n, d, device, Layout::scalar, 6);
        std::vector<double> want(a.v.size());
        for (size_t i = 0; i < want.size(); ++i) want[i] = flags[first + i] != 0 ? a.v[i] : b.v[i];
        Where where_op;
        const Output o = output(n, d, device, false);
        eval(where_op, device, {condition, a.t, b.t}, o.out);
        check_output(o, stored(want, d), "where " + name(d) + " n=" + std::to_string(n) + ", condition " + layout_name(lc));
      }
}

// Memory formats: an elementwise result takes the dim order of its first dense input of the result's
// shape, with the values of the same op on contiguous operands; to(dtype) keeps the order, clone() and
// contiguous() do not. Channels-last operands must come out channels-last, or a network fed NHWC
// falls back to NCHW after its first ReLU.
void check_memory_formats(Device device) {
  const Tensor nchw = make_tensor(random_values(2 * 3 * 4 * 5, DType::f32, -2, 2, true, 7), {2, 3, 4, 5}, DType::f32, device);
  const Tensor x = to_channels_last(nchw);
  REQUIRE(is_channels_last(x));
  REQUIRE(is_non_overlapping_and_dense(x));
  CHECK(values(x) == values(nchw));
  const Tensor bias = make_tensor({1, -1, 0.5}, {1, 3, 1, 1}, DType::f32, device);
  const std::pair<const char*, std::pair<Tensor, Tensor>> results[] = {
      {"relu", {relu(x), relu(nchw)}},
      {"x + x", {x + x, nchw + nchw}},
      {"x * 2", {x * 2.0, nchw * 2.0}},
      {"bias + x (bias broadcast)", {bias + x, bias + nchw}},
      {"where(x > 0, x, 0)", {where(gt(x, 0.0), x, zeros_like(x)), where(gt(nchw, 0.0), nchw, zeros_like(nchw))}},
      {"x.to(bf16)", {x.to(DType::bf16), nchw.to(DType::bf16)}},
      {"exp(x.to(f16))", {exp(x.to(DType::f16)), exp(nchw.to(DType::f16))}},
  };
  for (const auto& [what, pair] : results) {
    CAPTURE(what);
    CHECK(is_channels_last(pair.first));
    CHECK(values(pair.first) == values(pair.second));
  }
  CHECK(clone(x).is_contiguous());
  CHECK(contiguous(x).is_contiguous());
  CHECK((nchw + x).is_contiguous());  // the first operand decides
  // A transposed matrix is dense too: the result keeps its strides.
  const Tensor t = make_tensor(random_values(15, DType::f32, -1, 1, false, 8), {3, 5}, DType::f32, device).transpose(0, 1);
  const Tensor e = exp(t);
  CHECK(e.strides() == t.strides());
  CHECK(values(e) == values(exp(contiguous(t))));
  // Views that are not dense give row-major results.
  const Tensor expanded = make_tensor({1, 2, 3}, {3, 1}, DType::f32, device).expand({3, 4});
  CHECK_FALSE(is_non_overlapping_and_dense(expanded));
  CHECK(neg(expanded).is_contiguous());
  const Tensor every_other = make_tensor(random_values(8, DType::f32, -1, 1, false, 9), {8}, DType::f32, device)
                                 .narrow(0, 0, 8).reshape({4, 2}).narrow(1, 0, 1);
  CHECK_FALSE(is_non_overlapping_and_dense(every_other));
  CHECK(abs(every_other).is_contiguous());
}

}  // namespace

TEST_SUITE("cpu") {
TEST_CASE("elementwise memory formats: channels-last and transposed operands keep their order") {
  check_memory_formats(kCPU);
}
TEST_CASE("to_channels_last refuses a tensor that is not 4-D") {
  expect_error<ShapeError>("3-D", [] { (void)to_channels_last(zeros({2, 3, 4})); }, {"to_channels_last", "(2, 3, 4)"});
}
TEST_CASE("elementwise layouts: add and mul") { check_add_mul(kCPU); }
TEST_CASE("elementwise layouts: cast between dtypes") { check_cast(kCPU); }
TEST_CASE("elementwise layouts: copy_ into views") { check_copy(kCPU); }
TEST_CASE("elementwise layouts: where") { check_where(kCPU); }

TEST_CASE("in place: an expanded self is refused; an input sharing self's memory is read whole first") {
  // Each result would land on the other elements sharing the memory: 1 * 2 * 2 * 2 = 8 everywhere.
  Tensor expanded = ones({1}).expand({3});
  expect_error<ValueError>("mul_ into an expansion", [&] { expanded.mul_(2); }, {"mul_", "(3,)", "share memory"});
  expect_error<ValueError>("copy_ into an expansion", [&] { expanded.copy_(arange(3.0)); }, {"share memory"});
  expanded.fill_(5);  // one value everywhere: allowed, as in PyTorch
  CHECK(values(expanded) == std::vector<double>{5, 5, 5});
  // A transposed self as the input: each element must see the other's old value.
  Tensor square = arange(4.0).reshape({2, 2});
  square.add_(square.t());
  CHECK(values(square) == std::vector<double>{0, 3, 3, 6});
  // A shifted copy (t[1:] = t[:-1]) spreads element 0 without the copy: 0 0 0 0 0.
  Tensor line = arange(5.0);
  line.narrow(0, 1, 4).copy_(line.narrow(0, 0, 4));
  CHECK(values(line) == std::vector<double>{0, 0, 1, 2, 3});
  // A row of self broadcast over self: row 1 adds row 0's old values.
  Tensor rows = arange(6.0).reshape({2, 3});
  rows.add_(rows.narrow(0, 0, 1).expand({2, 3}));
  CHECK(values(rows) == std::vector<double>{0, 2, 4, 3, 5, 7});
  // The very same view needs no copy: x += x.
  Tensor same = arange(3.0);
  same.add_(same);
  CHECK(values(same) == std::vector<double>{0, 2, 4});
}

TEST_CASE("integer dtypes refuse numbers outside their range; integer powers refuse negative exponents") {
  expect_error<ValueError>("full", [] { full({2}, 300, TensorOptions(DType::u8)); }, {"full", "300", "uint8"});
  CHECK(values(full({1}, -1, TensorOptions(DType::u8))) == std::vector<double>{255});  // PyTorch wraps -128..-1
  Tensor ints = zeros({2}, TensorOptions(DType::i32));
  expect_error<ValueError>("fill_", [&] { ints.fill_(int64_t{1} << 40); }, {"fill_", "int32"});
  expect_error<ValueError>("fill_ NaN", [&] { ints.fill_(std::nan("")); }, {"nan", "int32"});
  expect_error<ValueError>("masked_fill", [&] { masked_fill(ints, ones({2}, TensorOptions(DType::boolean)), 1e12); },
                           {"masked_fill"});
  expect_error<ValueError>("randint", [] { randint(0, 1000, {2}, TensorOptions(DType::u8)); }, {"randint", "999"});
  CHECK(randint(0, 256, {8}, TensorOptions(DType::u8)).dtype() == DType::u8);
  const Tensor base = from_vector<int64_t>({2, 3}, {2});
  expect_error<ValueError>("pow", [&] { pow(base, from_vector<int64_t>({1, -1}, {2})); }, {"negative"});
  CHECK(values(pow(base, from_vector<int64_t>({3, 0}, {2}))) == std::vector<double>{8, 1});
  CHECK(values(pow(base, from_vector<double>({-1, 0}, {2}))) == std::vector<double>{0.5, 1});  // a float result
  // A dtype given to sum is the result's (integers otherwise sum into int64): 300 ones wrap to 44 in uint8.
  const Tensor many = ones({300}, TensorOptions(DType::u8));
  CHECK(sum(many, {}, false, DType::u8).dtype() == DType::u8);
  CHECK(sum(many, {}, false, DType::u8).item<int64_t>() == 44);
  CHECK(sum(many).dtype() == DType::i64);
  CHECK(sum(many, {}, false, DType::boolean).item<bool>());
}
}  // TEST_SUITE("cpu")

EMBER_CUDA_TEST_CASE("cuda elementwise layouts: add and mul, vector path and tails") { check_add_mul(kCuda); }
EMBER_CUDA_TEST_CASE("cuda elementwise layouts: cast between dtypes of every width") { check_cast(kCuda); }
EMBER_CUDA_TEST_CASE("cuda elementwise layouts: copy_ into aligned and misaligned views") { check_copy(kCuda); }
EMBER_CUDA_TEST_CASE("cuda elementwise layouts: where with a bool operand") { check_where(kCuda); }
EMBER_CUDA_TEST_CASE("cuda elementwise memory formats: channels-last and transposed operands keep their order") {
  check_memory_formats(kCuda);
}
