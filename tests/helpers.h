// Shared test helpers: host copies of tensors with plain index arithmetic (for references written
// as loops), deterministic input values, dtype-scaled tolerances, error checks, temporary
// directories, and the CUDA skip decorator.
#pragma once

#include <doctest/doctest.h>

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <initializer_list>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "autograd/engine.h"
#include "autograd/grad_mode.h"
#include "tensor/deterministic.h"
#include "tensor/ops.h"

namespace ember_test {

// Turns the deterministic mode on for a scope, then off, and restores the thread count it found.
struct DeterministicScope {
  int threads = ember::get_num_threads();
  explicit DeterministicScope(bool on = true) { ember::set_deterministic(on); }
  ~DeterministicScope() {
    ember::set_deterministic(false);
    ember::set_num_threads(threads);
  }
  DeterministicScope(const DeterministicScope&) = delete;
  DeterministicScope& operator=(const DeterministicScope&) = delete;
};

// A fresh temporary directory, removed at scope exit; dir / "name" is a path inside it.
struct TempDir {
  std::filesystem::path path;
  TempDir() {
    static int counter = 0;
    path = std::filesystem::temp_directory_path() /
           ("ember_test_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    std::filesystem::remove_all(path);
    std::filesystem::create_directories(path);
  }
  ~TempDir() { std::filesystem::remove_all(path); }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string operator/(const std::string& name) const { return (path / name).string(); }
};

// The message of the exception E that f must throw (a failed check, and "", otherwise).
template <class E, class F>
std::string message_of(F&& f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  } catch (const std::exception& e) {
    FAIL_CHECK("threw another exception type: ", std::string(e.what()));
    return "";
  }
  FAIL_CHECK("did not throw");
  return "";
}

// Runs f, which must throw E with a message containing every part.
template <class E, class F>
void expect_error(const std::string& what, F&& f, std::initializer_list<const char*> parts) {
  INFO(what);
  const std::string msg = message_of<E>(f);
  for (const char* p : parts)
    CHECK_MESSAGE(msg.find(p) != std::string::npos, "message '", msg, "' lacks '", std::string(p), "'");
}

using namespace ember;

// doctest prints a const char* as a pointer: pass messages through std::string.
inline std::string name(DType d) { return dtype_name(d); }

inline bool has_cuda() { return backend::cuda_device_count() > 0; }

inline const std::vector<DType> kFloats = {DType::f32, DType::f16, DType::bf16, DType::f64};
inline const std::vector<DType> kInts = {DType::i32, DType::i64, DType::u8};
inline const std::vector<DType> kNumeric = {DType::f32, DType::f16, DType::bf16, DType::f64,
                                            DType::i32, DType::i64, DType::u8};
inline const std::vector<DType> kAll = {DType::f32, DType::f16, DType::bf16, DType::f64,
                                        DType::i32, DType::i64, DType::u8,  DType::boolean};

// Tolerance of a result of dtype d: about a few units in the last place of the format.
struct Tol {
  double atol, rtol;
};
inline Tol tolerance(DType d) {
  switch (d) {
    case DType::f16: return {1e-3, 1e-3};
    case DType::bf16: return {1e-2, 1e-2};
    case DType::f32: return {1e-5, 1e-5};
    case DType::f64: return {1e-12, 1e-12};
    default: return {0, 0};  // integers and bool: exact
  }
}

inline bool close(double got, double want, Tol tol) {
  if (std::isnan(want)) return std::isnan(got);
  if (std::isinf(want)) return got == want;
  return std::fabs(got - want) <= tol.atol + tol.rtol * std::fabs(want);
}

// A host tensor: shape and row-major values as double.
struct Host {
  Shape shape;
  std::vector<double> v;
  int64_t numel() const { return static_cast<int64_t>(v.size()); }
};

inline Host to_host(const Tensor& t) { return {t.shape(), t.to_vector<double>()}; }

inline Shape unravel(int64_t flat, const Shape& shape) {
  Shape idx = Dims::filled(shape.size(), 0);
  for (int d = shape.size() - 1; d >= 0; --d) {
    idx[d] = flat % shape[d];
    flat /= shape[d];
  }
  return idx;
}
inline int64_t ravel(const Shape& idx, const Shape& shape) {
  int64_t flat = 0;
  for (int d = 0; d < shape.size(); ++d) flat = flat * shape[d] + idx[d];
  return flat;
}
// The flat index into a tensor of `in` shape that broadcasting reads for output index `idx`.
inline int64_t broadcast_index(const Shape& idx, const Shape& in) {
  const int lead = idx.size() - in.size();
  int64_t flat = 0;
  for (int d = 0; d < in.size(); ++d) flat = flat * in[d] + (in[d] == 1 ? 0 : idx[lead + d]);
  return flat;
}
inline Shape broadcast(const Shape& a, const Shape& b) { return broadcast_shapes(a, b, "test"); }

// The value a reference result takes once stored in dtype d (integers wrap, bool is nonzero).
inline double stored_as(DType d, double v) {
  if (std::isnan(v) || is_floating(d)) return v;
  switch (d) {
    case DType::i32: return static_cast<int32_t>(static_cast<int64_t>(v));
    case DType::i64: return static_cast<double>(static_cast<int64_t>(v));
    case DType::u8: return static_cast<uint8_t>(static_cast<int64_t>(v));
    case DType::boolean: return v != 0 ? 1 : 0;
    default: return v;
  }
}

// Deterministic values in [lo, hi]; `discrete` draws integers (exact in every dtype, so ties and
// equalities occur). Integer dtypes always draw integers, u8 from [max(lo, 0), max(hi, 0)] (a range
// wholly below 0 gives zeros), bool 0/1.
inline std::vector<double> random_values(int64_t n, DType d, double lo, double hi, bool discrete, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<double> v(static_cast<size_t>(n));
  if (d == DType::boolean) {
    for (auto& x : v) x = static_cast<double>(rng() & 1);
    return v;
  }
  if (d == DType::u8) {
    lo = std::max(lo, 0.0);
    hi = std::max(hi, 0.0);
  }
  if (!is_floating(d) || discrete) {
    // A range holding no integer draws the one above lo (a distribution with last < first is undefined).
    const auto first = static_cast<int64_t>(std::ceil(lo));
    std::uniform_int_distribution<int64_t> dist(first, std::max(first, static_cast<int64_t>(std::floor(hi))));
    for (auto& x : v) x = static_cast<double>(dist(rng));
  } else {
    std::uniform_real_distribution<double> dist(lo, hi);
    for (auto& x : v) x = dist(rng);
  }
  return v;
}

// A tensor of dtype d holding `values` (rounded to d), on `device`.
inline Tensor make_tensor(const std::vector<double>& values, const Shape& shape, DType d, Device device = kCPU) {
  return from_vector(values, shape).to(d).to(device);
}

// f64 values uniform in [lo, hi] (for gradcheck inputs), optionally requiring grad.
inline Tensor uniform_f64(const Shape& shape, double lo, double hi, uint64_t seed, bool requires_grad = true) {
  Tensor t = from_vector(random_values(numel(shape), DType::f64, lo, hi, false, seed), shape);
  if (requires_grad) t.requires_grad_(true);
  return t;
}

// Compares a tensor with reference values; reports the first mismatch with its index.
inline void check_values(const Tensor& got, const Host& want, Tol tol, const std::string& what) {
  INFO(what);
  if (!(got.shape() == want.shape)) {
    FAIL_CHECK("shape ", to_string(got.shape()), ", expected ", to_string(want.shape));
    return;
  }
  const std::vector<double> g = got.to_vector<double>();
  for (size_t i = 0; i < g.size(); ++i) {
    if (close(g[i], want.v[i], tol)) continue;
    FAIL_CHECK("element ", to_string(unravel(static_cast<int64_t>(i), want.shape)), ": got ", g[i], ", expected ",
               want.v[i]);
    return;
  }
  CHECK(true);
}

inline std::vector<double> values(const Tensor& t) { return t.to_vector<double>(); }

}  // namespace ember_test

// A test case that needs a GPU: in the 'cuda' suite, reported as skipped where there is none.
#define EMBER_CUDA_TEST_CASE(name) \
  TEST_CASE(name * doctest::test_suite("cuda") * doctest::skip(!ember_test::has_cuda()))
