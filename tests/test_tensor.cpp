// Tensors themselves: dtypes and promotion, 16-bit float conversions, creation, host access,
// printing, the Philox generator, views and version counters, in-place ops, devices, pinned host
// memory and device-memory statistics.
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <set>
#include <sstream>

#include "data/dataloader.h"
#include "tensor/cuda_stream.h"
#include "tensor/host_sync.h"
#include "tests/helpers.h"

using namespace ember;
using namespace ember_test;

namespace {

Tensor t64(const std::vector<double>& v, const Shape& s) { return from_vector(v, s); }
Tensor t64(const std::vector<double>& v) { return from_vector(v, {static_cast<int64_t>(v.size())}); }
Tensor ints(const std::vector<int64_t>& v, DType d = DType::i64) {
  return from_vector(v, {static_cast<int64_t>(v.size())}).to(d);
}
Tensor zero_dim(Scalar v, DType d) { return scalar_tensor(v, d); }

float bits_to_float(uint32_t u) { return std::bit_cast<float>(u); }
uint16_t f16_bits(float f) { return f16(f).bits; }
uint16_t bf16_bits(float f) { return bf16(f).bits; }

const Device kCuda{DeviceType::cuda, 0};

// An error message holds every part.
void check_message(const std::string& msg, const std::vector<std::string>& parts) {
  for (const std::string& part : parts)
    CHECK_MESSAGE(msg.find(part) != std::string::npos, "message '", msg, "' lacks '", part, "'");
}

}  // namespace

TEST_SUITE("cpu") {

TEST_CASE("storage: borrowed memory is read and written in place and handed back once, after the last view") {
  std::vector<float> buffer = {1, 2, 3, 4, 5, 6};
  int released = 0;
  Tensor view;
  {
    auto storage = make_intrusive<Storage>(buffer.data(), buffer.size() * sizeof(float), kCPU, [&] { ++released; });
    CHECK(storage->is_borrowed());
    CHECK(storage->data() == buffer.data());
    CHECK_THROWS_AS(storage->release_memory(), ValueError);
    const Tensor t(make_intrusive<TensorImpl>(storage, 0, Shape{2, 3}, contiguous_strides({2, 3}), DType::f32));
    t.mul_(2.0);
    CHECK(buffer[5] == 12);
    buffer[0] = -1;
    CHECK(t.to_vector<double>()[0] == -1);
    view = t.transpose(0, 1).narrow(0, 1, 1);  // outlives t and storage's handle
  }
  CHECK(released == 0);
  CHECK(view.to_vector<double>() == std::vector<double>{4, 10});
  view = Tensor();
  CHECK(released == 1);
}

TEST_CASE("dtypes: names, sizes, categories") {
  CHECK(name(DType::f32) == "float32");
  CHECK(name(DType::bf16) == "bfloat16");
  CHECK(name(DType::boolean) == "bool");
  CHECK(dtype_size(DType::f16) == 2);
  CHECK(dtype_size(DType::f64) == 8);
  CHECK(dtype_size(DType::u8) == 1);
  CHECK(dtype_size(DType::boolean) == 1);
  CHECK(is_floating(DType::bf16));
  CHECK_FALSE(is_floating(DType::i64));
  CHECK(is_integral(DType::boolean, true));
  CHECK_FALSE(is_integral(DType::boolean, false));
}

TEST_CASE("dtypes: promotion follows PyTorch") {
  CHECK(promote_types(DType::f16, DType::bf16) == DType::f32);
  CHECK(promote_types(DType::u8, DType::i32) == DType::i32);
  CHECK(promote_types(DType::boolean, DType::u8) == DType::u8);
  CHECK(promote_types(DType::i64, DType::f16) == DType::f16);
  CHECK(promote_types(DType::f32, DType::f64) == DType::f64);

  const Tensor i64v = ints({1, 2}), i32v = ints({1, 2}, DType::i32), u8v = ints({1, 2}, DType::u8);
  const Tensor boolv = ints({1, 0}, DType::boolean);
  const Tensor f16v = ones({2}, DType::f16), bf16v = ones({2}, DType::bf16), f32v = ones({2});
  // int tensor with a float scalar: the default float dtype.
  CHECK((i64v + 2.5).dtype() == DType::f32);
  CHECK((i32v * 0.5).dtype() == DType::f32);
  // An int scalar does not widen an int tensor; a float scalar does not widen a half tensor.
  CHECK((i32v + 7).dtype() == DType::i32);
  CHECK((u8v + 300).dtype() == DType::u8);
  CHECK((f16v + 2.5).dtype() == DType::f16);
  CHECK((bf16v * 3).dtype() == DType::bf16);
  // Tensors of one category: the wider wins.
  CHECK((f16v + f32v).dtype() == DType::f32);
  CHECK((f16v + bf16v).dtype() == DType::f32);
  CHECK((u8v + i32v).dtype() == DType::i32);
  CHECK((boolv + i32v).dtype() == DType::i32);
  CHECK((boolv + u8v).dtype() == DType::u8);
  // A 0-dim tensor does not widen a dimensioned one of the same category...
  CHECK((i32v + zero_dim(5, DType::i64)).dtype() == DType::i32);
  CHECK((f16v + zero_dim(1.5, DType::f64)).dtype() == DType::f16);
  // ...but a higher category wins, with the 0-dim tensor's own dtype.
  CHECK((i32v + zero_dim(1.5, DType::f64)).dtype() == DType::f64);
  CHECK((boolv + zero_dim(3, DType::i32)).dtype() == DType::i32);
  // Two 0-dim tensors promote normally; a wrapped scalar ranks below a 0-dim tensor.
  CHECK((zero_dim(1, DType::i32) + zero_dim(2, DType::i64)).dtype() == DType::i64);
  CHECK((zero_dim(1, DType::i32) + 2.5).dtype() == DType::f32);
  CHECK((zero_dim(1, DType::f16) + 2.5).dtype() == DType::f16);
  // bool with a bool scalar stays bool (compare ops); bool with an int scalar becomes int64.
  CHECK(result_type(boolv, wrapped_scalar(true, kCPU)) == DType::boolean);
  CHECK((boolv + 1).dtype() == DType::i64);
  CHECK((boolv + 1.5).dtype() == DType::f32);
  // Results are computed in the promoted dtype: no truncation of the int operand's partner.
  CHECK(values(ints({1, 2}) + 0.5) == std::vector<double>{1.5, 2.5});
  CHECK(values(div(ints({1, 3}), ints({2, 2}))) == std::vector<double>{0.5, 1.5});
}

TEST_CASE("half: f16 conversions round to nearest even, overflow to inf, keep subnormals and NaN") {
  CHECK(f16_bits(1.0f) == 0x3c00);
  CHECK(f16_bits(-2.0f) == 0xc000);
  CHECK(f16_bits(65504.0f) == 0x7bff);  // largest finite half
  // Ties to even: 1 + 2^-11 is halfway between 1 and 1 + 2^-10 and rounds to 1 (even mantissa);
  // 1 + 3 * 2^-11 is halfway between 1 + 2^-10 and 1 + 2^-9 and rounds up to the even one.
  CHECK(f16_bits(1.0f + std::ldexp(1.0f, -11)) == 0x3c00);
  CHECK(f16_bits(1.0f + 3 * std::ldexp(1.0f, -11)) == 0x3c02);
  CHECK(f16_bits(1.0f + std::ldexp(1.0f, -11) + std::ldexp(1.0f, -20)) == 0x3c01);  // just above halfway
  // Overflow: values from 65520 (halfway to the next binade) become infinity.
  CHECK(f16_bits(65519.0f) == 0x7bff);
  CHECK(f16_bits(65520.0f) == 0x7c00);
  CHECK(f16_bits(1e6f) == 0x7c00);
  CHECK(f16_bits(-1e6f) == 0xfc00);
  CHECK(f16_bits(std::numeric_limits<float>::infinity()) == 0x7c00);
  // Subnormals: 2^-24 is the smallest; 2^-25 is a tie and rounds to 0, 3 * 2^-25 to 2 * 2^-24.
  CHECK(f16_bits(std::ldexp(1.0f, -14)) == 0x0400);  // smallest normal
  CHECK(f16_bits(std::ldexp(1.0f, -24)) == 0x0001);
  CHECK(f16_bits(std::ldexp(1.0f, -25)) == 0x0000);
  CHECK(f16_bits(3 * std::ldexp(1.0f, -25)) == 0x0002);
  CHECK(f16_bits(std::ldexp(1.0f, -26)) == 0x0000);
  CHECK(f16_bits(-std::ldexp(1.0f, -24)) == 0x8001);
  CHECK(f16_bits(-0.0f) == 0x8000);
  // NaN stays NaN.
  const uint16_t nan_bits = f16_bits(std::numeric_limits<float>::quiet_NaN());
  CHECK((nan_bits & 0x7c00) == 0x7c00);
  CHECK((nan_bits & 0x03ff) != 0);
  // Back to float: exact.
  CHECK(static_cast<float>(f16::from_bits(0x0001)) == std::ldexp(1.0f, -24));
  CHECK(static_cast<float>(f16::from_bits(0x3555)) == doctest::Approx(0.33325195));
  CHECK(std::isinf(static_cast<float>(f16::from_bits(0xfc00))));
  CHECK(std::isnan(static_cast<float>(f16::from_bits(0x7e00))));
  // Every half value survives a round trip through float.
  int mismatches = 0;
  for (uint32_t b = 0; b < 0x10000; ++b) {
    const f16 h = f16::from_bits(static_cast<uint16_t>(b));
    const float f = h;
    if (std::isnan(f)) continue;
    mismatches += f16(f).bits != b;
  }
  CHECK(mismatches == 0);
}

TEST_CASE("half: bf16 conversions") {
  CHECK(bf16_bits(1.0f) == 0x3f80);
  CHECK(bf16_bits(-3.0f) == 0xc040);
  CHECK(bf16_bits(bits_to_float(0x3f808000)) == 0x3f80);  // tie, even stays
  CHECK(bf16_bits(bits_to_float(0x3f818000)) == 0x3f82);  // tie, odd rounds up
  CHECK(bf16_bits(bits_to_float(0x3f808001)) == 0x3f81);  // above the tie
  CHECK(bf16_bits(std::numeric_limits<float>::max()) == 0x7f80);  // rounds to infinity
  CHECK(bf16_bits(std::ldexp(1.0f, -133)) == 0x0001);  // a float subnormal survives
  const uint16_t nan_bits = bf16_bits(std::numeric_limits<float>::quiet_NaN());
  CHECK((nan_bits & 0x7f80) == 0x7f80);
  CHECK((nan_bits & 0x007f) != 0);
  // A signalling NaN whose payload sits in the dropped bits must not become infinity.
  CHECK(std::isnan(static_cast<float>(bf16(bits_to_float(0x7f800001)))));
  CHECK(static_cast<float>(bf16::from_bits(0x4049)) == 3.140625f);
}

TEST_CASE("half: tensor casts use the same rounding") {
  const Tensor x = from_vector<float>({65519.0f, 65520.0f, -1e6f, std::ldexp(1.0f, -25), 3 * std::ldexp(1.0f, -25),
                                       1.0f + std::ldexp(1.0f, -11)}, {6});
  const auto h = x.to(DType::f16).to_vector<float>();
  CHECK(h[0] == 65504.0f);
  CHECK(std::isinf(h[1]));
  CHECK(h[2] == -std::numeric_limits<float>::infinity());
  CHECK(h[3] == 0.0f);
  CHECK(h[4] == std::ldexp(1.0f, -23));
  CHECK(h[5] == 1.0f);
  const auto b = from_vector<float>({1.00390625f, 1.01171875f}, {2}).to(DType::bf16).to_vector<float>();
  CHECK(b[0] == 1.0f);       // 1 + 2^-8: tie, to even
  CHECK(b[1] == 1.015625f);  // 1 + 3 * 2^-8: tie, to even
  // Float to integer truncates toward zero; to bool is "non-zero".
  CHECK(t64({-2.7, -0.5, 0.5, 2.7}).to(DType::i32).to_vector<int32_t>() == std::vector<int32_t>{-2, 0, 0, 2});
  CHECK(t64({0.0, -0.0, 0.1, std::nan("")}).to(DType::boolean).to_vector<bool>() ==
        std::vector<bool>{false, false, true, true});
  CHECK(ints({300, -1}, DType::i32).to(DType::u8).to_vector<int64_t>() == std::vector<int64_t>{44, 255});
}

TEST_CASE("creation: arange, full, zeros, ones, from_vector") {
  const Tensor a = arange(5);
  CHECK(a.dtype() == DType::i64);
  CHECK(values(a) == std::vector<double>{0, 1, 2, 3, 4});
  const Tensor f = arange(0, 1, 0.25);
  CHECK(f.dtype() == DType::f32);
  CHECK(values(f) == std::vector<double>{0, 0.25, 0.5, 0.75});
  CHECK(values(arange(5, 0, -1.5)) == std::vector<double>{5, 3.5, 2, 0.5});
  CHECK(values(arange(-3, 3, 2)) == std::vector<double>{-3, -1, 1});
  CHECK(values(arange(3, -3, -2)) == std::vector<double>{3, 1, -1});
  CHECK(arange(0, 1, 0.1).numel() == 10);
  CHECK(arange(0.0, 3.0, 1.0, DType::f64).dtype() == DType::f64);
  CHECK(arange(2, 2).numel() == 0);
  CHECK_THROWS_AS(arange(0, 5, 0), ValueError);
  CHECK_THROWS_AS(arange(0, 5, -1), ValueError);

  const Tensor full_t = full({2, 3}, 2.5, DType::f64);
  CHECK(full_t.shape() == Shape{2, 3});
  CHECK(values(full_t) == std::vector<double>(6, 2.5));
  CHECK(values(full({2}, 7, DType::i32)) == std::vector<double>{7, 7});
  CHECK(values(zeros({3})) == std::vector<double>{0, 0, 0});
  CHECK(zeros({3}).dtype() == DType::f32);
  CHECK(values(ones({2}, DType::u8)) == std::vector<double>{1, 1});
  CHECK(zeros({0, 4}).numel() == 0);
  const Tensor like = full_like(ones({2, 2}, DType::bf16), -1.5);
  CHECK(like.dtype() == DType::bf16);
  CHECK(values(like) == std::vector<double>(4, -1.5));
  CHECK(values(zeros_like(like)) == std::vector<double>(4, 0));
  CHECK(values(ones_like(like)) == std::vector<double>(4, 1));
  const Tensor s = scalar_tensor(4.25, DType::f64);
  CHECK(s.dim() == 0);
  CHECK(s.numel() == 1);
  CHECK(s.item<double>() == 4.25);
  CHECK(full({2}, 1.5, TensorOptions(DType::f32).with_requires_grad()).requires_grad());
  CHECK_THROWS_AS(empty({2, -1}), ShapeError);

  CHECK(from_vector<int32_t>({1, 2, 3, 4}, {2, 2}).dtype() == DType::i32);
  CHECK(from_vector<double>({1, 2}, {2}, DType::f16).dtype() == DType::f16);
  try {
    from_vector<float>({1, 2, 3}, {2, 2});
    FAIL_CHECK("size mismatch accepted");
  } catch (const ShapeError& e) {
    const std::string msg = e.what();
    CHECK_MESSAGE(msg.find('3') != std::string::npos, msg);
    CHECK_MESSAGE(msg.find("(2, 2)") != std::string::npos, msg);
  }
}

TEST_CASE("host access: item and to_vector") {
  const Tensor x = from_vector<float>({1.5f, -2.25f, 3.75f, 4.0f}, {2, 2});
  CHECK(x.to_vector<float>() == std::vector<float>{1.5f, -2.25f, 3.75f, 4.0f});
  CHECK(x.t().to_vector<double>() == std::vector<double>{1.5, 3.75, -2.25, 4.0});  // logical order
  CHECK(x.to_vector<int64_t>() == std::vector<int64_t>{1, -2, 3, 4});
  CHECK(x.select(0, 1).select(0, 0).item<float>() == 3.75f);
  CHECK(x.to(DType::f16).to_vector<f16>()[1].bits == f16(-2.25f).bits);
  CHECK(scalar_tensor(3.7).item<int64_t>() == 3);
  CHECK(scalar_tensor(true, DType::boolean).item<bool>());
  CHECK_THROWS_AS(x.item<float>(), ShapeError);
  CHECK(zeros({0}).to_vector<float>().empty());
  CHECK_THROWS_AS(x.data<double>(), DTypeError);
  CHECK(x.data<float>()[3] == 4.0f);
}

TEST_CASE("printing matches PyTorch's format") {
  CHECK(from_vector<float>({1, 2, 3}, {3}).str() == "tensor([1., 2., 3.])");
  CHECK(from_vector<double>({1.5, 2}, {1, 2}).str() == "tensor([[1.5000, 2.0000]], dtype=float64)");
  CHECK(from_vector<int64_t>({1, 2, 3, 4}, {2, 2}).str() == "tensor([[1, 2],\n        [3, 4]])");
  CHECK(from_vector<int32_t>({-1, 20}, {2}).str() == "tensor([-1, 20], dtype=int32)");
  CHECK(from_vector<bool>({true, false}, {2}).str() == "tensor([ True, False])");
  CHECK(from_vector<float>({-1, 2}, {2}).str() == "tensor([-1.,  2.])");
  CHECK(scalar_tensor(3.5).str() == "tensor(3.5000)");
  CHECK(from_vector<float>({1e-5f, 1.0f}, {2}).str() == "tensor([1.0000e-05, 1.0000e+00])");
  CHECK(from_vector<float>({1, 2}, {2}).to(DType::f16).str() == "tensor([1., 2.], dtype=float16)");
  CHECK(zeros({0}).str() == "tensor([])");
  CHECK(from_vector<float>({1, 2}, {2}, TensorOptions(DType::f32).with_requires_grad()).str() ==
        "tensor([1., 2.], requires_grad=True)");
  const Tensor x = from_vector<float>({1, 2}, {2}).requires_grad_();
  CHECK((x * 2).str() == "tensor([2., 4.], grad_fn=<mul>)");
  CHECK(from_vector<double>({std::nan(""), 1.5}, {2}).str() == "tensor([   nan, 1.5000], dtype=float64)");
  CHECK(from_vector<float>({1, 2, 3, 4, 5, 6, 7, 8}, {2, 2, 2}).str() ==
        "tensor([[[1., 2.],\n         [3., 4.]],\n\n        [[5., 6.],\n         [7., 8.]]])");
  // Above 1000 elements PyTorch shows three at each end.
  CHECK(arange(2000).str() == "tensor([   0,    1,    2,  ..., 1997, 1998, 1999])");
  std::ostringstream os;
  os << from_vector<int64_t>({7}, {1});
  CHECK(os.str() == "tensor([7])");
}

TEST_CASE("random: Philox streams replay from a seed or a saved state") {
  manual_seed(42);
  const Tensor a = randn({64});
  const Tensor a2 = rand({10});
  manual_seed(42);
  CHECK(equal(randn({64}), a));
  CHECK(equal(rand({10}), a2));
  manual_seed(43);
  CHECK_FALSE(equal(randn({64}), a));

  Generator g(7);
  const GeneratorState saved = g.state();
  const Tensor x = rand({33}, {}, &g);
  const Tensor y = randint(0, 100, {5}, DType::i64, &g);
  g.set_state(saved);
  CHECK(equal(rand({33}, {}, &g), x));
  CHECK(equal(randint(0, 100, {5}, DType::i64, &g), y));
  CHECK_FALSE(equal(rand({33}, {}, &g), x));  // the stream moves on
  // A private generator does not disturb the default one.
  manual_seed(5);
  const Tensor d1 = rand({4});
  manual_seed(5);
  Generator other(5);
  (void)rand({100}, {}, &other);
  CHECK(equal(rand({4}), d1));
  // Same seed, same numbers, whatever the dtype's storage.
  Generator g1(11), g2(11);
  CHECK(allclose(rand({16}, DType::f32, &g1).to(DType::f64), rand({16}, DType::f16, &g2).to(DType::f64), 1e-3, 1e-3));
}

TEST_CASE("random: distributions") {
  Generator g(2024);
  const int64_t n = 100000;
  const auto u = rand({n}, {}, &g).to_vector<double>();
  double lo = 1, hi = 0, mean = 0;
  for (double v : u) {
    lo = std::min(lo, v);
    hi = std::max(hi, v);
    mean += v / n;
  }
  CHECK(lo >= 0);
  CHECK(hi < 1);
  CHECK(mean == doctest::Approx(0.5).epsilon(0.01));
  for (DType d : {DType::f16, DType::bf16, DType::f64}) {
    const auto v = rand({4096}, d, &g).to_vector<double>();
    CHECK(*std::min_element(v.begin(), v.end()) >= 0);
    CHECK(*std::max_element(v.begin(), v.end()) < 1);  // rounding up to 1.0 in f16/bf16 would break [0, 1)
  }

  const auto z = randn({n}, {}, &g).to_vector<double>();
  double m = 0, sq = 0;
  for (double v : z) m += v / n;
  for (double v : z) sq += (v - m) * (v - m) / (n - 1);
  CHECK(std::fabs(m) < 0.02);
  CHECK(std::sqrt(sq) == doctest::Approx(1.0).epsilon(0.02));

  const Tensor r = randint(-3, 5, {10000}, DType::i64, &g);
  CHECK(r.dtype() == DType::i64);
  const auto rv = r.to_vector<int64_t>();
  const std::set<int64_t> seen(rv.begin(), rv.end());
  CHECK(*seen.begin() == -3);
  CHECK(*seen.rbegin() == 4);
  CHECK(seen.size() == 8);
  CHECK(randint(0, 3, {4}, DType::u8, &g).dtype() == DType::u8);
  CHECK_THROWS_AS(randint(5, 5, {2}), ValueError);
  CHECK_THROWS_AS(rand({2}, DType::i32), DTypeError);
  CHECK_THROWS_AS(randn({2}, DType::boolean), DTypeError);
  CHECK(randn({2, 3}, TensorOptions(DType::f64).with_requires_grad()).requires_grad());
}

TEST_CASE("views: sizes that are negative, overflow int64 or reach past the tensor are refused") {
  const Tensor x = arange(12.0).reshape({3, 4});
  constexpr int64_t kHuge = std::numeric_limits<int64_t>::max();
  // start + length used to overflow and pass the bounds check; the view then read past the storage.
  expect_error<IndexError>("narrow", [&] { narrow(x, 0, 2, kHuge); }, {"narrow", "size 3"});
  expect_error<IndexError>("narrow start", [&] { narrow(x, 0, 4, 0); }, {"start 4"});
  CHECK(narrow(x, 0, 3, 0).shape() == Shape{0, 4});
  // An empty tensor's numel (0) matched any shape whose product wrapped to 0.
  const int64_t two32 = int64_t{1} << 32;
  expect_error<ShapeError>("view", [&] { zeros({0}).view({two32, two32}); }, {"view", "spans more than 2^63 - 1"});
  expect_error<ShapeError>("reshape", [&] { reshape(zeros({0}), {two32, two32}); }, {"reshape"});
  expect_error<ShapeError>("-1 beside 0", [&] { zeros({0, 4}).view({-1, 0}); }, {"(-1, 0)", "beside the -1"});
  CHECK(zeros({0, 4}).view({-1, 4}).shape() == Shape{0, 4});
  expect_error<ShapeError>("expand negative", [&] { expand(ones({1}), {-5}); }, {"invalid size -5"});
  expect_error<ShapeError>("expand overflow", [&] { expand(ones({1, 1}), {two32, two32}); }, {"expand", "spans"});
  // A step near INT64_MAX overflowed the element count to -1.
  CHECK(slice(x, 0, 0, 3, kHuge).shape() == Shape{1, 4});
  CHECK(values(slice(x, 1, 1, 4, kHuge - 1)) == std::vector<double>{1, 5, 9});
  CHECK(slice(x, 1, 0, 4, 3).shape() == Shape{3, 2});
  // Its stride (step x the dim's) and its backward's index range must not overflow either (UBSan).
  Tensor leaf = arange(12.0).reshape({3, 4}).requires_grad_(true);
  slice(leaf, 0, 1, 3, kHuge).sum().backward();
  CHECK(values(leaf.grad()) == std::vector<double>{0, 0, 0, 0, 1, 1, 1, 1, 0, 0, 0, 0});
}

TEST_CASE("views share storage; writes bump the shared version counter") {
  Tensor x = arange(0.0, 12.0, 1.0, DType::f32).reshape({3, 4});
  const Tensor v = x.view({4, 3});
  const Tensor t = x.t();
  const Tensor s = slice(x, 1, 0, 4, 2);
  const Tensor e = x.select(0, 0).unsqueeze(0).expand({2, 4});
  CHECK(v.storage().get() == x.storage().get());
  CHECK(t.storage().get() == x.storage().get());
  CHECK(s.storage().get() == x.storage().get());
  CHECK(e.storage().get() == x.storage().get());
  CHECK(t.stride(0) == 1);
  CHECK(s.stride(1) == 2);
  CHECK(e.stride(0) == 0);
  CHECK_FALSE(t.is_contiguous());
  CHECK(x.contiguous().is_same(x));
  CHECK_FALSE(t.contiguous().storage().get() == x.storage().get());
  CHECK_FALSE(t.reshape({12}).storage().get() == x.storage().get());  // needs a copy

  const uint64_t v0 = x.version();
  Tensor sv = s;
  fill_(sv, -1.0);  // through a strided view
  CHECK(x.version() == v0 + 1);
  CHECK(v.version() == x.version());
  CHECK(values(x.select(0, 2)) == std::vector<double>{-1, 9, -1, 11});
  Tensor tv = t;
  add_(tv, 100.0);  // through a transposed view
  CHECK(x.version() == v0 + 2);
  CHECK(values(x.select(0, 0)) == std::vector<double>{99, 101, 99, 103});
  Tensor c = x.clone();
  add_(c, 1.0);
  CHECK(x.version() == v0 + 2);  // a clone has its own storage and counter
}

TEST_CASE("in-place ops") {
  Tensor x = t64({1, -2, 3, -4}, {2, 2});
  add_(x, t64({10, 20}));  // broadcast other
  CHECK(values(x) == std::vector<double>{11, 18, 13, 16});
  sub_(x, 1);
  mul_(x, t64({2}, {1}));
  div_(x, 4);
  CHECK(values(x) == std::vector<double>{5, 8.5, 6, 7.5});
  neg_(x);
  relu_(x);
  CHECK(values(x) == std::vector<double>{0, 0, 0, 0});
  fill_(x, 2.0);
  sqrt_(x);
  CHECK(values(x)[0] == doctest::Approx(std::sqrt(2.0)));
  exp_(x);
  tanh_(x);
  sigmoid_(x);
  CHECK(values(x)[0] == doctest::Approx(1 / (1 + std::exp(-std::tanh(std::exp(std::sqrt(2.0)))))));
  fill_(x, 5);
  clamp_(x, std::nullopt, 3.0);
  CHECK(values(x) == std::vector<double>{3, 3, 3, 3});
  zero_(x);
  CHECK(values(x) == std::vector<double>{0, 0, 0, 0});
  masked_fill_(x, from_vector<bool>({true, false}, {2}), 9);
  CHECK(values(x) == std::vector<double>{9, 0, 9, 0});

  // copy_ broadcasts and converts.
  Tensor f = zeros({2, 3}, DType::f32);
  copy_(f, t64({1.5, 2.5, 3.5}));
  CHECK(values(f) == std::vector<double>{1.5, 2.5, 3.5, 1.5, 2.5, 3.5});
  Tensor i = zeros({3}, DType::i32);
  copy_(i, t64({1.9, -1.9, 7}));
  CHECK(values(i) == std::vector<double>{1, -1, 7});
  Tensor h = zeros({2}, DType::f16);
  copy_(h, from_vector<bool>({true, false}, {2}));
  CHECK(values(h) == std::vector<double>{1, 0});
  Tensor strided = zeros({2, 4});
  Tensor cols = slice(strided, 1, 1, 4, 2);
  copy_(cols, ones({2, 2}));
  CHECK(values(strided) == std::vector<double>{0, 1, 0, 1, 0, 1, 0, 1});

  // Dtype and shape rules.
  Tensor n = ints({1, 2}, DType::i32);
  add_(n, 3);
  CHECK(values(n) == std::vector<double>{4, 5});
  CHECK_THROWS_AS(add_(n, 1.5), DTypeError);  // float result into an int tensor
  CHECK_THROWS_AS(div_(n, 2), DTypeError);    // true division gives floats
  CHECK_THROWS_AS(exp_(n), DTypeError);
  Tensor half = ones({2}, DType::f16);
  add_(half, ones({2}, DType::f32));  // float into another float type is allowed
  CHECK(values(half) == std::vector<double>{2, 2});
  Tensor small = zeros({3});
  CHECK_THROWS_AS(add_(small, ones({2, 3})), ShapeError);
  CHECK_THROWS_AS(copy_(small, ones({4})), ShapeError);
}

TEST_CASE("comparisons of whole tensors: all_finite, equal, allclose") {
  const double inf = std::numeric_limits<double>::infinity();
  CHECK(all_finite(t64({1, -2, 3})));
  CHECK_FALSE(all_finite(t64({1, inf})));
  CHECK_FALSE(all_finite(t64({-inf, 0})));
  CHECK_FALSE(all_finite(t64({std::nan(""), 0}).to(DType::bf16)));
  CHECK(all_finite(from_vector<int64_t>({1, 2}, {2})));
  CHECK(all_finite(zeros({0})));
  CHECK(all_finite(t64({65504}).to(DType::f16)));
  CHECK_FALSE(all_finite(t64({65520}).to(DType::f16)));

  CHECK(equal(t64({1, 2}), t64({1, 2})));
  CHECK_FALSE(equal(t64({1, 2}), t64({1, 3})));
  CHECK_FALSE(equal(t64({1, 2}), t64({1, 2}, {1, 2})));       // shape differs
  CHECK_FALSE(equal(t64({1, 2}), t64({1, 2}).to(DType::f32)));  // dtype differs
  CHECK(equal(t64({1, 2, 3, 4}, {2, 2}).t(), t64({1, 3, 2, 4}, {2, 2})));
  CHECK_FALSE(equal(t64({std::nan("")}), t64({std::nan("")})));  // NaN != NaN

  CHECK(allclose(t64({1, 2}), t64({1 + 1e-9, 2})));
  CHECK_FALSE(allclose(t64({1, 2}), t64({1.001, 2})));
  CHECK(allclose(t64({1, 2}), t64({1.001, 2}), 1e-2));
  CHECK(allclose(t64({0}), t64({1e-9})));  // atol 1e-8
  CHECK(allclose(ones({2, 3}), ones({3})));  // broadcasts
  CHECK(allclose(ones({2}, DType::f16), ones({2}, DType::f64)));
}

TEST_CASE("devices: parsing and CUDA on a machine without it") {
  CHECK(Device::parse("cpu") == kCPU);
  CHECK(Device::parse("cuda") == Device(DeviceType::cuda, 0));
  CHECK(Device::parse("cuda:1") == Device(DeviceType::cuda, 1));
  CHECK(Device::parse("cuda:1").str() == "cuda:1");
  CHECK(Device::parse("cuda:127").index == 127);
  // Device::index is an int8_t: 300 would have become 44, 256 device 0.
  for (const char* bad : {"gpu", "CPU", "cuda:", "cuda:x", "cuda:-1", "cuda:1:2", "", "cuda:128", "cuda:300", "cuda:256"}) {
    try {
      Device::parse(bad);
      FAIL_CHECK("accepted device '", std::string(bad), "'");
    } catch (const DeviceError& e) {
      CHECK_MESSAGE(std::string(e.what()).find("'" + std::string(bad) + "'") != std::string::npos,
                    std::string(e.what()));
    }
  }
  // A CUDA device index beyond those present is refused on any machine.
  const Device missing(DeviceType::cuda, backend::cuda_device_count());
  CHECK_THROWS_AS(ones({2}).to(missing), DeviceError);
  if (!has_cuda()) {
    CHECK_THROWS_AS(zeros({2}, kCuda), DeviceError);
    CHECK_THROWS_AS(ones({2}).to(kCuda), DeviceError);
    CHECK_THROWS_AS(rand({2}, kCuda), DeviceError);
  }
}

TEST_CASE("memory: host statistics follow tensors, and empty_cache gives cached blocks back") {
  backend::empty_cache(kCPU);
  const backend::MemoryStats before = backend::memory_stats(kCPU);
  CHECK(before.reserved >= before.allocated);
  CHECK(before.live_allocations <= before.allocations);
  {
    const Tensor small = empty({1000}, DType::f32);  // 4000 bytes, straight from the C library
    const backend::MemoryStats s = backend::memory_stats(kCPU);
    CHECK(s.allocated == before.allocated + 4000);
    CHECK(s.allocations == before.allocations + 1);
    CHECK(s.live_allocations == before.live_allocations + 1);
    CHECK(s.reserved >= before.reserved + 4000);
    CHECK(s.peak >= s.allocated);
  }
  const backend::MemoryStats freed = backend::memory_stats(kCPU);
  CHECK(freed.allocated == before.allocated);
  CHECK(freed.allocations == before.allocations + 1);
  CHECK(freed.live_allocations == before.live_allocations);
  CHECK(freed.reserved == before.reserved);  // small blocks go straight back

  // The smallest (up to 1 KiB) stay with the thread for its next request of their size, until
  // empty_cache (unless AddressSanitizer is watching: it is then given every block back at once).
  void* tiny_block = nullptr;
  {
    const Tensor tiny = empty({100}, DType::f32);
    tiny_block = tiny.raw_data();
  }
  const backend::MemoryStats kept = backend::memory_stats(kCPU);
  CHECK(kept.allocated == before.allocated);
#if !defined(__SANITIZE_ADDRESS__)
  CHECK(kept.reserved == before.reserved + 448);  // 400 bytes in 64-byte lines
  CHECK(empty({100}, DType::f32).raw_data() == tiny_block);
#endif
  backend::empty_cache(kCPU);
  CHECK(backend::memory_stats(kCPU).reserved == before.reserved);

  // A block of 4 MiB comes from the cache, which keeps it when the tensor dies.
  constexpr size_t kBig = size_t{4} << 20;
  backend::reset_peak_memory_stats(kCPU);
  CHECK(backend::max_memory_allocated(kCPU) == before.allocated);
  {
    const Tensor big = empty({int64_t(kBig / 4)}, DType::f32);
    const backend::MemoryStats s = backend::memory_stats(kCPU);
    CHECK(s.allocated == before.allocated + kBig);
    CHECK(s.reserved == before.reserved + kBig);
    CHECK(s.peak == before.allocated + kBig);
  }
  const backend::MemoryStats cached = backend::memory_stats(kCPU);
  CHECK(cached.allocated == before.allocated);
  CHECK(cached.reserved == before.reserved + kBig);  // kept for the next request of its size
  CHECK(cached.peak == before.allocated + kBig);     // freed, but still the peak
  backend::empty_cache(kCPU);
  CHECK(backend::memory_stats(kCPU).reserved == before.reserved);
  backend::reset_peak_memory_stats(kCPU);
  CHECK(backend::max_memory_allocated(kCPU) == before.allocated);
}

TEST_CASE("memory: an allocation the host cannot serve raises OutOfMemoryError, and the next one works") {
  // Sizes that overflow are a ShapeError before any allocation.
  expect_error<ShapeError>("2^82 bytes", [] { (void)empty({int64_t{1} << 40, int64_t{1} << 40}, DType::f32); },
                           {"(1099511627776, 1099511627776)", "float32", "2^63"});
  CHECK(empty({0, int64_t{1} << 62}, DType::f64).numel() == 0);

  const backend::MemoryStats before = backend::memory_stats(kCPU);
  constexpr size_t kRequest = size_t{1} << 60;  // beyond any machine's address space
  try {
    (void)empty({int64_t(kRequest / 4)}, DType::f32);
    FAIL_CHECK("allocated 2^60 bytes");
  } catch (const OutOfMemoryError& e) {
    CHECK(e.device() == kCPU);
    CHECK(e.requested() == kRequest);
    CHECK(e.allocated() == before.allocated);
    CHECK(e.peak() >= before.allocated);
    CHECK(e.reserved() <= before.reserved);  // the cache was emptied before the second try
    check_message(e.what(), {"out of memory on cpu", "1.00 EiB", "(" + std::to_string(kRequest) + " bytes)", "allocated",
                             "reserved", "peak"});
  }
  const backend::MemoryStats after = backend::memory_stats(kCPU);
  CHECK(after.num_ooms == before.num_ooms + 1);
  CHECK(after.num_alloc_retries == before.num_alloc_retries + 1);
  CHECK(after.allocated == before.allocated);  // nothing leaked
  CHECK(after.allocations == before.allocations);
  CHECK(after.live_allocations == before.live_allocations);
  const Tensor t = full({300000}, 2.0f);  // a cached-size block: the allocator still works
  CHECK(t.sum().item<double>() == 600000.0);
}

TEST_CASE("memory: pinned memory and CUDA statistics on a machine without a GPU") {
  CHECK_FALSE(ones({3}).is_pinned());
  CHECK(backend::pinned_memory_available() == has_cuda());
  if (!has_cuda()) {
    expect_error<DeviceError>("pin_memory", [] { ones({3}).pin_memory(); }, {"pin_memory", "CUDA"});
    expect_error<DeviceError>("pin_memory of nothing", [] { zeros({0}).pin_memory(); }, {"pin_memory", "CUDA"});
    expect_error<DeviceError>("memory_stats", [] { (void)backend::memory_stats(kCuda); }, {"memory_stats", "cuda:0"});
    CHECK_THROWS_AS(backend::max_memory_allocated(kCuda), DeviceError);
    CHECK_THROWS_AS(backend::reset_peak_memory_stats(kCuda), DeviceError);
    CHECK_THROWS_AS(backend::empty_cache(kCuda), DeviceError);
  }
}

TEST_CASE("threads: one setting for kernels and BLAS") {
  const int before = get_num_threads();
  CHECK(before >= 1);
  set_num_threads(1);
  CHECK((get_num_threads() == 1 || before == 1));
  set_num_threads(before);
  CHECK_THROWS_AS(set_num_threads(0), ValueError);
}

TEST_CASE("host sync counter: value read-outs count, queued work does not") {
  const Tensor x = from_vector<float>({1, 2, 3}, {3});
  const int64_t start = host_sync_count();
  const Tensor y = mul(add(x, 1.0), x).sum();  // work only: nothing read on the host
  CHECK(host_sync_count() == start);
  CHECK(y.item<double>() == 20);
  CHECK(host_sync_count() == start + 1);
  CHECK(x.to_vector<float>().size() == 3);
  CHECK(host_sync_count() == start + 2);
}

TEST_CASE("cuda streams and events: without a GPU, asking for one is a DeviceError") {
  if (has_cuda()) return;  // the GPU case below checks them
  expect_error<DeviceError>("stream", [] { cuda::Stream s(0); }, {});
  expect_error<DeviceError>("event", [] { cuda::Event e; }, {});
}

TEST_CASE("methods: x.op(args) is ember::op(x, args); in-place methods write through a temporary view") {
  const Tensor x = from_vector<double>({1, -2, 3, -4, 5, -6}, {2, 3}), y = from_vector<double>({2, 2, 2}, {3});
  CHECK(equal(x.exp(), exp(x)));
  CHECK(equal(x.add(y, 0.5), add(x, y, 0.5)));
  CHECK(equal(x.argmax(1), argmax(x, 1)));
  CHECK(equal(x.matmul(x.t()), matmul(x, x.t())));
  CHECK(equal(x.sum({1}, true), sum(x, {1}, true)));
  CHECK(equal(x.max(1).indices, max(x, 1).indices));
  CHECK(equal(x.clamp(-1.0, 2.0), clamp(x, -1.0, 2.0)));
  CHECK(x.split(1, 0).size() == 2);
  // In place through a view that is a temporary: row 0 only.
  Tensor t = zeros({3, 2}, DType::f64);
  const uint64_t before = t.version();
  t.narrow(0, 0, 2).add_(ones({2, 2}, DType::f64)).mul_(3.0);
  CHECK(values(t) == std::vector<double>{3, 3, 3, 3, 0, 0});
  CHECK(t.version() > before);
  // The in-place method returns the tensor it was called on.
  const Tensor& same = t.zero_();
  CHECK(same.is_same(t));
  CHECK(values(t) == std::vector<double>(6, 0.0));
}

}  // TEST_SUITE("cpu")

EMBER_CUDA_TEST_CASE("cuda tensor: round trip, printing, in-place and views") {
  const Tensor x = from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  const Tensor c = x.to(kCuda);
  CHECK(c.device() == kCuda);
  CHECK(c.to(kCPU).to_vector<float>() == x.to_vector<float>());
  CHECK(c.t().to_vector<float>() == x.t().to_vector<float>());
  CHECK(from_vector<float>({1, 2}, {2}).to(kCuda).str() == "tensor([1., 2.], device='cuda:0')");
  Tensor z = zeros({2, 3}, kCuda);
  copy_(z, x);  // across devices
  CHECK(values(z) == values(x));
  add_(z, 1);
  CHECK(values(z) == std::vector<double>{2, 3, 4, 5, 6, 7});
  for (DType d : kAll) CHECK(equal(x.to(d).to(kCuda).to(kCPU), x.to(d)));
}

EMBER_CUDA_TEST_CASE("cuda host sync counter: each blocking copy and synchronisation counts once") {
  const Tensor x = from_vector<float>({1, 2, 3}, {3}).pin_memory();
  const Tensor on_gpu = x.to(kCuda, /*non_blocking=*/true);
  const int64_t start = host_sync_count();
  const Tensor y = mul(add(on_gpu, 1.0), on_gpu).sum();
  CHECK(host_sync_count() == start);   // launches only
  CHECK(y.item<double>() == 20);
  CHECK(host_sync_count() == start + 1);  // the copy back waited once
  (void)from_vector<float>({4}, {1}).to(kCuda);  // pageable source: a blocking copy
  CHECK(host_sync_count() == start + 2);
}

EMBER_CUDA_TEST_CASE("cuda streams and events: work on a user stream, ordered and timed by events") {
  const Tensor a = randn({1024, 1024}, kCuda);
  cuda::Stream s;
  cuda::Event ready, start(true), done(true);
  ready.record(0);  // a was written on the default stream
  s.wait(ready);
  Tensor b;
  {
    cuda::StreamGuard on_s(s);
    start.record(s);
    b = matmul(a, a);
    done.record(s);
  }
  const int64_t before = host_sync_count();
  done.synchronize();
  CHECK(host_sync_count() == before + 1);
  CHECK(done.query());
  CHECK(start.elapsed_ms(done) > 0);
  const Tensor want = matmul(a.to(kCPU), a.to(kCPU));
  CHECK(allclose(b.to(kCPU), want, 1e-3, 1e-3));
  cuda::Stream other;
  other.wait(done);
  other.synchronize();
  cuda::Event untimed;
  untimed.record(0);
  expect_error<ValueError>("untimed", [&] { (void)untimed.elapsed_ms(done); }, {"enable_timing"});
}

EMBER_CUDA_TEST_CASE("cuda events: created at the first record; before it they wait for nothing") {
  cuda::Event lazy;
  CHECK(lazy.handle() == nullptr);
  CHECK(lazy.query());
  const int64_t before = host_sync_count();
  lazy.synchronize();  // nothing recorded: no wait, no host synchronisation counted
  lazy.wait(0);
  CHECK(host_sync_count() == before);
  // Event::wait orders the current stream after a side stream's work: b is read after it is written.
  cuda::Stream side;
  Tensor b;
  {
    cuda::StreamGuard on_side(side);
    b = full({1 << 20}, 3.0, kCuda) * 2.0;
    lazy.record(side);
  }
  CHECK(lazy.handle() != nullptr);
  lazy.wait(0);
  CHECK(sum(b).item<double>() == 6.0 * (1 << 20));
  if (backend::cuda_device_count() > 1) {  // an event belongs to the device of its first record
    cuda::Stream on_1(1);
    expect_error<DeviceError>("other device", [&] { lazy.record(on_1); }, {"created on cuda:0", "cuda:1"});
  }
}

EMBER_CUDA_TEST_CASE("cuda random: the same seed gives the same numbers as on the CPU") {
  for (DType d : kFloats) {
    Generator a(99), b(99);
    CHECK_MESSAGE(equal(rand({1001}, d, &a), rand({1001}, TensorOptions(d).with_device(kCuda), &b).to(kCPU)), name(d));
    const auto cpu = values(randn({1001}, d, &a));
    const auto gpu = values(randn({1001}, TensorOptions(d).with_device(kCuda), &b));
    for (size_t i = 0; i < cpu.size(); ++i)
      if (!close(gpu[i], cpu[i], tolerance(d))) {
        FAIL_CHECK("randn ", name(d), " element ", i, ": cuda ", gpu[i], ", cpu ", cpu[i]);
        break;
      }
  }
  Generator a(5), b(5);
  CHECK(equal(randint(-7, 9, {999}, DType::i32, &a), randint(-7, 9, {999}, TensorOptions(DType::i32).with_device(kCuda), &b).to(kCPU)));
}

EMBER_CUDA_TEST_CASE("cuda pinned memory: pin_memory copies into page-locked memory") {
  const Tensor x = arange(0, 24, 1, DType::f32).view({2, 3, 4});
  const Tensor p = x.pin_memory();
  CHECK(p.is_pinned());
  CHECK_FALSE(x.is_pinned());
  CHECK(p.device() == kCPU);
  CHECK(equal(p, x));
  CHECK(p.pin_memory().is_same(p));
  CHECK(p.narrow(0, 1, 1).is_pinned());  // views share the pinned storage
  const Tensor strided = x.transpose(0, 2).pin_memory();
  CHECK(strided.is_contiguous());
  CHECK(equal(strided, x.transpose(0, 2)));
  for (DType d : kAll) CHECK_MESSAGE(equal(x.to(d).pin_memory(), x.to(d)), name(d));
  expect_error<ValueError>("a CUDA tensor", [&] { x.to(kCuda).pin_memory(); }, {"pin_memory", "cuda:0"});
  // Differentiable, like a move between devices.
  Tensor leaf = from_vector<double>({1, 2, 3}, {3});
  leaf.requires_grad_();
  mul(leaf.pin_memory(), 2.0).sum().backward();
  CHECK(values(leaf.grad()) == std::vector<double>{2, 2, 2});
}

EMBER_CUDA_TEST_CASE("cuda pinned memory: a non-blocking copy to the GPU, then its use") {
  Generator gen(3);
  const Tensor x = randn({512, 1024}, {}, &gen);
  const Tensor on_gpu = x.pin_memory().to(kCuda, /*non_blocking=*/true);
  CHECK(equal(mul(on_gpu, 2.0).to(kCPU), mul(x, 2.0)));
  CHECK(equal(on_gpu.to(kCPU), x));
}

EMBER_CUDA_TEST_CASE("cuda pinned memory: a freed block is reused only after its pending copies") {
  // A busy stream (tens of milliseconds of matmuls) keeps the copies below queued while the host
  // frees and pins again: a block reused too early would take the next batch before its copy ran.
  const Tensor a = randn({8192, 8192}, kCuda);
  const Tensor busy = matmul(matmul(a, a), a);
  constexpr int64_t n = 1 << 20;
  std::vector<Tensor> copies;
  std::set<void*> blocks;
  for (int i = 0; i < 32; ++i) {
    const Tensor batch = full({n}, float(i)).pin_memory();
    blocks.insert(batch.storage()->data());
    copies.push_back(batch.to(kCuda, /*non_blocking=*/true));
  }
  for (int i = 0; i < 32; ++i) CHECK_MESSAGE(equal(copies[i], full({n}, float(i), kCuda)), "batch ", i);
  // Every copy has run by now (equal waited for its result): the cache hands a block out again.
  CHECK(blocks.count(full({n}, 0.0f).pin_memory().storage()->data()) == 1);
}

EMBER_CUDA_TEST_CASE("cuda memory statistics: the peak follows a big allocation and restarts at reset") {
  backend::reset_peak_memory_stats(kCuda);
  const size_t before = backend::max_memory_allocated(kCuda);
  constexpr size_t kBytes = size_t{256} << 20;
  {
    const Tensor big = empty({int64_t(kBytes / 4)}, TensorOptions(DType::f32).with_device(kCuda));
    CHECK(backend::max_memory_allocated(kCuda) >= before + kBytes);
  }
  CHECK(backend::max_memory_allocated(kCuda) >= before + kBytes);  // freed, but still the peak
  backend::reset_peak_memory_stats(kCuda);
  CHECK(backend::max_memory_allocated(kCuda) < before + kBytes);
  CHECK_THROWS_AS(backend::max_memory_allocated(Device(DeviceType::cuda, backend::cuda_device_count())), DeviceError);
}

EMBER_CUDA_TEST_CASE("cuda memory statistics: allocated and counts follow tensors; empty_cache lowers reserved") {
  const backend::MemoryStats before = backend::memory_stats(kCuda);
  constexpr size_t kBytes = size_t{256} << 20;
  {
    const Tensor big = empty({int64_t(kBytes / 4)}, TensorOptions(DType::f32).with_device(kCuda));
    const backend::MemoryStats s = backend::memory_stats(kCuda);
    CHECK(s.allocated == before.allocated + kBytes);
    CHECK(s.allocations == before.allocations + 1);
    CHECK(s.live_allocations == before.live_allocations + 1);
    CHECK(s.reserved >= s.allocated);
    CHECK(s.peak >= s.allocated);
  }
  const backend::MemoryStats freed = backend::memory_stats(kCuda);
  CHECK(freed.allocated == before.allocated);
  CHECK(freed.allocations == before.allocations + 1);
  CHECK(freed.live_allocations == before.live_allocations);
  CHECK(freed.reserved >= kBytes);  // the pool keeps it (release threshold raised by cuda/context.cpp)
  backend::empty_cache(kCuda);
  const backend::MemoryStats trimmed = backend::memory_stats(kCuda);
  CHECK(trimmed.reserved + kBytes <= freed.reserved);
  CHECK(trimmed.reserved >= trimmed.allocated);
}

EMBER_CUDA_TEST_CASE("cuda out of memory: filling the device raises OutOfMemoryError; freeing lets work go on") {
  const backend::MemoryStats before = backend::memory_stats(kCuda);
  constexpr int64_t kChunk = int64_t{1} << 28;  // f32 elements: 1 GiB
  constexpr size_t kChunkBytes = size_t{1} << 30;
  std::vector<Tensor> held;
  bool raised = false;
  for (int i = 0; i < 4096 && !raised; ++i) {
    try {
      held.push_back(empty({kChunk}, TensorOptions(DType::f32).with_device(kCuda)));
    } catch (const OutOfMemoryError& e) {
      raised = true;
      CHECK(e.device() == kCuda);
      CHECK(e.requested() == kChunkBytes);
      CHECK(e.allocated() == before.allocated + held.size() * kChunkBytes);
      CHECK(e.reserved() >= e.allocated());
      CHECK(e.peak() >= e.allocated());
      check_message(e.what(), {"out of memory on cuda:0", "1.00 GiB", "(" + std::to_string(kChunkBytes) + " bytes)",
                               "allocated", "reserved", "free of"});
    }
  }
  REQUIRE(raised);
  CHECK_FALSE(held.empty());
  const backend::MemoryStats full_device = backend::memory_stats(kCuda);
  CHECK(full_device.num_ooms == before.num_ooms + 1);
  CHECK(full_device.num_alloc_retries >= before.num_alloc_retries + 1);  // and earlier tries that a trim served
  CHECK(full_device.live_allocations == before.live_allocations + held.size());
  held.clear();
  const Tensor again = full({kChunk}, 3.0f, TensorOptions(DType::f32).with_device(kCuda));  // the retry a program makes
  CHECK(max(again).item<float>() == 3.0f);
  CHECK(backend::memory_stats(kCuda).allocated == before.allocated + kChunkBytes);
}

EMBER_CUDA_TEST_CASE("cuda DataLoader: pin_memory gives pinned batches that copy without blocking") {
  std::vector<uint8_t> px(40);
  std::vector<int64_t> labels(10);
  for (int i = 0; i < 40; ++i) px[i] = uint8_t(i * 5);
  for (int i = 0; i < 10; ++i) labels[i] = i % 3;
  auto ds = std::make_shared<data::TensorDataset>(from_vector(px, {10, 1, 2, 2}), from_vector(labels, {10}));
  for (int workers : {0, 2}) {
    INFO("workers ", workers);
    data::DataLoader pinned(ds, {.batch_size = 4, .shuffle = true, .num_workers = workers, .pin_memory = true});
    data::DataLoader plain(ds, {.batch_size = 4, .shuffle = true, .num_workers = workers});
    CHECK(pinned.options().pin_memory);
    for (data::Batch& b : pinned) {
      const data::Batch want = *plain.next();
      CHECK(b.images.is_pinned());
      CHECK(b.labels.is_pinned());
      CHECK(equal(b.images.to(kCuda, true).to(kCPU), want.images));
      CHECK(equal(b.labels.to(kCuda, true).to(kCPU), want.labels));
    }
  }
}
