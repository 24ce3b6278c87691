// The op-case table (ggml's test-backend-ops, tinygrad's helper_test_op): every op of tensor/ops.h
// on every dtype it supports and several input layouts (broadcast, transposed, strided, expanded,
// 0-dim, empty; channels-last for the NCHW nn ops), and the nn ops (conv2d, pooling, norms, losses,
// embedding, attention; references in tests/nn_reference.h), compared with an independent f64 reference written
// as plain loops over the inputs' values (rounded to the dtype first). The same table runs on CUDA
// when there is a GPU. It checks forward values, dtypes and devices; gradients are gradchecked on the
// CPU (conv2d's and pooling's CUDA gradients are compared with the CPU's in tests/test_nn_conv.cpp,
// the norms' and cross_entropy's in tests/test_nn_functional.cpp).
#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <numeric>
#include <optional>

#include "nn/attention.h"
#include "nn/conv.h"
#include "nn/embedding.h"
#include "nn/loss.h"
#include "nn/normalization.h"
#include "nn/pooling.h"
#include "tests/helpers.h"
#include "tests/nn_reference.h"

using namespace ember;
using namespace ember_test;

namespace {

// ---- input specs

enum class Layout { contiguous, transposed, strided, expanded, channels_last };

struct In {
  Shape shape;  // what the op sees
  Layout layout = Layout::contiguous;
  Shape base;   // expanded: the stored shape (size-1 dims where `shape` repeats)
  double lo = -2, hi = 2;
  bool discrete = false;
  std::optional<DType> dtype;  // fixed dtype (indices, masks); the row's dtype otherwise

  In range(double l, double h) const { In r = *this; r.lo = l; r.hi = h; return r; }
  In disc() const { In r = *this; r.discrete = true; return r; }
  In as(DType d) const { In r = *this; r.dtype = d; return r; }
};

In spec(Shape s, Layout layout = Layout::contiguous, Shape base = {}) {
  In r;
  r.shape = s;
  r.layout = layout;
  r.base = base;
  return r;
}
In c(Shape s) { return spec(s); }                                          // contiguous
In tr(Shape s) { return spec(s, Layout::transposed); }                     // a transposed view
In st(Shape s) { return spec(s, Layout::strided); }                        // every other row, offset 1
In ex(Shape base, Shape s) { return spec(s, Layout::expanded, base); }     // expanded from base
In cl(Shape s) { return spec(s, Layout::channels_last); }                  // NCHW shape, NHWC memory
In idx(Shape s, int64_t n) { return c(s).range(0, static_cast<double>(n - 1)).as(DType::i64); }
In mask(Shape s) { return c(s).as(DType::boolean); }

std::string describe(const In& s) {
  switch (s.layout) {
    case Layout::contiguous: return to_string(s.shape);
    case Layout::transposed: return to_string(s.shape) + "T";
    case Layout::strided: return to_string(s.shape) + "[1::2]";
    case Layout::expanded: return to_string(s.base) + "->" + to_string(s.shape);
    case Layout::channels_last: return to_string(s.shape) + "NHWC";
  }
  return "?";
}

Tensor make_input(const In& s, DType row_dtype, Device device, uint64_t seed) {
  const DType d = s.dtype.value_or(row_dtype);
  Shape stored = s.shape;
  if (s.layout == Layout::transposed) std::swap(stored[stored.size() - 1], stored[stored.size() - 2]);
  if (s.layout == Layout::strided) stored[0] = 2 * s.shape[0] + 1;
  if (s.layout == Layout::expanded) stored = s.base;
  if (s.layout == Layout::channels_last) stored = {s.shape[0], s.shape[2], s.shape[3], s.shape[1]};
  Tensor t = make_tensor(random_values(numel(stored), d, s.lo, s.hi, s.discrete, seed), stored, d, device);
  switch (s.layout) {
    case Layout::contiguous: return t;
    case Layout::transposed: return t.transpose(-1, -2);
    case Layout::strided: return slice(t, 0, 1, stored[0], 2);
    case Layout::expanded: return t.expand(s.shape);
    case Layout::channels_last: return t.permute({0, 3, 1, 2});
  }
  return t;
}

// ---- the table

using Fn = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;
using Ref = std::function<std::vector<Host>(const std::vector<Host>&)>;
using OutDType = std::function<DType(DType in, size_t output)>;

struct Case {
  std::string name;
  std::vector<DType> dtypes;
  std::vector<std::vector<In>> configs;
  Fn fn;
  Ref ref;
  OutDType out_dtype = [](DType d, size_t) { return d; };
};

template <class F>
Fn one(F f) {
  return [f](const std::vector<Tensor>& x) { return std::vector<Tensor>{f(x)}; };
}
template <class F>
Ref one_ref(F f) {
  return [f](const std::vector<Host>& x) { return std::vector<Host>{f(x)}; };
}

DType same(DType d, size_t) { return d; }
DType floating_or_f32(DType d, size_t) { return is_floating(d) ? d : DType::f32; }
DType boolean(DType, size_t) { return DType::boolean; }
DType i64_for_ints(DType d, size_t) { return is_floating(d) ? d : DType::i64; }
OutDType fixed(DType out) { return [out](DType, size_t) { return out; }; }

uint64_t seed_of(const std::string& name, size_t config, size_t input, DType d) {
  uint64_t h = 1469598103934665603ull;
  for (char ch : name) h = (h ^ static_cast<uint8_t>(ch)) * 1099511628211ull;
  return h ^ (config * 7919 + input * 104729 + static_cast<uint64_t>(d) * 1299709);
}

void run_case(const Case& c, Device device) {
  for (DType dt : c.dtypes) {
    for (size_t k = 0; k < c.configs.size(); ++k) {
      const auto& config = c.configs[k];
      std::string what = c.name + " " + dtype_name(dt) + " on " + device.str() + ", inputs";
      for (const In& s : config) what.append(1, ' ').append(describe(s));
      std::vector<Tensor> xs;
      std::vector<Host> hs;
      std::vector<Tensor> ys;
      try {
        for (size_t i = 0; i < config.size(); ++i) {
          xs.push_back(make_input(config[i], dt, device, seed_of(c.name, k, i, dt)));
          hs.push_back(to_host(xs.back()));
        }
        ys = c.fn(xs);
      } catch (const std::exception& e) {
        FAIL_CHECK(what, " threw: ", std::string(e.what()));
        continue;
      }
      const std::vector<Host> want = c.ref(hs);
      CHECK_MESSAGE(ys.size() == want.size(), what);
      for (size_t o = 0; o < std::min(ys.size(), want.size()); ++o) {
        const std::string w = what + ", output " + std::to_string(o);
        const DType expected = c.out_dtype(dt, o);
        CHECK_MESSAGE(ys[o].dtype() == expected, w, ": dtype ", name(ys[o].dtype()), ", expected ", name(expected));
        CHECK_MESSAGE(ys[o].device() == device, w, ": on ", ys[o].device().str());
        Host ref = want[o];
        for (double& v : ref.v) v = stored_as(expected, v);
        check_values(ys[o], ref, tolerance(expected), w);
      }
    }
  }
}

// ---- reference building blocks (plain loops over row-major values)

template <class F>
Host map1(const Host& x, F f) {
  Host r{x.shape, x.v};
  for (double& v : r.v) v = f(v);
  return r;
}

template <class F>
Host map2(const Host& a, const Host& b, F f) {
  Host r{broadcast(a.shape, b.shape), {}};
  r.v.resize(static_cast<size_t>(numel(r.shape)));
  for (int64_t i = 0; i < numel(r.shape); ++i) {
    const Shape at = unravel(i, r.shape);
    r.v[i] = f(a.v[broadcast_index(at, a.shape)], b.v[broadcast_index(at, b.shape)]);
  }
  return r;
}

Host where_ref(const Host& cnd, const Host& a, const Host& b) {
  Host r{broadcast(broadcast(cnd.shape, a.shape), b.shape), {}};
  r.v.resize(static_cast<size_t>(numel(r.shape)));
  for (int64_t i = 0; i < numel(r.shape); ++i) {
    const Shape at = unravel(i, r.shape);
    r.v[i] = cnd.v[broadcast_index(at, cnd.shape)] != 0 ? a.v[broadcast_index(at, a.shape)]
                                                        : b.v[broadcast_index(at, b.shape)];
  }
  return r;
}

std::vector<bool> reduced_mask(int ndim, const Shape& dims) {
  std::vector<bool> red(ndim, dims.empty());
  for (int64_t d : dims) red[d < 0 ? d + ndim : d] = true;
  return red;
}

// Each output element gets the list of its input values (reduced dims in row-major order).
template <class F>
Host reduce_ref(const Host& x, const Shape& dims, bool keepdim, F f) {
  const std::vector<bool> red = reduced_mask(x.shape.size(), dims);
  Shape out, kept;
  for (int d = 0; d < x.shape.size(); ++d) {
    if (!red[d]) out.push_back(x.shape[d]);
    kept.push_back(red[d] ? 1 : x.shape[d]);
  }
  std::vector<std::vector<double>> buckets(static_cast<size_t>(numel(kept)));
  for (int64_t i = 0; i < x.numel(); ++i) {
    Shape at = unravel(i, x.shape);
    for (int d = 0; d < at.size(); ++d)
      if (red[d]) at[d] = 0;
    buckets[ravel(at, kept)].push_back(x.v[i]);
  }
  Host r{keepdim ? kept : out, {}};
  for (auto& b : buckets) r.v.push_back(f(b));
  return r;
}

// Applies f to every 1-D line of x along dim (softmax-like ops).
template <class F>
Host along(const Host& x, int64_t dim, F f) {
  const int d = dim < 0 ? dim + x.shape.size() : dim;
  Host r = x;
  for (int64_t i = 0; i < x.numel(); ++i) {
    Shape at = unravel(i, x.shape);
    if (at[d] != 0) continue;
    std::vector<double> line;
    for (int64_t j = 0; j < x.shape[d]; ++j) {
      at[d] = j;
      line.push_back(x.v[ravel(at, x.shape)]);
    }
    const std::vector<double> out = f(line);
    for (int64_t j = 0; j < x.shape[d]; ++j) {
      at[d] = j;
      r.v[ravel(at, x.shape)] = out[j];
    }
  }
  return r;
}

Host reshape_ref(const Host& x, Shape s) { return {s, x.v}; }

Host permute_ref(const Host& x, const Shape& dims) {
  Shape s;
  for (int64_t d : dims) s.push_back(x.shape[d]);
  Host r{s, std::vector<double>(x.v.size())};
  for (int64_t i = 0; i < r.numel(); ++i) {
    const Shape at = unravel(i, s);
    Shape src = at;
    for (int k = 0; k < dims.size(); ++k) src[dims[k]] = at[k];
    r.v[i] = x.v[ravel(src, x.shape)];
  }
  return r;
}

Shape swapped_dims(int ndim, int a, int b) {
  Shape d;
  for (int i = 0; i < ndim; ++i) d.push_back(i);
  std::swap(d[a < 0 ? a + ndim : a], d[b < 0 ? b + ndim : b]);
  return d;
}

// Elements start, start + step, ... (count n) along dim.
Host slice_ref(const Host& x, int dim, int64_t start, int64_t n, int64_t step) {
  Shape s = x.shape;
  s[dim] = n;
  Host r{s, std::vector<double>(static_cast<size_t>(numel(s)))};
  for (int64_t i = 0; i < r.numel(); ++i) {
    Shape at = unravel(i, s);
    at[dim] = start + at[dim] * step;
    r.v[i] = x.v[ravel(at, x.shape)];
  }
  return r;
}

Host expand_ref(const Host& x, const Shape& s) {
  Host r{s, std::vector<double>(static_cast<size_t>(numel(s)))};
  for (int64_t i = 0; i < r.numel(); ++i) r.v[i] = x.v[broadcast_index(unravel(i, s), x.shape)];
  return r;
}

Host cat_ref(const std::vector<Host>& xs, int dim) {
  Shape s = xs[0].shape;
  s[dim] = 0;
  for (const Host& x : xs) s[dim] += x.shape[dim];
  Host r{s, std::vector<double>(static_cast<size_t>(numel(s)))};
  for (int64_t i = 0; i < r.numel(); ++i) {
    Shape at = unravel(i, s);
    size_t k = 0;
    while (at[dim] >= xs[k].shape[dim]) at[dim] -= xs[k++].shape[dim];
    r.v[i] = xs[k].v[ravel(at, xs[k].shape)];
  }
  return r;
}

std::vector<Host> split_ref(const Host& x, const std::vector<int64_t>& sizes, int dim) {
  std::vector<Host> out;
  int64_t start = 0;
  for (int64_t n : sizes) {
    out.push_back(slice_ref(x, dim, start, n, 1));
    start += n;
  }
  return out;
}

Host matmul_ref(const Host& a, const Host& b) {
  const bool a1 = a.shape.size() == 1, b1 = b.shape.size() == 1;
  const Shape as = a1 ? Shape{1, a.shape[0]} : a.shape;
  const Shape bs = b1 ? Shape{b.shape[0], 1} : b.shape;
  Shape abatch, bbatch;
  for (int d = 0; d < as.size() - 2; ++d) abatch.push_back(as[d]);
  for (int d = 0; d < bs.size() - 2; ++d) bbatch.push_back(bs[d]);
  const Shape batch = broadcast(abatch, bbatch);
  const int64_t n = as[as.size() - 2], k = as[as.size() - 1], m = bs[bs.size() - 1];
  Shape s = batch;
  if (!a1) s.push_back(n);
  if (!b1) s.push_back(m);
  Host r{s, {}};
  for (int64_t bi = 0; bi < numel(batch); ++bi) {
    const Shape at = unravel(bi, batch);
    const int64_t ia = broadcast_index(at, abatch) * n * k, ib = broadcast_index(at, bbatch) * k * m;
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < m; ++j) {
        double acc = 0;
        for (int64_t q = 0; q < k; ++q) acc += a.v[ia + i * k + q] * b.v[ib + q * m + j];
        r.v.push_back(acc);
      }
  }
  return r;
}

double sum_of(const std::vector<double>& v) { return std::accumulate(v.begin(), v.end(), 0.0); }
double max_of(const std::vector<double>& v) { return *std::max_element(v.begin(), v.end()); }
double min_of(const std::vector<double>& v) { return *std::min_element(v.begin(), v.end()); }
double argmax_of(const std::vector<double>& v) { return static_cast<double>(std::max_element(v.begin(), v.end()) - v.begin()); }
double argmin_of(const std::vector<double>& v) { return static_cast<double>(std::min_element(v.begin(), v.end()) - v.begin()); }
double var_of(const std::vector<double>& v, double correction) {
  const double m = sum_of(v) / static_cast<double>(v.size());
  double ss = 0;
  for (double x : v) ss += (x - m) * (x - m);
  return ss / std::max(static_cast<double>(v.size()) - correction, 0.0);
}

double sigmoid_ref(double x) { return 1 / (1 + std::exp(-x)); }
double gelu_ref(double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); }
double gelu_tanh_ref(double x) {
  return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
}

// ---- rows

const std::vector<std::vector<In>> kUnaryShapes = {
    {c({2, 3, 4})}, {tr({3, 5})}, {st({4, 3})}, {ex({3, 1, 4}, {3, 5, 4})}, {c({})}, {c({0, 3})}};

std::vector<std::vector<In>> ranged(std::vector<std::vector<In>> configs, double lo, double hi, bool discrete = false) {
  for (auto& cfg : configs)
    for (auto& s : cfg) {
      if (s.dtype) continue;
      s = s.range(lo, hi);
      if (discrete) s = s.disc();
    }
  return configs;
}

Case unary(const std::string& name, std::vector<DType> dtypes, Tensor (*f)(const Tensor&), double (*r)(double),
           double lo = -2, double hi = 2, OutDType out = floating_or_f32) {
  return {name, dtypes, ranged(kUnaryShapes, lo, hi), one([f](const auto& x) { return f(x[0]); }),
          one_ref([r](const auto& x) { return map1(x[0], r); }), out};
}

std::vector<Case> unary_cases() {
  std::vector<Case> v;
  // Numeric ops keep the dtype (u8 wraps under neg, as in PyTorch).
  v.push_back({"neg", kNumeric, ranged(kUnaryShapes, -5, 5), one([](const auto& x) { return neg(x[0]); }),
               one_ref([](const auto& x) { return map1(x[0], [](double a) { return -a; }); }), same});
  v.push_back({"operator-", kNumeric, ranged(kUnaryShapes, -5, 5), one([](const auto& x) { return -x[0]; }),
               one_ref([](const auto& x) { return map1(x[0], [](double a) { return -a; }); }), same});
  v.push_back({"abs", kNumeric, ranged(kUnaryShapes, -5, 5), one([](const auto& x) { return abs(x[0]); }),
               one_ref([](const auto& x) { return map1(x[0], [](double a) { return std::fabs(a); }); }), same});
  v.push_back({"sign", kNumeric, ranged(kUnaryShapes, -2, 2, true), one([](const auto& x) { return sign(x[0]); }),
               one_ref([](const auto& x) { return map1(x[0], [](double a) { return double((a > 0) - (a < 0)); }); }),
               same});
  v.push_back({"square", kNumeric, ranged(kUnaryShapes, -5, 5), one([](const auto& x) { return square(x[0]); }),
               one_ref([](const auto& x) { return map1(x[0], [](double a) { return a * a; }); }), same});
  v.push_back({"relu", kNumeric, ranged(kUnaryShapes, -3, 3, true), one([](const auto& x) { return relu(x[0]); }),
               one_ref([](const auto& x) { return map1(x[0], [](double a) { return a > 0 ? a : 0; }); }), same});
  v.push_back({"relu (continuous)", kFloats, ranged(kUnaryShapes, -3, 3), one([](const auto& x) { return relu(x[0]); }),
               one_ref([](const auto& x) { return map1(x[0], [](double a) { return a > 0 ? a : 0; }); }), same});
  v.push_back({"clamp(-1.5, 0.75)", kFloats, ranged(kUnaryShapes, -3, 3),
               one([](const auto& x) { return clamp(x[0], -1.5, 0.75); }),
               one_ref([](const auto& x) { return map1(x[0], [](double a) { return std::clamp(a, -1.5, 0.75); }); }),
               same});
  v.push_back({"clamp(min=-1)", kNumeric, ranged(kUnaryShapes, -3, 3, true),
               one([](const auto& x) { return clamp(x[0], -1.0, std::nullopt); }),
               one_ref([](const auto& x) { return map1(x[0], [](double a) { return std::max(a, -1.0); }); }), same});
  v.push_back({"clamp(max=2)", kNumeric, ranged(kUnaryShapes, -3, 5, true),
               one([](const auto& x) { return clamp(x[0], std::nullopt, 2.0); }),
               one_ref([](const auto& x) { return map1(x[0], [](double a) { return std::min(a, 2.0); }); }), same});

  // Floating ops: integer inputs compute in f32.
  v.push_back(unary("exp", kNumeric, exp, [](double a) { return std::exp(a); }, -3, 3));
  v.push_back(unary("log", kNumeric, log, [](double a) { return std::log(a); }, 0.1, 5));
  v.push_back(unary("log1p", kNumeric, log1p, [](double a) { return std::log1p(a); }, -0.9, 4));
  v.push_back(unary("sqrt", kNumeric, sqrt, [](double a) { return std::sqrt(a); }, 0, 6));
  v.push_back(unary("rsqrt", kNumeric, rsqrt, [](double a) { return 1 / std::sqrt(a); }, 0.2, 6));
  v.push_back(unary("sin", kNumeric, sin, [](double a) { return std::sin(a); }, -4, 4));
  v.push_back(unary("cos", kNumeric, cos, [](double a) { return std::cos(a); }, -4, 4));
  v.push_back(unary("tanh", kNumeric, tanh, [](double a) { return std::tanh(a); }, -3, 3));
  v.push_back(unary("sigmoid", kNumeric, sigmoid, sigmoid_ref, -5, 5));
  v.push_back(unary("gelu", kNumeric, [](const Tensor& x) { return gelu(x); }, gelu_ref, -4, 4));
  v.push_back(unary("gelu(tanh)", kNumeric, [](const Tensor& x) { return gelu(x, true); }, gelu_tanh_ref, -4, 4));
  v.push_back(unary("silu", kNumeric, silu, [](double a) { return a * sigmoid_ref(a); }, -5, 5));
  v.push_back(unary("erf", kNumeric, erf, [](double a) { return std::erf(a); }, -2.5, 2.5));
  v.push_back(unary("reciprocal", kFloats, reciprocal, [](double a) { return 1 / a; }, 0.25, 4));
  v.push_back(unary("reciprocal(int)", kInts, reciprocal, [](double a) { return 1 / a; }, 1, 9));
  for (double e : {2.0, 3.0, -1.0, 0.0}) {
    v.push_back({"pow(x, " + std::to_string(e) + ")", kFloats, ranged(kUnaryShapes, -2, 2),
                 one([e](const auto& x) { return pow(x[0], e); }),
                 one_ref([e](const auto& x) { return map1(x[0], [e](double a) { return std::pow(a, e); }); }), same});
  }
  for (double e : {0.5, 2.5, -1.5}) {
    v.push_back({"pow(x, " + std::to_string(e) + ")", kFloats, ranged(kUnaryShapes, 0.25, 3),
                 one([e](const auto& x) { return pow(x[0], e); }),
                 one_ref([e](const auto& x) { return map1(x[0], [e](double a) { return std::pow(a, e); }); }), same});
  }
  // PyTorch: an integer tensor to an integer power stays integral; a float power makes it float.
  v.push_back({"pow(int, 2)", kInts, ranged(kUnaryShapes, -3, 9), one([](const auto& x) { return pow(x[0], 2); }),
               one_ref([](const auto& x) { return map1(x[0], [](double a) { return a * a; }); }), same});
  v.push_back({"pow(int, 0.5)", kInts, ranged(kUnaryShapes, 0, 9), one([](const auto& x) { return pow(x[0], 0.5); }),
               one_ref([](const auto& x) { return map1(x[0], [](double a) { return std::sqrt(a); }); }),
               floating_or_f32});
  v.push_back({"logical_not", kAll, ranged(kUnaryShapes, -2, 2, true),
               one([](const auto& x) { return logical_not(x[0]); }),
               one_ref([](const auto& x) { return map1(x[0], [](double a) { return double(a == 0); }); }), boolean});
  return v;
}

const std::vector<std::vector<In>> kBinaryShapes = {
    {c({2, 3, 4}), c({2, 3, 4})},             // same shape
    {c({3, 1, 4}), c({2, 4})},                // broadcast both ways
    {tr({3, 4}), st({3, 4})},                 // transposed with strided
    {ex({1, 4}, {3, 4}), c({3, 4})},          // expanded with contiguous
    {c({4, 1}), c({1, 5})},                   // outer
    {c({2, 3}), c({})},                       // tensor with a 0-dim tensor
    {c({}), c({})},                           // two 0-dim tensors
    {c({0, 3}), c({3})},                      // empty
};

template <class F>
Case binary(const std::string& name, std::vector<DType> dtypes, F f, double (*r)(double, double), double lo = -3,
            double hi = 3, bool discrete = false, OutDType out = same) {
  return {name, dtypes, ranged(kBinaryShapes, lo, hi, discrete), one([f](const auto& x) { return f(x[0], x[1]); }),
          one_ref([r](const auto& x) { return map2(x[0], x[1], r); }), out};
}

std::vector<Case> binary_cases() {
  std::vector<Case> v;
  auto add_r = [](double a, double b) { return a + b; };
  auto sub_r = [](double a, double b) { return a - b; };
  auto mul_r = [](double a, double b) { return a * b; };
  auto div_r = [](double a, double b) { return a / b; };
  auto max_r = [](double a, double b) { return std::max(a, b); };
  auto min_r = [](double a, double b) { return std::min(a, b); };
  v.push_back(binary("add", kNumeric, [](const Tensor& a, const Tensor& b) { return add(a, b); }, add_r));
  v.push_back(binary("operator+", kNumeric, [](const Tensor& a, const Tensor& b) { return a + b; }, add_r));
  v.push_back(binary("sub", kNumeric, [](const Tensor& a, const Tensor& b) { return sub(a, b); }, sub_r));
  v.push_back(binary("mul", kNumeric, [](const Tensor& a, const Tensor& b) { return mul(a, b); }, mul_r));
  v.push_back(binary("div", kFloats, [](const Tensor& a, const Tensor& b) { return div(a, b); }, div_r));
  v.push_back({"div (divisor away from 0)", kFloats,
               {{c({2, 3, 4}), c({2, 3, 4}).range(0.5, 3)}, {c({3, 1, 4}), tr({2, 4}).range(-3, -0.5)}},
               one([](const auto& x) { return x[0] / x[1]; }),
               one_ref([div_r](const auto& x) { return map2(x[0], x[1], div_r); }), same});
  // Rounding modes: the quotient rounded toward zero or down; integers stay integers.
  const std::vector<std::vector<In>> divisor_away_from_0 = {
      {c({2, 3, 4}).range(-9, 9), c({2, 3, 4}).range(0.5, 3)}, {c({3, 1, 4}).range(-9, 9), tr({2, 4}).range(-3, -0.5)}};
  v.push_back({"div(trunc)", kFloats, divisor_away_from_0,
               one([](const auto& x) { return div(x[0], x[1], RoundingMode::trunc); }),
               one_ref([](const auto& x) { return map2(x[0], x[1], [](double a, double b) { return std::trunc(a / b); }); }),
               same});
  v.push_back({"div(floor)", kFloats, divisor_away_from_0,
               one([](const auto& x) { return div(x[0], x[1], RoundingMode::floor); }),
               one_ref([](const auto& x) { return map2(x[0], x[1], [](double a, double b) { return std::floor(a / b); }); }),
               same});
  const std::vector<std::vector<In>> int_divisors = {
      {c({2, 3, 4}).range(-20, 20).disc(), c({2, 3, 4}).range(1, 5).disc()},
      {c({3, 4}).range(-20, 20).disc(), c({4}).range(-5, -1).disc()}};
  v.push_back({"div(trunc) int", {DType::i32, DType::i64}, int_divisors,
               one([](const auto& x) { return div(x[0], x[1], RoundingMode::trunc); }),
               one_ref([](const auto& x) { return map2(x[0], x[1], [](double a, double b) { return std::trunc(a / b); }); }),
               same});
  v.push_back({"div(floor) int", {DType::i32, DType::i64}, int_divisors,
               one([](const auto& x) { return div(x[0], x[1], RoundingMode::floor); }),
               one_ref([](const auto& x) { return map2(x[0], x[1], [](double a, double b) { return std::floor(a / b); }); }),
               same});
  // True division: integers give f32 (x / 0 gives inf or nan, as in PyTorch).
  v.push_back(binary("div(int)", kInts, [](const Tensor& a, const Tensor& b) { return div(a, b); }, div_r, -6, 6,
                     true, fixed(DType::f32)));
  // alpha: a + alpha * b rounded once (integers take an integer alpha); rsub is b - alpha * a.
  v.push_back(binary("add(alpha=3)", kNumeric, [](const Tensor& a, const Tensor& b) { return add(a, b, 3); },
                     [](double a, double b) { return a + 3 * b; }, -3, 3, true));
  v.push_back(binary("add(alpha=0.5)", kFloats, [](const Tensor& a, const Tensor& b) { return add(a, b, 0.5); },
                     [](double a, double b) { return a + 0.5 * b; }));
  v.push_back(binary("sub(alpha=2)", kNumeric, [](const Tensor& a, const Tensor& b) { return sub(a, b, 2); },
                     [](double a, double b) { return a - 2 * b; }, -3, 3, true));
  v.push_back(binary("rsub(alpha=2)", kNumeric, [](const Tensor& a, const Tensor& b) { return rsub(a, b, 2); },
                     [](double a, double b) { return b - 2 * a; }, -3, 3, true));
  v.push_back(unary("rsub(x, 1.5, alpha=-0.25)", kFloats, [](const Tensor& a) { return rsub(a, 1.5, -0.25); },
                    [](double a) { return 1.5 + 0.25 * a; }, -3, 3));
  v.push_back({"clamp(x, min tensor, max tensor)", kNumeric,
               {{c({2, 3, 4}), c({3, 4}).range(-3, 0), c({4}).range(0, 3)}, {tr({3, 4}), c({}).range(-1, -1), st({3, 4})}},
               one([](const auto& x) { return clamp(x[0], x[1], x[2]); }),
               one_ref([](const auto& x) {
                 const Host lo = map2(x[0], x[1], [](double a, double m) { return std::max(a, m); });
                 return map2(lo, x[2], [](double a, double m) { return std::min(a, m); });
               }),
               same});
  // More than 8 dims (broadcast over 12).
  v.push_back({"add, 12 dims", kNumeric,
               {{c({2, 1, 2, 1, 2, 1, 2, 1, 2, 1, 2, 3}), c({1, 2, 1, 2, 1, 2, 1, 2, 1, 2, 1, 3})}},
               one([](const auto& x) { return x[0] + x[1]; }),
               one_ref([add_r](const auto& x) { return map2(x[0], x[1], add_r); }), same});
  v.push_back(binary("maximum", kNumeric, [](const Tensor& a, const Tensor& b) { return maximum(a, b); }, max_r, -3,
                     3, true));
  v.push_back(binary("minimum", kNumeric, [](const Tensor& a, const Tensor& b) { return minimum(a, b); }, min_r, -3,
                     3, true));
  v.push_back({"pow", kFloats, ranged(kBinaryShapes, 0.25, 2.5),
               one([](const auto& x) { return pow(x[0], x[1] - 1.25); }),
               one_ref([](const auto& x) {
                 return map2(x[0], x[1], [](double a, double b) { return std::pow(a, b - 1.25); });
               }),
               same});
  v.push_back({"pow(int)", kInts, {{c({2, 3, 4}).range(-3, 3), c({2, 3, 4}).range(0, 4)}, {c({3, 1}).range(0, 5), c({4}).range(0, 3)}},
               one([](const auto& x) { return pow(x[0], x[1]); }),
               one_ref([](const auto& x) { return map2(x[0], x[1], [](double a, double b) { return std::pow(a, b); }); }),
               same});
  const std::pair<const char*, Tensor (*)(const Tensor&, const Tensor&)> compares[] = {
      {"eq", eq}, {"ne", ne}, {"lt", lt}, {"le", le}, {"gt", gt}, {"ge", ge}};
  const std::vector<double (*)(double, double)> compare_refs = {
      [](double a, double b) { return double(a == b); }, [](double a, double b) { return double(a != b); },
      [](double a, double b) { return double(a < b); },  [](double a, double b) { return double(a <= b); },
      [](double a, double b) { return double(a > b); },  [](double a, double b) { return double(a >= b); }};
  for (size_t i = 0; i < 6; ++i) {
    auto f = compares[i].second;
    v.push_back(binary(compares[i].first, kAll, [f](const Tensor& a, const Tensor& b) { return f(a, b); },
                       compare_refs[i], -2, 2, true, boolean));
  }
  return v;
}

// Scalar forms: the number is a wrapped 0-dim tensor (an int tensor with a float scalar is f32).
std::vector<Case> scalar_cases() {
  std::vector<Case> v;
  const std::vector<std::vector<In>> shapes = {{c({2, 3})}, {tr({3, 4})}, {c({})}};
  auto row = [&](const std::string& name, std::vector<DType> dtypes, auto f, auto r, OutDType out,
                 double lo = -4, double hi = 4) {
    v.push_back({name, dtypes, ranged(shapes, lo, hi, true), one([f](const auto& x) { return f(x[0]); }),
                 one_ref([r](const auto& x) { return map1(x[0], r); }), out});
  };
  row("add(x, 2)", kNumeric, [](const Tensor& x) { return add(x, 2); }, [](double a) { return a + 2; }, same);
  row("add(x, 2.5)", kNumeric, [](const Tensor& x) { return add(x, 2.5); }, [](double a) { return a + 2.5; },
      floating_or_f32);
  row("add(bool, 1)", {DType::boolean}, [](const Tensor& x) { return add(x, 1); }, [](double a) { return a + 1; },
      fixed(DType::i64));
  row("x + 1", kNumeric, [](const Tensor& x) { return x + 1; }, [](double a) { return a + 1; }, same);
  row("sub(x, 1.5)", kNumeric, [](const Tensor& x) { return sub(x, 1.5); }, [](double a) { return a - 1.5; },
      floating_or_f32);
  row("3 - x", kNumeric, [](const Tensor& x) { return 3 - x; }, [](double a) { return 3 - a; }, same);
  row("mul(x, 3)", kNumeric, [](const Tensor& x) { return mul(x, 3); }, [](double a) { return a * 3; }, same);
  row("x * -0.5", kNumeric, [](const Tensor& x) { return x * -0.5; }, [](double a) { return a * -0.5; },
      floating_or_f32);
  row("2 * x", kNumeric, [](const Tensor& x) { return 2 * x; }, [](double a) { return 2 * a; }, same);
  row("div(x, 4)", kNumeric, [](const Tensor& x) { return div(x, 4); }, [](double a) { return a / 4; },
      floating_or_f32);
  row("x / 0.5", kNumeric, [](const Tensor& x) { return x / 0.5; }, [](double a) { return a / 0.5; },
      floating_or_f32);
  row("6 / x", kFloats, [](const Tensor& x) { return 6 / x; }, [](double a) { return 6 / a; }, same, 1, 4);
  row("maximum(x, 0.5)", kFloats, [](const Tensor& x) { return maximum(x, 0.5); },
      [](double a) { return std::max(a, 0.5); }, same);
  row("maximum(x, 1)", kNumeric, [](const Tensor& x) { return maximum(x, 1); }, [](double a) { return std::max(a, 1.0); },
      same);
  row("minimum(x, 1)", kNumeric, [](const Tensor& x) { return minimum(x, 1); },
      [](double a) { return std::min(a, 1.0); }, same);
  row("minimum(x, -1)", {DType::f32, DType::i32, DType::i64}, [](const Tensor& x) { return minimum(x, -1); },
      [](double a) { return std::min(a, -1.0); }, same);
  row("eq(x, 1)", kNumeric, [](const Tensor& x) { return eq(x, 1); }, [](double a) { return double(a == 1); }, boolean);
  row("ne(x, 1)", kNumeric, [](const Tensor& x) { return ne(x, 1); }, [](double a) { return double(a != 1); }, boolean);
  row("lt(x, 0.5)", kNumeric, [](const Tensor& x) { return lt(x, 0.5); }, [](double a) { return double(a < 0.5); },
      boolean);
  row("le(x, 1)", kNumeric, [](const Tensor& x) { return le(x, 1); }, [](double a) { return double(a <= 1); }, boolean);
  row("gt(x, 1)", kNumeric, [](const Tensor& x) { return gt(x, 1); }, [](double a) { return double(a > 1); },
      boolean);
  row("ge(x, 2)", kNumeric, [](const Tensor& x) { return ge(x, 2); }, [](double a) { return double(a >= 2); }, boolean);
  row("eq(bool, true)", {DType::boolean}, [](const Tensor& x) { return eq(x, true); },
      [](double a) { return double(a != 0); }, boolean);
  return v;
}

std::vector<Case> select_cases() {
  std::vector<Case> v;
  v.push_back({"where",
               kAll,
               {{mask({2, 3, 4}), c({2, 3, 4}), c({2, 3, 4})},
                {mask({3, 1, 4}), c({2, 4}), c({})},
                {mask({4}), tr({3, 4}), st({3, 4})},
                {mask({}), c({3}), ex({1}, {3})}},
               one([](const auto& x) { return where(x[0], x[1], x[2]); }),
               one_ref([](const auto& x) { return where_ref(x[0], x[1], x[2]); })});
  v.push_back({"masked_fill(x, m, 7)",
               kNumeric,
               {{c({2, 3, 4}), mask({2, 3, 4})}, {tr({3, 4}), mask({1, 4})}, {c({3, 2}), mask({})}},
               one([](const auto& x) { return masked_fill(x[0], x[1], 7); }),
               one_ref([](const auto& x) {
                 return map2(x[0], x[1], [](double a, double m) { return m != 0 ? 7.0 : a; });
               })});
  v.push_back({"masked_fill(x, m, 0-dim tensor)",
               kNumeric,
               {{c({2, 3, 4}), mask({3, 4}), c({})}, {tr({3, 4}), mask({1, 4}), c({})}},
               one([](const auto& x) { return masked_fill(x[0], x[1], x[2]); }),
               one_ref([](const auto& x) {
                 const double value = x[2].v[0];
                 return map2(x[0], x[1], [value](double a, double m) { return m != 0 ? value : a; });
               })});
  v.push_back({"masked_fill(x, m, -1.5)",
               kFloats,
               {{c({2, 3, 4}), mask({3, 4})}, {st({3, 4}), mask({3, 1})}},
               one([](const auto& x) { return masked_fill(x[0], x[1], -1.5); }),
               one_ref([](const auto& x) {
                 return map2(x[0], x[1], [](double a, double m) { return m != 0 ? -1.5 : a; });
               })});
  return v;
}

std::vector<Case> cast_cases() {
  std::vector<Case> v;
  for (DType to : kAll) {
    // Floats truncate toward zero into integers; u8 only from non-negative values (C++ leaves
    // negative-to-unsigned undefined); bool is "non-zero", so integers with zeros are drawn.
    const double lo = to == DType::u8 ? 0 : -5;
    const bool discrete = to == DType::boolean;
    v.push_back({std::string("to(") + dtype_name(to) + ")", kAll,
                 ranged({{c({2, 3, 4})}, {tr({3, 4})}, {st({4, 2})}, {ex({3, 1}, {3, 4})}, {c({})}}, lo, 5.9, discrete),
                 one([to](const auto& x) { return x[0].to(to); }), one_ref([](const auto& x) { return x[0]; }),
                 fixed(to)});
  }
  return v;
}

std::vector<Case> view_cases() {
  std::vector<Case> v;
  auto row = [&](const std::string& name, std::vector<std::vector<In>> configs, auto f, auto r) {
    v.push_back({name, kAll, ranged(configs, -5, 5), one([f](const auto& x) { return f(x[0]); }),
                 one_ref([r](const auto& x) { return r(x[0]); })});
  };
  row("view(4, 6)", {{c({2, 3, 4})}}, [](const Tensor& x) { return x.view({4, 6}); },
      [](const Host& x) { return reshape_ref(x, {4, 6}); });
  row("view(-1)", {{c({2, 3, 4})}, {c({})}}, [](const Tensor& x) { return x.view({-1}); },
      [](const Host& x) { return reshape_ref(x, {x.numel()}); });
  row("view(3, 2, 2) of a narrowed tensor", {{st({3, 4})}}, [](const Tensor& x) { return x.view({3, 2, 2}); },
      [](const Host& x) { return reshape_ref(x, {3, 2, 2}); });
  row("reshape(6, -1)", {{c({2, 3, 4})}, {tr({4, 6})}}, [](const Tensor& x) { return x.reshape({6, -1}); },
      [](const Host& x) { return reshape_ref(x, {6, x.numel() / 6}); });
  row("reshape(12)", {{tr({3, 4})}, {ex({3, 1}, {3, 4})}}, [](const Tensor& x) { return x.reshape({12}); },
      [](const Host& x) { return reshape_ref(x, {12}); });
  row("permute(2, 0, 1)", {{c({2, 3, 4})}, {ex({2, 1, 4}, {2, 3, 4})}},
      [](const Tensor& x) { return x.permute({2, 0, 1}); }, [](const Host& x) { return permute_ref(x, {2, 0, 1}); });
  row("permute(-1, 0, 1)", {{st({3, 2, 4})}}, [](const Tensor& x) { return permute(x, {-1, 0, 1}); },
      [](const Host& x) { return permute_ref(x, {2, 0, 1}); });
  row("transpose(0, 2)", {{c({2, 3, 4})}}, [](const Tensor& x) { return transpose(x, 0, 2); },
      [](const Host& x) { return permute_ref(x, swapped_dims(3, 0, 2)); });
  row("t()", {{c({3, 4})}, {tr({3, 4})}}, [](const Tensor& x) { return x.t(); },
      [](const Host& x) { return permute_ref(x, {1, 0}); });
  row("narrow(0, 1, 3)", {{c({5, 4})}, {tr({5, 4})}}, [](const Tensor& x) { return narrow(x, 0, 1, 3); },
      [](const Host& x) { return slice_ref(x, 0, 1, 3, 1); });
  row("narrow(-1, 2, 2)", {{c({3, 5})}}, [](const Tensor& x) { return x.narrow(-1, 2, 2); },
      [](const Host& x) { return slice_ref(x, 1, 2, 2, 1); });
  row("narrow(0, -2, 2)", {{c({5, 2})}}, [](const Tensor& x) { return narrow(x, 0, -2, 2); },
      [](const Host& x) { return slice_ref(x, 0, 3, 2, 1); });
  row("slice(0, 1, 7, 2)", {{c({7, 4})}, {tr({7, 4})}}, [](const Tensor& x) { return slice(x, 0, 1, 7, 2); },
      [](const Host& x) { return slice_ref(x, 0, 1, 3, 2); });
  row("slice(1, 0, 100, 3)", {{c({2, 7})}}, [](const Tensor& x) { return slice(x, 1, 0, 100, 3); },
      [](const Host& x) { return slice_ref(x, 1, 0, 3, 3); });
  row("slice(0, -3, 100)", {{c({5, 2})}}, [](const Tensor& x) { return slice(x, 0, -3, 100); },
      [](const Host& x) { return slice_ref(x, 0, 2, 3, 1); });
  row("slice(0, 4, 2) (empty)", {{c({5, 2})}}, [](const Tensor& x) { return slice(x, 0, 4, 2); },
      [](const Host& x) { return slice_ref(x, 0, 4, 0, 1); });
  row("slice of a slice", {{c({9, 3})}}, [](const Tensor& x) { return slice(slice(x, 0, 1, 9, 2), 0, 1, 4, 2); },
      [](const Host& x) { return slice_ref(x, 0, 3, 2, 4); });
  row("select(1, -1)", {{c({3, 4, 2})}, {st({3, 4, 2})}}, [](const Tensor& x) { return x.select(1, -1); },
      [](const Host& x) { return reshape_ref(slice_ref(x, 1, 3, 1, 1), {3, 2}); });
  row("select(0, 2)", {{c({3, 4})}, {tr({3, 4})}}, [](const Tensor& x) { return select(x, 0, 2); },
      [](const Host& x) { return reshape_ref(slice_ref(x, 0, 2, 1, 1), {4}); });
  row("expand(2, 3, 5)", {{c({3, 1})}}, [](const Tensor& x) { return x.expand({2, 3, 5}); },
      [](const Host& x) { return expand_ref(x, {2, 3, 5}); });
  row("expand(-1, 4)", {{c({3, 1})}, {st({3, 1})}}, [](const Tensor& x) { return expand(x, {-1, 4}); },
      [](const Host& x) { return expand_ref(x, {3, 4}); });
  row("broadcast_to(2, 3)", {{c({})}, {c({3})}}, [](const Tensor& x) { return broadcast_to(x, {2, 3}); },
      [](const Host& x) { return expand_ref(x, {2, 3}); });
  row("squeeze()", {{c({1, 3, 1, 2})}}, [](const Tensor& x) { return x.squeeze(); },
      [](const Host& x) { return reshape_ref(x, {3, 2}); });
  row("squeeze(2)", {{c({1, 3, 1, 2})}}, [](const Tensor& x) { return squeeze(x, 2); },
      [](const Host& x) { return reshape_ref(x, {1, 3, 2}); });
  row("squeeze(1) (not size 1)", {{c({1, 3, 1, 2})}}, [](const Tensor& x) { return squeeze(x, 1); },
      [](const Host& x) { return x; });
  row("squeeze({0, -2, 1})", {{c({1, 3, 1, 2})}}, [](const Tensor& x) { return squeeze(x, Shape{0, -2, 1}); },
      [](const Host& x) { return reshape_ref(x, {3, 2}); });
  row("squeeze({0}) of 0-dim", {{c({})}}, [](const Tensor& x) { return squeeze(x, Shape{0}); },
      [](const Host& x) { return x; });
  row("t() of 1-D and 0-D", {{c({5})}, {c({})}}, [](const Tensor& x) { return x.t(); }, [](const Host& x) { return x; });
  row("unsqueeze(0)", {{c({3, 2})}, {tr({3, 2})}}, [](const Tensor& x) { return x.unsqueeze(0); },
      [](const Host& x) { return reshape_ref(x, {1, 3, 2}); });
  row("unsqueeze(-1)", {{c({3, 2})}, {c({})}}, [](const Tensor& x) { return unsqueeze(x, -1); }, [](const Host& x) {
    Shape s = x.shape;
    s.push_back(1);
    return reshape_ref(x, s);
  });
  row("flatten()", {{c({2, 3, 4})}, {tr({3, 4})}, {c({})}}, [](const Tensor& x) { return x.flatten(); },
      [](const Host& x) { return reshape_ref(x, {x.numel()}); });
  row("flatten(1)", {{c({2, 3, 4})}, {ex({2, 1, 4}, {2, 3, 4})}}, [](const Tensor& x) { return flatten(x, 1); },
      [](const Host& x) { return reshape_ref(x, {2, 12}); });
  row("flatten(0, 1)", {{c({2, 3, 4})}}, [](const Tensor& x) { return flatten(x, 0, 1); },
      [](const Host& x) { return reshape_ref(x, {6, 4}); });
  row("contiguous", {{c({2, 3})}, {tr({3, 4})}, {st({3, 2})}, {ex({1, 4}, {3, 4})}},
      [](const Tensor& x) { return x.contiguous(); }, [](const Host& x) { return x; });
  row("clone", {{c({2, 3})}, {tr({3, 4})}}, [](const Tensor& x) { return x.clone(); }, [](const Host& x) { return x; });
  return v;
}

std::vector<Case> join_cases() {
  std::vector<Case> v;
  v.push_back({"cat(dim 0)", kAll, ranged({{c({2, 3}), c({4, 3}), c({1, 3})}, {tr({2, 3}), st({3, 3})}}, -5, 5),
               one([](const auto& x) { return cat(x, 0); }), one_ref([](const auto& x) { return cat_ref(x, 0); })});
  v.push_back({"cat(dim -1)", kAll, ranged({{c({2, 1}), c({2, 3})}, {c({2, 3, 2}), tr({2, 3, 1})}}, -5, 5),
               one([](const auto& x) { return cat(x, -1); }),
               one_ref([](const auto& x) { return cat_ref(x, static_cast<int>(x[0].shape.size()) - 1); })});
  v.push_back({"cat(dim 1) with an empty part", kAll, ranged({{c({2, 0}), c({2, 3})}}, -5, 5),
               one([](const auto& x) { return cat(x, 1); }), one_ref([](const auto& x) { return cat_ref(x, 1); })});
  v.push_back({"stack(dim 1)", kAll, ranged({{c({2, 3}), tr({2, 3}), ex({1, 3}, {2, 3})}}, -5, 5),
               one([](const auto& x) { return stack(x, 1); }), one_ref([](const auto& x) {
                 std::vector<Host> parts;
                 for (const Host& h : x) parts.push_back(reshape_ref(h, {h.shape[0], 1, h.shape[1]}));
                 return cat_ref(parts, 1);
               })});
  v.push_back({"stack(dim 0) of 0-dim", kAll, ranged({{c({}), c({}), c({})}}, -5, 5),
               one([](const auto& x) { return stack(x, 0); }), one_ref([](const auto& x) {
                 std::vector<Host> parts;
                 for (const Host& h : x) parts.push_back(reshape_ref(h, {1}));
                 return cat_ref(parts, 0);
               })});
  // pad: (before, after) pairs from the last dim; a negative amount removes, the value fills.
  for (const std::vector<int64_t>& pads : {std::vector<int64_t>{1, 2}, std::vector<int64_t>{0, 1, 2, -1},
                                           std::vector<int64_t>{-1, 2, 1, 0, 0, 1}})
    v.push_back({"pad " + to_string(Shape(pads)) + " value 3", kNumeric, ranged({{c({2, 3, 4})}, {tr({2, 3, 4})}}, -5, 5),
                 one([pads](const auto& x) { return pad(x[0], pads, 3); }), one_ref([pads](const auto& x) {
                   const Host& in = x[0];
                   Shape s = in.shape;
                   for (size_t pair = 0; pair < pads.size() / 2; ++pair)
                     s[s.size() - 1 - pair] += pads[2 * pair] + pads[2 * pair + 1];
                   Host r{s, std::vector<double>(static_cast<size_t>(numel(s)), 3.0)};
                   for (int64_t i = 0; i < r.numel(); ++i) {
                     Shape at = unravel(i, s);
                     bool inside = true;
                     for (size_t pair = 0; pair < pads.size() / 2; ++pair) {
                       const size_t d = s.size() - 1 - pair;
                       at[d] -= pads[2 * pair];
                       inside = inside && at[d] >= 0 && at[d] < in.shape[d];
                     }
                     if (inside) r.v[i] = in.v[ravel(at, in.shape)];
                   }
                   return r;
                 })});
  v.push_back({"split(3, 0)", kAll, ranged({{c({7, 3})}, {tr({7, 3})}}, -5, 5),
               [](const auto& x) { return split(x[0], 3, 0); },
               [](const auto& x) { return split_ref(x[0], {3, 3, 1}, 0); }});
  v.push_back({"split_with_sizes({1, 2}, 1)", kAll, ranged({{c({2, 3})}}, -5, 5),
               [](const auto& x) { return split_with_sizes(x[0], {1, 2}, 1); },
               [](const auto& x) { return split_ref(x[0], {1, 2}, 1); }});
  // chunk follows PyTorch: chunks of ceil(size / n), so 6 into 4 gives three chunks of 2.
  v.push_back({"chunk(2, 0)", kAll, ranged({{c({5, 4})}}, -5, 5), [](const auto& x) { return chunk(x[0], 2, 0); },
               [](const auto& x) { return split_ref(x[0], {3, 2}, 0); }});
  v.push_back({"chunk(4, 1)", kAll, ranged({{c({2, 6})}}, -5, 5), [](const auto& x) { return chunk(x[0], 4, 1); },
               [](const auto& x) { return split_ref(x[0], {2, 2, 2}, 1); }});
  return v;
}

Host index_select_ref(const Host& x, int dim, const Host& index) {
  Shape s = x.shape;
  s[dim] = index.numel();
  Host r{s, std::vector<double>(static_cast<size_t>(numel(s)))};
  for (int64_t i = 0; i < r.numel(); ++i) {
    Shape at = unravel(i, s);
    at[dim] = static_cast<int64_t>(index.v[at[dim]]);
    r.v[i] = x.v[ravel(at, x.shape)];
  }
  return r;
}

Host index_add_ref(const Host& self, int dim, const Host& index, const Host& src) {
  Host r = self;
  for (int64_t i = 0; i < src.numel(); ++i) {
    Shape at = unravel(i, src.shape);
    at[dim] = static_cast<int64_t>(index.v[at[dim]]);
    r.v[ravel(at, self.shape)] += src.v[i];
  }
  return r;
}

Host gather_ref(const Host& x, int dim, const Host& index) {
  Host r{index.shape, std::vector<double>(index.v.size())};
  for (int64_t i = 0; i < index.numel(); ++i) {
    Shape at = unravel(i, index.shape);
    at[dim] = static_cast<int64_t>(index.v[i]);
    r.v[i] = x.v[ravel(at, x.shape)];
  }
  return r;
}

Host scatter_add_ref(const Host& self, int dim, const Host& index, const Host& src) {
  Host r = self;
  for (int64_t i = 0; i < index.numel(); ++i) {
    Shape at = unravel(i, index.shape);
    const double value = src.v[ravel(at, src.shape)];
    at[dim] = static_cast<int64_t>(index.v[i]);
    r.v[ravel(at, self.shape)] += value;
  }
  return r;
}

std::vector<Case> index_cases() {
  std::vector<Case> v;
  v.push_back({"index_select(0)", kAll,
               {{c({5, 3}), idx({4}, 5)}, {tr({5, 3}), idx({7}, 5).as(DType::i32)}, {c({5}), idx({0}, 5)}},
               one([](const auto& x) { return index_select(x[0], 0, x[1]); }),
               one_ref([](const auto& x) { return index_select_ref(x[0], 0, x[1]); })});
  v.push_back({"index_select(-1)", kAll, {{c({2, 3, 4}), idx({5}, 4)}, {st({2, 4}), idx({3}, 4)}},
               one([](const auto& x) { return index_select(x[0], -1, x[1]); }),
               one_ref([](const auto& x) { return index_select_ref(x[0], x[0].shape.size() - 1, x[1]); })});
  // Duplicate indices accumulate.
  v.push_back({"index_add(0)", kNumeric,
               {{c({5, 3}), idx({6}, 3), c({6, 3})}, {tr({4, 3}), idx({2}, 4).as(DType::i32), st({2, 3})}},
               one([](const auto& x) { return index_add(x[0], 0, x[1], x[2]); }),
               one_ref([](const auto& x) { return index_add_ref(x[0], 0, x[1], x[2]); })});
  v.push_back({"index_add(1)", kNumeric, {{c({2, 4}), idx({5}, 4), c({2, 5})}},
               one([](const auto& x) { return index_add(x[0], 1, x[1], x[2]); }),
               one_ref([](const auto& x) { return index_add_ref(x[0], 1, x[1], x[2]); })});
  v.push_back({"gather(1)", kAll, {{c({3, 4}), idx({3, 6}, 4)}, {tr({3, 4}), idx({2, 2}, 4)}},
               one([](const auto& x) { return gather(x[0], 1, x[1]); }),
               one_ref([](const auto& x) { return gather_ref(x[0], 1, x[1]); })});
  v.push_back({"gather(0)", kAll, {{c({3, 4}), idx({2, 4}, 3)}, {c({3, 4, 2}), idx({5, 3, 2}, 3).as(DType::i32)}},
               one([](const auto& x) { return gather(x[0], 0, x[1]); }),
               one_ref([](const auto& x) { return gather_ref(x[0], 0, x[1]); })});
  v.push_back({"scatter_add(1)", kNumeric,
               {{c({3, 4}), idx({3, 5}, 4), c({3, 5})}, {tr({3, 4}), idx({2, 2}, 4), c({3, 3})}},
               one([](const auto& x) { return scatter_add(x[0], 1, x[1], x[2]); }),
               one_ref([](const auto& x) { return scatter_add_ref(x[0], 1, x[1], x[2]); })});
  v.push_back({"scatter_add(0)", kNumeric, {{c({3, 4}), idx({4, 4}, 3), st({4, 4})}},
               one([](const auto& x) { return scatter_add(x[0], 0, x[1], x[2]); }),
               one_ref([](const auto& x) { return scatter_add_ref(x[0], 0, x[1], x[2]); })});
  v.push_back({"index_add(0, alpha=2)", kNumeric, {{c({5, 3}), idx({6}, 5), c({6, 3})}},
               one([](const auto& x) { return index_add(x[0], 0, x[1], x[2], 2); }),
               one_ref([](const auto& x) {
                 Host twice = x[2];
                 for (double& v : twice.v) v *= 2;
                 return index_add_ref(x[0], 0, x[1], twice);
               })});
  v.push_back({"gather(1), uint8 index", kAll, {{c({3, 4}), idx({3, 6}, 4).as(DType::u8)}},
               one([](const auto& x) { return gather(x[0], 1, x[1]); }),
               one_ref([](const auto& x) { return gather_ref(x[0], 1, x[1]); })});
  // A 0-dim input is a one-element vector along dim 0 (or -1); the result is 0-dim.
  v.push_back({"index_select(0) of 0-dim", kAll, {{c({}), idx({1}, 1)}, {c({}), idx({}, 1)}},
               one([](const auto& x) { return index_select(x[0], 0, x[1]); }), one_ref([](const auto& x) { return x[0]; })});
  v.push_back({"gather(-1) of 0-dim", kAll, {{c({}), idx({}, 1)}},
               one([](const auto& x) { return gather(x[0], -1, x[1]); }), one_ref([](const auto& x) { return x[0]; })});
  v.push_back({"scatter_add(0) of 0-dim", kNumeric, {{c({}), idx({}, 1), c({})}},
               one([](const auto& x) { return scatter_add(x[0], 0, x[1], x[2]); }),
               one_ref([](const auto& x) { return Host{{}, {x[0].v[0] + x[2].v[0]}}; })});
  return v;
}

const std::vector<std::vector<In>> kReduceShapes = {
    {c({2, 3, 4})}, {tr({2, 4, 5})}, {ex({2, 1, 4}, {2, 3, 4})}};

std::vector<Case> reduce_cases() {
  std::vector<Case> v;
  struct DimsCase {
    Shape dims;
    bool keepdim;
  };
  const std::vector<DimsCase> dim_cases = {{{}, false}, {{0}, false}, {{1, 2}, true}, {{-1}, false}, {{0, 2}, false}};
  auto label = [](const std::string& op, const DimsCase& d) {
    return op + "(dims " + to_string(d.dims) + (d.keepdim ? ", keepdim)" : ")");
  };
  for (const auto& d : dim_cases) {
    v.push_back({label("sum", d), kAll, ranged(kReduceShapes, -3, 3),
                 one([d](const auto& x) { return sum(x[0], d.dims, d.keepdim); }),
                 one_ref([d](const auto& x) { return reduce_ref(x[0], d.dims, d.keepdim, sum_of); }), i64_for_ints});
    v.push_back({label("prod", d) + " of integers", {DType::i32, DType::i64, DType::u8, DType::boolean},
                 ranged({{c({3, 4, 2})}, {tr({2, 3, 3})}}, -2, 2),
                 one([d](const auto& x) { return prod(x[0], d.dims, d.keepdim); }),
                 one_ref([d](const auto& x) {
                   return reduce_ref(x[0], d.dims, d.keepdim, [](const std::vector<double>& r) {
                     return std::accumulate(r.begin(), r.end(), 1.0, std::multiplies<>());
                   });
                 }),
                 fixed(DType::i64)});
    v.push_back({label("mean", d), kFloats, ranged(kReduceShapes, -3, 3),
                 one([d](const auto& x) { return mean(x[0], d.dims, d.keepdim); }),
                 one_ref([d](const auto& x) {
                   return reduce_ref(x[0], d.dims, d.keepdim,
                                     [](const std::vector<double>& r) { return sum_of(r) / r.size(); });
                 })});
    v.push_back({label("prod", d), kFloats, ranged(kReduceShapes, 0.5, 1.6),
                 one([d](const auto& x) { return prod(x[0], d.dims, d.keepdim); }),
                 one_ref([d](const auto& x) {
                   return reduce_ref(x[0], d.dims, d.keepdim, [](const std::vector<double>& r) {
                     return std::accumulate(r.begin(), r.end(), 1.0, std::multiplies<>());
                   });
                 }),
                 i64_for_ints});
    v.push_back({label("amax", d), kNumeric, ranged(kReduceShapes, -3, 3),
                 one([d](const auto& x) { return amax(x[0], d.dims, d.keepdim); }),
                 one_ref([d](const auto& x) { return reduce_ref(x[0], d.dims, d.keepdim, max_of); })});
    v.push_back({label("amin", d), kNumeric, ranged(kReduceShapes, -3, 3),
                 one([d](const auto& x) { return amin(x[0], d.dims, d.keepdim); }),
                 one_ref([d](const auto& x) { return reduce_ref(x[0], d.dims, d.keepdim, min_of); })});
    for (double correction : {1.0, 0.0, 0.5}) {  // any real correction, as PyTorch's
      const std::string suffix = correction == 1 ? "" : ", correction " + std::to_string(correction);
      v.push_back({label("var", d) + suffix, kFloats, ranged(kReduceShapes, -3, 3),
                   one([d, correction](const auto& x) { return var(x[0], d.dims, correction, d.keepdim); }),
                   one_ref([d, correction](const auto& x) {
                     return reduce_ref(x[0], d.dims, d.keepdim,
                                       [correction](const std::vector<double>& r) { return var_of(r, correction); });
                   })});
      v.push_back({label("std", d) + suffix, kFloats, ranged(kReduceShapes, -3, 3),
                   one([d, correction](const auto& x) { return ember::std(x[0], d.dims, correction, d.keepdim); }),
                   one_ref([d, correction](const auto& x) {
                     return reduce_ref(x[0], d.dims, d.keepdim, [correction](const std::vector<double>& r) {
                       return std::sqrt(var_of(r, correction));
                     });
                   })});
    }
    if (!d.dims.empty())
      v.push_back({label("logsumexp", d), kFloats, ranged(kReduceShapes, -3, 3),
                   one([d](const auto& x) { return logsumexp(x[0], d.dims, d.keepdim); }),
                   one_ref([d](const auto& x) {
                     return reduce_ref(x[0], d.dims, d.keepdim, [](const std::vector<double>& r) {
                       const double m = max_of(r);
                       double s = 0;
                       for (double a : r) s += std::exp(a - m);
                       return m + std::log(s);
                     });
                   })});
    for (double p : {2.0, 1.0, 3.0, std::numeric_limits<double>::infinity()}) {
      v.push_back({label("norm p=" + std::to_string(p), d), kFloats, ranged(kReduceShapes, -3, 3),
                   one([d, p](const auto& x) { return norm(x[0], p, d.dims, d.keepdim); }),
                   one_ref([d, p](const auto& x) {
                     return reduce_ref(x[0], d.dims, d.keepdim, [p](const std::vector<double>& r) {
                       double acc = 0;
                       for (double a : r) acc = std::isinf(p) ? std::max(acc, std::fabs(a)) : acc + std::pow(std::fabs(a), p);
                       return std::isinf(p) ? acc : std::pow(acc, 1 / p);
                     });
                   })});
    }
  }
  v.push_back({"sum_to(3, 1)", kFloats, ranged({{c({2, 3, 4})}, {tr({2, 3, 4})}}, -3, 3),
               one([](const auto& x) { return sum_to(x[0], {3, 1}); }),
               one_ref([](const auto& x) {
                 Host r = reduce_ref(x[0], {0, 2}, false, sum_of);  // (2, 3, 4) summed down to (3, 1)
                 r.shape = {3, 1};
                 return r;
               })});
  // Values and indices along one dim; ties (discrete values) resolve to the first occurrence.
  for (int64_t dim : {0, 1, -1}) {
    for (bool keepdim : {false, true}) {
      const std::string suffix = "(dim " + std::to_string(dim) + (keepdim ? ", keepdim)" : ")");
      for (bool is_max : {true, false}) {
        v.push_back({std::string(is_max ? "max" : "min") + suffix, kNumeric, ranged(kReduceShapes, -3, 3, true),
                     [=](const auto& x) {
                       const ValuesIndices r = is_max ? max(x[0], dim, keepdim) : min(x[0], dim, keepdim);
                       return std::vector<Tensor>{r.values, r.indices};
                     },
                     [=](const auto& x) {
                       return std::vector<Host>{
                           reduce_ref(x[0], {dim}, keepdim, is_max ? max_of : min_of),
                           reduce_ref(x[0], {dim}, keepdim, is_max ? argmax_of : argmin_of)};
                     },
                     [](DType d, size_t o) { return o == 0 ? d : DType::i64; }});
        v.push_back({std::string(is_max ? "argmax" : "argmin") + suffix, kNumeric, ranged(kReduceShapes, -3, 3, true),
                     one([=](const auto& x) { return is_max ? argmax(x[0], dim, keepdim) : argmin(x[0], dim, keepdim); }),
                     one_ref([=](const auto& x) {
                       return reduce_ref(x[0], {dim}, keepdim, is_max ? argmax_of : argmin_of);
                     }),
                     fixed(DType::i64)});
      }
    }
  }
  for (bool is_max : {true, false}) {
    v.push_back({is_max ? "max()" : "min()", kNumeric, ranged(kReduceShapes, -3, 3),
                 one([=](const auto& x) { return is_max ? max(x[0]) : min(x[0]); }),
                 one_ref([=](const auto& x) { return reduce_ref(x[0], {}, false, is_max ? max_of : min_of); })});
    v.push_back({is_max ? "argmax()" : "argmin()", kNumeric, ranged(kReduceShapes, -3, 3, true),
                 one([=](const auto& x) { return is_max ? argmax(x[0]) : argmin(x[0]); }),
                 one_ref([=](const auto& x) { return reduce_ref(x[0], {}, false, is_max ? argmax_of : argmin_of); }),
                 fixed(DType::i64)});
  }
  return v;
}

// x (..., in) w^T (+ b), w (out, in): the composite matmul(x, w^T) + b as plain loops.
Host linear_ref(const std::vector<Host>& x) {
  const Host &in = x[0], &w = x[1];
  const int64_t out_features = w.shape[0], in_features = w.shape[1];
  Shape s = in.shape;
  s[s.size() - 1] = out_features;
  Host r{s, {}};
  for (int64_t row = 0; row < numel(s) / out_features; ++row)
    for (int64_t o = 0; o < out_features; ++o) {
      double acc = x.size() > 2 ? x[2].v[o] : 0.0;
      for (int64_t i = 0; i < in_features; ++i) acc += in.v[row * in_features + i] * w.v[o * in_features + i];
      r.v.push_back(acc);
    }
  return r;
}

std::vector<Case> linalg_cases() {
  std::vector<Case> v;
  auto mm_ref = one_ref([](const auto& x) { return matmul_ref(x[0], x[1]); });
  v.push_back({"mm", kFloats, ranged({{c({3, 4}), c({4, 5})}, {tr({3, 4}), tr({4, 5})}, {st({2, 3}), c({3, 1})}}, -1, 1),
               one([](const auto& x) { return mm(x[0], x[1]); }), mm_ref});
  v.push_back({"bmm", kFloats, ranged({{c({2, 3, 4}), c({2, 4, 5})}, {tr({2, 3, 4}), tr({2, 4, 5})}}, -1, 1),
               one([](const auto& x) { return bmm(x[0], x[1]); }), mm_ref});
  v.push_back({"matmul",
               kFloats,
               ranged({{c({3, 4}), c({4, 5})},
                       {c({2, 3, 4}), c({4, 5})},           // batch times matrix
                       {c({2, 1, 3, 4}), c({5, 4, 2})},     // broadcast batch dims
                       {tr({2, 3, 4}), ex({1, 4, 2}, {2, 4, 2})},
                       {c({4}), c({4, 5})},                 // vector @ matrix
                       {c({3, 4}), c({4})},                 // matrix @ vector
                       {c({4}), c({4})},                    // dot
                       {c({4}), c({2, 4, 3})},
                       {c({2, 3, 4}), c({4})},
                       {c({3, 0}), c({0, 2})}},             // empty inner dim: zeros
                      -1, 1),
               one([](const auto& x) { return matmul(x[0], x[1]); }), mm_ref});
  v.push_back({"linear", kFloats,
               ranged({{c({3, 4}), c({5, 4}), c({5})},
                       {c({2, 3, 4}), tr({5, 4}), st({5})},  // batched x, transposed w, strided bias
                       {tr({3, 4}), st({5, 4}), c({5})},
                       {c({4}), c({5, 4}), c({5})},           // 1-D x
                       {c({3, 4}), c({1, 4}), c({1})}},       // one output feature
                      -1, 1),
               one([](const auto& x) { return linear(x[0], x[1], x[2]); }), one_ref(linear_ref)});
  v.push_back({"linear, 1-D weight", kFloats, ranged({{c({3, 4}), c({4}), c({})}, {c({2, 3, 4}), st({4}), c({})}}, -1, 1),
               one([](const auto& x) { return linear(x[0], x[1], x[2]); }),
               one_ref([](const auto& x) {
                 Host w2{{1, x[1].shape[0]}, x[1].v};
                 Host r = linear_ref({x[0], w2, Host{{1}, x[2].v}});
                 r.shape.erase(r.shape.size() - 1);  // the one output feature goes
                 return r;
               })});
  v.push_back({"linear without bias", kFloats, ranged({{c({2, 3, 4}), c({5, 4})}, {st({3, 4}), tr({5, 4})}}, -1, 1),
               one([](const auto& x) { return linear(x[0], x[1]); }), one_ref(linear_ref)});
  return v;
}

std::vector<Case> softmax_cases() {
  std::vector<Case> v;
  auto sm = [](const std::vector<double>& r) {
    const double m = max_of(r);
    std::vector<double> out;
    double s = 0;
    for (double a : r) s += std::exp(a - m);
    for (double a : r) out.push_back(std::exp(a - m) / s);
    return out;
  };
  auto lsm = [](const std::vector<double>& r) {
    const double m = max_of(r);
    double s = 0;
    for (double a : r) s += std::exp(a - m);
    std::vector<double> out;
    for (double a : r) out.push_back(a - m - std::log(s));
    return out;
  };
  for (int64_t dim : {0, 1, -1}) {
    v.push_back({"softmax(dim " + std::to_string(dim) + ")", kFloats, ranged(kReduceShapes, -4, 4),
                 one([dim](const auto& x) { return softmax(x[0], dim); }),
                 one_ref([dim, sm](const auto& x) { return along(x[0], dim, sm); })});
    v.push_back({"log_softmax(dim " + std::to_string(dim) + ")", kFloats, ranged(kReduceShapes, -4, 4),
                 one([dim](const auto& x) { return log_softmax(x[0], dim); }),
                 one_ref([dim, lsm](const auto& x) { return along(x[0], dim, lsm); })});
  }
  // Large logits: the max shift must keep exp from overflowing.
  v.push_back({"softmax of large logits", {DType::f32, DType::f64}, ranged({{c({2, 5})}}, 80, 100),
               one([](const auto& x) { return softmax(x[0], -1); }),
               one_ref([sm](const auto& x) { return along(x[0], -1, sm); })});
  return v;
}

std::vector<Case> scan_cases() {
  std::vector<Case> v;
  auto running = [](bool product) {
    return [product](const std::vector<double>& r) {
      std::vector<double> out;
      double acc = product ? 1 : 0;
      for (double a : r) out.push_back(acc = product ? acc * a : acc + a);
      return out;
    };
  };
  // Rows long enough for several 32-element steps of the CUDA row kernel, and columns (inner > 1).
  const std::vector<std::vector<In>> shapes = {{c({2, 3, 4})}, {tr({2, 4, 5})}, {ex({2, 1, 4}, {2, 3, 4})},
                                               {c({3, 70})}, {c({})}, {c({0, 3})}};
  for (int64_t dim : {0, 1, -1}) {
    const auto shapes_for = [&](double lo, double hi) {
      std::vector<std::vector<In>> r = ranged(shapes, lo, hi);
      if (dim > 0) r.erase(r.begin() + 4);  // a 0-dim input takes dim 0 or -1 only
      return r;
    };
    v.push_back({"cumsum(dim " + std::to_string(dim) + ")", kAll, shapes_for(-3, 3),
                 one([dim](const auto& x) { return cumsum(x[0], dim); }),
                 one_ref([dim, running](const auto& x) {
                   return x[0].shape.empty() ? x[0] : along(x[0], dim, running(false));
                 }),
                 i64_for_ints});
    // Factors near 1 keep 70-long products in range; integers include zeros.
    v.push_back({"cumprod(dim " + std::to_string(dim) + ")", kFloats, shapes_for(0.8, 1.2),
                 one([dim](const auto& x) { return cumprod(x[0], dim); }),
                 one_ref([dim, running](const auto& x) {
                   return x[0].shape.empty() ? x[0] : along(x[0], dim, running(true));
                 })});
    v.push_back({"cumprod(dim " + std::to_string(dim) + ") of integers", {DType::i32, DType::i64, DType::boolean},
                 ranged({{c({3, 4, 2})}, {tr({2, 3, 3})}}, -2, 2),
                 one([dim](const auto& x) { return cumprod(x[0], dim); }),
                 one_ref([dim, running](const auto& x) { return along(x[0], dim, running(true)); }), fixed(DType::i64)});
  }
  v.push_back({"cumsum(dtype f64)", kAll, ranged({{c({3, 5})}}, -3, 3),
               one([](const auto& x) { return cumsum(x[0], 1, DType::f64); }),
               one_ref([running](const auto& x) { return along(x[0], 1, running(false)); }), fixed(DType::f64)});
  return v;
}

// ---- nn ops (references: tests/nn_reference.h). Parameters that are not tensors are fixed per row.

std::vector<int64_t> as_ints(const Host& h) { return std::vector<int64_t>(h.v.begin(), h.v.end()); }
std::vector<double> maybe(const std::vector<Host>& x, size_t i) { return i < x.size() ? x[i].v : std::vector<double>{}; }

using ref::P2;

std::vector<Case> conv_cases() {
  std::vector<Case> v;
  struct Conv {
    std::string label;
    Shape x, w;
    P2 stride, padding, dilation;
    int64_t groups;
    bool bias;
    bool same = false;  // PaddingMode::same (padding unused)
  };
  const std::vector<Conv> convs = {
      {"conv2d", {2, 3, 6, 6}, {4, 3, 3, 3}, {1, 1}, {0, 0}, {1, 1}, 1, false},
      {"conv2d stride (2, 1) padding (1, 0) bias", {2, 3, 8, 6}, {5, 3, 3, 2}, {2, 1}, {1, 0}, {1, 1}, 1, true},
      {"conv2d groups 2 dilation (2, 1) padding (2, 1) stride (1, 2) bias", {2, 4, 9, 9}, {6, 2, 3, 3}, {1, 2},
       {2, 1}, {2, 1}, 2, true},
      {"conv2d depthwise padding 1", {2, 6, 5, 7}, {6, 1, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 6, false},
      {"conv2d depthwise x2 stride 2 dilation 2 bias", {1, 4, 6, 5}, {8, 1, 2, 3}, {2, 2}, {1, 1}, {2, 2}, 4, true},
      {"conv2d 1x1 bias", {2, 8, 4, 5}, {4, 8, 1, 1}, {1, 1}, {0, 0}, {1, 1}, 1, true},
      {"conv2d padding same, kernel (2, 4): the odd element after", {2, 3, 5, 6}, {4, 3, 2, 4}, {1, 1}, {}, {1, 1}, 1,
       false, true},
      {"conv2d padding same, kernel (3, 2) dilation (2, 3) groups 2 bias", {1, 4, 7, 6}, {6, 2, 3, 2}, {1, 1}, {},
       {2, 3}, 2, true, true},
      {"conv2d padding same, kernel 3: symmetric", {2, 3, 5, 4}, {2, 3, 3, 3}, {1, 1}, {}, {1, 1}, 1, true, true},
  };
  for (const Conv& k : convs) {
    auto inputs = [&](In x) {
      std::vector<In> r = {x.range(-1, 1), c(k.w).range(-1, 1)};
      if (k.bias) r.push_back(c({k.w[0]}).range(-1, 1));
      return r;
    };
    v.push_back({k.label, kFloats, {inputs(c(k.x)), inputs(cl(k.x)), inputs(st(k.x))},
                 one([k](const auto& x) {
                   const Tensor bias = k.bias ? x[2] : Tensor();
                   return k.same ? conv2d(x[0], x[1], bias, k.stride, PaddingMode::same, k.dilation, k.groups)
                                 : conv2d(x[0], x[1], bias, k.stride, k.padding, k.dilation, k.groups);
                 }),
                 one_ref([k](const auto& x) {
                   const std::vector<double> b = maybe(x, 2);
                   P2 padding = k.padding, after{0, 0};
                   if (k.same)
                     for (int i = 0; i < 2; ++i) {
                       const int64_t total = k.dilation[i] * (k.w[2 + i] - 1);
                       padding[i] = total / 2;
                       after[i] = total % 2;
                     }
                   return ref::conv2d(x[0], x[1], k.bias ? &b : nullptr, k.stride, padding, k.dilation, k.groups, after);
                 })});
  }
  return v;
}

std::vector<Case> pool_cases() {
  std::vector<Case> v;
  struct Pool {
    std::string label;
    Shape x;
    P2 k, s, p, d;
    bool ceil_mode;
  };
  const std::vector<Pool> pools = {
      {"k 2 s 2", {2, 3, 8, 8}, {2, 2}, {2, 2}, {0, 0}, {1, 1}, false},
      {"k 3 s 2 p 1", {1, 2, 7, 9}, {3, 3}, {2, 2}, {1, 1}, {1, 1}, false},
      {"k (3, 2) s (2, 3) p 1 ceil_mode", {1, 2, 7, 9}, {3, 2}, {2, 3}, {1, 1}, {1, 1}, true},
      {"k 3 s (1, 2) p (1, 0) dilation (2, 1)", {3, 1, 10, 6}, {3, 3}, {1, 2}, {1, 0}, {2, 1}, false},
      {"k 2 s 2 p 1 ceil_mode", {1, 1, 5, 5}, {2, 2}, {2, 2}, {1, 1}, {1, 1}, true},
  };
  for (const Pool& k : pools) {
    const std::vector<std::vector<In>> layouts = {{c(k.x)}, {cl(k.x)}, {st(k.x)}};
    v.push_back({"max_pool2d_with_indices " + k.label, kFloats, layouts,
                 [k](const auto& x) {
                   const ValuesIndices r = max_pool2d_with_indices(x[0], k.k, k.s, k.p, k.d, k.ceil_mode);
                   return std::vector<Tensor>{r.values, r.indices};
                 },
                 [k](const auto& x) {
                   const ref::Pool r = ref::pool2d(x[0], k.k, k.s, k.p, k.d, k.ceil_mode, true, true);
                   return std::vector<Host>{r.values, {r.values.shape, r.indices}};
                 },
                 [](DType d, size_t o) { return o == 0 ? d : DType::i64; }});
    v.push_back({"max_pool2d " + k.label, kFloats, layouts,
                 one([k](const auto& x) { return max_pool2d(x[0], k.k, k.s, k.p, k.d, k.ceil_mode); }),
                 one_ref([k](const auto& x) { return ref::pool2d(x[0], k.k, k.s, k.p, k.d, k.ceil_mode, true, true).values; })});
    if (k.d[0] != 1 || k.d[1] != 1) continue;
    for (bool include : {true, false})
      v.push_back({"avg_pool2d " + k.label + (include ? "" : " count_include_pad=false"), kFloats, layouts,
                   one([k, include](const auto& x) { return avg_pool2d(x[0], k.k, k.s, k.p, k.ceil_mode, include); }),
                   one_ref([k, include](const auto& x) {
                     return ref::pool2d(x[0], k.k, k.s, k.p, {1, 1}, k.ceil_mode, false, include).values;
                   })});
    v.push_back({"avg_pool2d " + k.label + " divisor_override 5", kFloats, layouts,
                 one([k](const auto& x) { return avg_pool2d(x[0], k.k, k.s, k.p, k.ceil_mode, true, 5); }),
                 one_ref([k](const auto& x) {
                   return ref::pool2d(x[0], k.k, k.s, k.p, {1, 1}, k.ceil_mode, false, true, 5).values;
                 })});
  }
  for (const auto& [xs, os] : std::vector<std::pair<Shape, P2>>{
           {{2, 3, 7, 5}, {3, 2}}, {{1, 2, 4, 4}, {1, 1}}, {{1, 1, 5, 3}, {7, 4}}, {{2, 2, 8, 8}, {4, 4}}})
    v.push_back({"adaptive_avg_pool2d to " + std::to_string(os[0]) + "x" + std::to_string(os[1]), kFloats,
                 {{c(xs)}, {cl(xs)}, {st(xs)}},
                 one([os](const auto& x) { return adaptive_avg_pool2d(x[0], os); }),
                 one_ref([os](const auto& x) { return ref::adaptive_avg_pool2d(x[0], os); })});
  return v;
}

// Batch norm of x (N, C, ...) with the table's inputs x, running_mean, running_var, weight, bias.
std::vector<Host> batch_norm_ref(const std::vector<Host>& x, bool training, bool affine, double momentum, double eps) {
  const Shape& s = x[0].shape;
  const int64_t N = s[0], C = s[1], S = x[0].numel() / (N * C);
  const std::vector<double> w = affine ? x[3].v : std::vector<double>(C, 1.0);
  const std::vector<double> b = affine ? x[4].v : std::vector<double>(C, 0.0);
  if (!training) return {{s, ref::batch_norm(x[0].v, N, C, S, x[1].v, x[2].v, w, b, eps)}};
  const ref::Stats st = ref::channel_stats(x[0].v, N, C, S);
  const Host y{s, ref::batch_norm(x[0].v, N, C, S, st.mean, st.var, w, b, eps)};
  if (x.size() < 3) return {y};
  std::vector<double> m = x[1].v, var = x[2].v;
  ref::update_running(m, var, st, N * S, momentum);
  return {y, {{C}, m}, {{C}, var}};
}

std::vector<Case> norm_cases() {
  std::vector<Case> v;
  auto bn_inputs = [](In x, int64_t C, std::optional<DType> pd) {
    std::vector<In> r = {x.range(-3, 3), c({C}).range(-1, 1), c({C}).range(0.5, 2), c({C}).range(-2, 2),
                         c({C}).range(-1, 1)};
    if (pd)
      for (size_t i = 1; i < r.size(); ++i) r[i] = r[i].as(*pd);
    return r;
  };
  auto bn_configs = [&](std::optional<DType> pd) {
    return std::vector<std::vector<In>>{bn_inputs(c({4, 3, 2, 3}), 3, pd), bn_inputs(cl({4, 3, 2, 3}), 3, pd),
                                        bn_inputs(st({2, 3, 3, 2}), 3, pd), bn_inputs(c({5, 3}), 3, pd),
                                        bn_inputs(tr({2, 4, 3}), 4, pd)};
  };
  for (bool training : {true, false}) {
    const std::string mode = training ? "training" : "eval";
    auto fn = [training](const std::vector<Tensor>& x) {
      const Tensor y = batch_norm(x[0], x[1], x[2], x[3], x[4], training, 0.1, 1e-5);
      return training ? std::vector<Tensor>{y, x[1], x[2]} : std::vector<Tensor>{y};  // running stats updated in place
    };
    auto r = [training](const std::vector<Host>& x) { return batch_norm_ref(x, training, true, 0.1, 1e-5); };
    v.push_back({"batch_norm " + mode, kFloats, bn_configs({}), fn, r});
    // 16-bit input with f32 weight, bias and statistics
    v.push_back({"batch_norm " + mode + ", f32 parameters", {DType::f16, DType::bf16}, bn_configs(DType::f32), fn, r,
                 [](DType d, size_t o) { return o == 0 ? d : DType::f32; }});
  }
  v.push_back({"batch_norm training, no affine, no running statistics", kFloats,
               {{c({4, 3, 2, 3}).range(-3, 3)}, {cl({2, 3, 3, 2}).range(-3, 3)}},
               one([](const auto& x) { return batch_norm(x[0], {}, {}, {}, {}, true); }),
               [](const auto& x) { return batch_norm_ref(x, true, false, 0.1, 1e-5); }});
  for (const Shape& ns : {Shape{5}, Shape{4, 5}}) {
    const std::vector<std::vector<In>> configs = {{c({3, 4, 5}).range(-3, 3), c(ns), c(ns)},
                                                  {tr({3, 4, 5}).range(-3, 3), c(ns), c(ns)},
                                                  {st({2, 4, 5}).range(-3, 3), ns.size() == 2 ? tr(ns) : st(ns), c(ns)}};
    const int64_t D = numel(ns);
    v.push_back({"layer_norm over " + to_string(ns), kFloats, configs,
                 one([ns](const auto& x) { return layer_norm(x[0], ns, x[1], x[2]); }),
                 one_ref([D](const auto& x) { return Host{x[0].shape, ref::layer_norm(x[0].v, D, x[1].v, x[2].v)}; })});
    v.push_back({"layer_norm over " + to_string(ns) + ", no affine", kFloats,
                 {{c({3, 4, 5}).range(-3, 3)}, {tr({3, 4, 5}).range(-3, 3)}},
                 one([ns](const auto& x) { return layer_norm(x[0], ns); }),
                 one_ref([D](const auto& x) { return Host{x[0].shape, ref::layer_norm(x[0].v, D, {}, {})}; })});
  }
  v.push_back({"layer_norm over (5), f32 parameters", {DType::f16, DType::bf16},
               {{c({3, 4, 5}).range(-3, 3), c({5}).as(DType::f32), c({5}).as(DType::f32)}},
               one([](const auto& x) { return layer_norm(x[0], {5}, x[1], x[2]); }),
               one_ref([](const auto& x) { return Host{x[0].shape, ref::layer_norm(x[0].v, 5, x[1].v, x[2].v)}; })});
  return v;
}

// Targets in [-1, n - 1]: with ignore_index -1 some are ignored.
In targets(Shape s, int64_t n) { return c(s).range(-1, static_cast<double>(n - 1)).as(DType::i64); }

std::vector<Case> loss_cases() {
  std::vector<Case> v;
  // logits (N, C, d...) and targets (N, d...) for class losses
  const std::vector<std::vector<In>> class_configs = {
      {c({6, 5}), targets({6}, 5)},
      {tr({6, 5}), targets({6}, 5).as(DType::i32)},
      {c({2, 3, 2, 2}), targets({2, 2, 2}, 3)},
      {st({3, 4, 3}), targets({3, 3}, 4)},
  };
  // The same with a class weight in [0.5, 2] as a third input.
  std::vector<std::vector<In>> weighted_configs = ranged(class_configs, -3, 3);
  for (auto& cfg : weighted_configs) cfg.push_back(c({cfg[0].shape[1]}).range(0.5, 2));
  auto class_ref = [](const std::vector<Host>& x, const std::string& reduction, int64_t ignore, double eps, bool ce) {
    const Shape& s = x[0].shape;
    const int64_t N = s[0], C = s[1], S = x[0].numel() / (N * C);
    const std::vector<int64_t> t = as_ints(x[1]);
    const std::vector<double> w = x.size() > 2 ? x[2].v : std::vector<double>{};
    const std::vector<double> loss =
        ce ? ref::cross_entropy(x[0].v, t, N, C, S, ignore, eps, w) : ref::nll_loss(x[0].v, t, N, C, S, ignore, w);
    return ref::reduce_loss(loss, x[1].shape, reduction, t, ignore, w);
  };
  // Logits and class probabilities of one shape ((C) unbatched), [optional weight]: "mean" divides
  // by the positions.
  const std::vector<std::vector<In>> probability_configs = {
      {c({6, 5}).range(-3, 3), c({6, 5}).range(0, 1)},
      {tr({6, 5}).range(-3, 3), st({6, 5}).range(0, 1)},
      {c({2, 3, 2, 2}).range(-3, 3), c({2, 3, 2, 2}).range(0, 1), c({3}).range(0.5, 2)},
      {c({4}).range(-3, 3), c({4}).range(0, 1), c({4}).range(0.5, 2)},
  };
  auto probability_ref = [](const std::vector<Host>& x, const std::string& reduction, double eps) {
    const bool unbatched = x[0].shape.size() == 1;
    const int64_t N = unbatched ? 1 : x[0].shape[0], C = unbatched ? x[0].shape[0] : x[0].shape[1];
    const int64_t S = x[0].numel() / (N * C);
    const std::vector<double> loss =
        ref::cross_entropy_probabilities(x[0].v, x[1].v, N, C, S, eps, x.size() > 2 ? x[2].v : std::vector<double>{});
    if (reduction == "none") {  // the logits' shape without the class dim
      Shape s = x[0].shape;
      s.erase(unbatched ? 0 : 1);
      return Host{s, loss};
    }
    double total = 0;
    for (const double l : loss) total += l;
    return Host{{}, {reduction == "sum" ? total : total / static_cast<double>(N * S)}};
  };
  for (const std::string reduction : {"none", "sum", "mean"}) {
    for (double eps : {0.0, 0.1})
      v.push_back({"cross_entropy " + reduction + " ignore_index -1 label_smoothing " + std::to_string(eps), kFloats,
                   ranged(class_configs, -3, 3),
                   one([=](const auto& x) { return cross_entropy(x[0], x[1], reduction, -1, eps); }),
                   one_ref([=](const auto& x) { return class_ref(x, reduction, -1, eps, true); })});
    // ignore_index naming a real class
    v.push_back({"cross_entropy " + reduction + " ignore_index 2 label_smoothing 0.2", kFloats,
                 ranged({{c({6, 5}), idx({6}, 5)}}, -3, 3),
                 one([=](const auto& x) { return cross_entropy(x[0], x[1], reduction, 2, 0.2); }),
                 one_ref([=](const auto& x) { return class_ref(x, reduction, 2, 0.2, true); })});
    v.push_back({"nll_loss " + reduction + " ignore_index -1", kFloats, ranged(class_configs, -3, 0),
                 one([=](const auto& x) { return nll_loss(x[0], x[1], reduction, -1); }),
                 one_ref([=](const auto& x) { return class_ref(x, reduction, -1, 0, false); })});
    for (double eps : {0.0, 0.1})
      v.push_back({"cross_entropy " + reduction + " weight, ignore_index -1 label_smoothing " + std::to_string(eps),
                   kFloats, weighted_configs,
                   one([=](const auto& x) { return cross_entropy(x[0], x[1], reduction, -1, eps, x[2]); }),
                   one_ref([=](const auto& x) { return class_ref(x, reduction, -1, eps, true); })});
    v.push_back({"nll_loss " + reduction + " weight, ignore_index -1", kFloats, weighted_configs,
                 one([=](const auto& x) { return nll_loss(x[0], x[1], reduction, -1, x[2]); }),
                 one_ref([=](const auto& x) { return class_ref(x, reduction, -1, 0, false); })});
    for (double eps : {0.0, 0.2})
      v.push_back({"cross_entropy " + reduction + " class probabilities, label_smoothing " + std::to_string(eps),
                   kFloats, probability_configs, one([=](const auto& x) {
                     return cross_entropy(x[0], x[1], reduction, -100, eps, x.size() > 2 ? x[2] : Tensor());
                   }),
                   one_ref([=](const auto& x) { return probability_ref(x, reduction, eps); })});
  }
  return v;
}

// Composites of table ops: they run on CUDA too.
std::vector<Case> composite_nn_cases() {
  std::vector<Case> v;
  for (const std::string reduction : {"none", "sum", "mean"})
    v.push_back({"mse_loss " + reduction, kFloats,
                 ranged({{c({2, 3}), c({3})}, {tr({3, 4}), st({3, 4})}, {ex({1, 4}, {3, 4}), c({3, 1})}}, -2, 2),
                 one([reduction](const auto& x) { return mse_loss(x[0], x[1], reduction); }),
                 one_ref([reduction](const auto& x) {
                   const Host e = ref::squared_error(x[0], x[1]);
                   if (reduction == "none") return e;
                   return Host{{}, {sum_of(e.v) / (reduction == "mean" ? static_cast<double>(e.numel()) : 1.0)}};
                 })});
  v.push_back({"embedding", kFloats, {{c({5, 3}), idx({2, 3}, 5)}, {tr({5, 3}), idx({4}, 5).as(DType::i32)}, {st({5, 2}), idx({}, 5)}},
               one([](const auto& x) { return embedding(x[0], x[1]); }),
               one_ref([](const auto& x) { return ref::embedding(x[0], x[1]); })});
  v.push_back({"embedding padding_idx 1", kFloats, {{c({5, 3}), idx({7}, 5)}},
               one([](const auto& x) { return embedding(x[0], x[1], 1); }),
               one_ref([](const auto& x) { return ref::embedding(x[0], x[1]); })});
  return v;
}

// scaled_dot_product_attention: the fused primitive on the CPU, its composition on CUDA.
std::vector<Case> attention_cases() {
  std::vector<Case> v;
  v.push_back({"scaled_dot_product_attention", kFloats,
               {{c({2, 3, 5, 4}), c({2, 3, 7, 4}), c({2, 3, 7, 3})},
                {tr({3, 6, 4}), c({3, 9, 4}), st({3, 9, 2})},
                {c({4, 2}), c({1, 2}), c({1, 5})},
                {c({0, 6, 4}), c({0, 3, 4}), c({0, 3, 2})}},
               one([](const auto& x) { return scaled_dot_product_attention(x[0], x[1], x[2]); }),
               one_ref([](const auto& x) { return ref::attention(x[0], x[1], x[2], nullptr, false); })});
  v.push_back({"scaled_dot_product_attention causal", kFloats,
               {{c({2, 9, 4}), c({2, 6, 4}), c({2, 6, 5})}, {c({2, 4, 3}), c({2, 8, 3}), c({2, 8, 3})}},
               one([](const auto& x) { return scaled_dot_product_attention(x[0], x[1], x[2], {}, 0.0, true); }),
               one_ref([](const auto& x) { return ref::attention(x[0], x[1], x[2], nullptr, true); })});
  v.push_back({"scaled_dot_product_attention bool mask", kFloats,
               {{c({2, 5, 4}), c({2, 7, 4}), c({2, 7, 3}), mask({5, 7})}},
               one([](const auto& x) { return scaled_dot_product_attention(x[0], x[1], x[2], x[3]); }),
               one_ref([](const auto& x) { return ref::attention(x[0], x[1], x[2], &x[3], false); })});
  return v;
}

void run_all(const std::vector<Case>& cases, Device device) {
  for (const Case& c : cases) run_case(c, device);
}

// ---- extremal inputs: NaN, +-inf, +-0, the dtype's largest value, its smallest normal one and a
// subnormal, through every elementwise op and reduction, forward and backward, against the same op
// in f64 on the same (rounded) values, rounded back to the dtype. The f32 and 16-bit kernels (the
// CPU's vector paths and the CUDA kernels among them) must give the special values f64 gives.

std::vector<double> extremal_values(DType d, bool with_largest) {
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  const double largest = d == DType::f16 ? 65504 : d == DType::bf16 ? 0x1.fep127 : d == DType::f32 ? 0x1.fffffep127 : 0x1p1000;
  const double tiny = d == DType::f16 ? 0x1p-14 : d == DType::f64 ? 0x1p-1022 : 0x1p-126;
  std::vector<double> v = {nan, inf, -inf, 0.0, -0.0, tiny, -tiny, tiny / 4, 1, -1, 0.5, -2.5, 3};
  if (with_largest) v.insert(v.end(), {largest, -largest});
  return v;
}

// values(t) with each f64 value rounded to dtype d first: what a dtype-d result holding it reads.
std::vector<double> rounded_to(const Tensor& t, DType d) { return values(t.detach().to(d)); }

struct ExtremalOp {
  std::string name;
  std::function<Tensor(const std::vector<Tensor>&)> f;
  int inputs;           // 1 or 2 (the second is the first's values in another order)
  bool with_largest;    // reductions leave out the largest values: their sums overflow the dtype (tested at scale elsewhere)
  bool differentiable;
};

std::vector<ExtremalOp> extremal_ops() {
  using V = const std::vector<Tensor>&;
  std::vector<ExtremalOp> ops;
  auto unary = [&](const std::string& name, Tensor (*f)(const Tensor&)) {
    ops.push_back({name, [f](V x) { return f(x[0]); }, 1, true, true});
  };
  unary("neg", neg), unary("abs", abs), unary("square", square), unary("relu", relu), unary("exp", exp);
  unary("log", log), unary("log1p", log1p), unary("sqrt", sqrt), unary("rsqrt", rsqrt), unary("sin", sin);
  unary("cos", cos), unary("tanh", tanh), unary("sigmoid", sigmoid), unary("silu", silu), unary("erf", erf);
  unary("reciprocal", reciprocal);
  ops.push_back({"sign", [](V x) { return sign(x[0]); }, 1, true, false});
  ops.push_back({"gelu", [](V x) { return gelu(x[0]); }, 1, true, true});
  ops.push_back({"gelu tanh", [](V x) { return gelu(x[0], true); }, 1, true, true});
  ops.push_back({"clamp(-1, 2)", [](V x) { return clamp(x[0], -1.0, 2.0); }, 1, true, true});
  ops.push_back({"pow(x, 2.5)", [](V x) { return pow(x[0], 2.5); }, 1, true, true});
  ops.push_back({"pow(x, -1)", [](V x) { return pow(x[0], -1); }, 1, true, true});
  ops.push_back({"add", [](V x) { return x[0] + x[1]; }, 2, true, true});
  ops.push_back({"sub", [](V x) { return x[0] - x[1]; }, 2, true, true});
  ops.push_back({"mul", [](V x) { return x[0] * x[1]; }, 2, true, true});
  ops.push_back({"div", [](V x) { return x[0] / x[1]; }, 2, true, true});
  ops.push_back({"pow", [](V x) { return pow(x[0], x[1]); }, 2, true, true});
  ops.push_back({"maximum", [](V x) { return maximum(x[0], x[1]); }, 2, true, true});
  ops.push_back({"minimum", [](V x) { return minimum(x[0], x[1]); }, 2, true, true});
  ops.push_back({"div(floor)", [](V x) { return div(x[0], x[1], RoundingMode::floor); }, 2, true, false});
  ops.push_back({"lt", [](V x) { return lt(x[0], x[1]).to(DType::f32); }, 2, true, false});
  ops.push_back({"eq", [](V x) { return eq(x[0], x[1]).to(DType::f32); }, 2, true, false});
  // Reductions over rows of a (3, n) matrix: each row its own mix of the values.
  ops.push_back({"sum(dim 1)", [](V x) { return sum(x[0], {1}); }, 1, false, true});
  ops.push_back({"mean(dim 1)", [](V x) { return mean(x[0], {1}); }, 1, false, true});
  ops.push_back({"prod(dim 1)", [](V x) { return prod(x[0], {1}); }, 1, false, true});
  ops.push_back({"amax(dim 1)", [](V x) { return amax(x[0], {1}); }, 1, false, true});
  ops.push_back({"amin(dim 1)", [](V x) { return amin(x[0], {1}); }, 1, false, true});
  ops.push_back({"var(dim 1)", [](V x) { return var(x[0], {1}); }, 1, false, true});
  ops.push_back({"std(dim 1)", [](V x) { return ember::std(x[0], {1}); }, 1, false, true});
  ops.push_back({"norm(dim 1)", [](V x) { return norm(x[0], 2.0, {1}); }, 1, false, true});
  ops.push_back({"logsumexp(dim 1)", [](V x) { return logsumexp(x[0], {1}); }, 1, false, true});
  ops.push_back({"softmax(dim 1)", [](V x) { return softmax(x[0], 1); }, 1, false, true});
  ops.push_back({"log_softmax(dim 1)", [](V x) { return log_softmax(x[0], 1); }, 1, false, true});
  return ops;
}

void check_extremal(Device device) {
  for (const ExtremalOp& op : extremal_ops())
    for (DType d : {DType::f32, DType::f16, DType::bf16}) {
      // Three rows, each the values in another order, so that elementwise kernels see them in
      // their vector blocks and tails and each reduction row mixes them differently.
      const std::vector<double> base = extremal_values(d, op.with_largest);
      const int64_t n = static_cast<int64_t>(base.size());
      std::vector<double> a, b;
      for (int64_t r = 0; r < 3; ++r)
        for (int64_t i = 0; i < n; ++i) {
          a.push_back(base[(i * (r + 1) + r) % n]);
          b.push_back(base[(i * (r + 2) + 3) % n]);
        }
      auto inputs = [&](DType dt) {
        std::vector<Tensor> x{make_tensor(a, {3, n}, d, device).to(dt).detach().requires_grad_(op.differentiable)};
        if (op.inputs == 2) x.push_back(make_tensor(b, {3, n}, d, device).to(dt).detach().requires_grad_(op.differentiable));
        return x;
      };
      const std::vector<Tensor> x = inputs(d), x64 = inputs(DType::f64);
      const Tensor y = op.f(x), y64 = op.f(x64);
      const std::string what = op.name + " " + name(d) + " on " + device.str() + " at NaN, inf, 0, range edges";
      check_values(y, Host{y64.shape(), rounded_to(y64, y.dtype())}, tolerance(y.dtype()), what + ", forward");
      if (!op.differentiable) continue;
      // A cotangent with no special values: the gradients' own are the inputs'.
      const Tensor g64 = from_vector(random_values(y64.numel(), DType::f64, 0.5, 1.5, false, 5), y64.shape()).to(device);
      y.backward(g64.to(y.dtype()));
      y64.backward(g64.to(y.dtype()).to(DType::f64));
      for (size_t i = 0; i < x.size(); ++i)
        check_values(x[i].grad(), Host{x64[i].shape(), rounded_to(x64[i].grad(), d)}, tolerance(d),
                     what + ", gradient " + std::to_string(i));
    }
}

const Device kCuda{DeviceType::cuda, 0};

}  // namespace

TEST_SUITE("cpu") {
  TEST_CASE("ops: unary elementwise") { run_all(unary_cases(), kCPU); }
  TEST_CASE("ops: binary elementwise, broadcasting") { run_all(binary_cases(), kCPU); }
  TEST_CASE("ops: scalar forms and operators") { run_all(scalar_cases(), kCPU); }
  TEST_CASE("ops: where and masked_fill") { run_all(select_cases(), kCPU); }
  TEST_CASE("ops: casts between all dtypes") { run_all(cast_cases(), kCPU); }
  TEST_CASE("ops: views") { run_all(view_cases(), kCPU); }
  TEST_CASE("ops: cat stack split chunk") { run_all(join_cases(), kCPU); }
  TEST_CASE("ops: index_select index_add gather scatter_add") { run_all(index_cases(), kCPU); }
  TEST_CASE("ops: reductions") { run_all(reduce_cases(), kCPU); }
  TEST_CASE("ops: matmul mm bmm linear") { run_all(linalg_cases(), kCPU); }
  TEST_CASE("ops: softmax log_softmax") { run_all(softmax_cases(), kCPU); }
  TEST_CASE("ops: cumsum cumprod") { run_all(scan_cases(), kCPU); }
  TEST_CASE("nn ops: conv2d") { run_all(conv_cases(), kCPU); }
  TEST_CASE("nn ops: pooling") { run_all(pool_cases(), kCPU); }
  TEST_CASE("nn ops: batch_norm layer_norm") { run_all(norm_cases(), kCPU); }
  TEST_CASE("nn ops: cross_entropy nll_loss") { run_all(loss_cases(), kCPU); }
  TEST_CASE("nn ops: mse_loss embedding") { run_all(composite_nn_cases(), kCPU); }
  TEST_CASE("nn ops: scaled_dot_product_attention") { run_all(attention_cases(), kCPU); }
  TEST_CASE("ops: extremal inputs, forward and backward against f64") { check_extremal(kCPU); }
}
EMBER_CUDA_TEST_CASE("cuda ops: extremal inputs, forward and backward against f64") { check_extremal(kCuda); }

EMBER_CUDA_TEST_CASE("cuda ops: unary elementwise") { run_all(unary_cases(), kCuda); }
EMBER_CUDA_TEST_CASE("cuda ops: binary elementwise, broadcasting") { run_all(binary_cases(), kCuda); }
EMBER_CUDA_TEST_CASE("cuda ops: scalar forms and operators") { run_all(scalar_cases(), kCuda); }
EMBER_CUDA_TEST_CASE("cuda ops: where and masked_fill") { run_all(select_cases(), kCuda); }
EMBER_CUDA_TEST_CASE("cuda ops: casts between all dtypes") { run_all(cast_cases(), kCuda); }
EMBER_CUDA_TEST_CASE("cuda ops: views") { run_all(view_cases(), kCuda); }
EMBER_CUDA_TEST_CASE("cuda ops: cat stack split chunk") { run_all(join_cases(), kCuda); }
EMBER_CUDA_TEST_CASE("cuda ops: index_select index_add gather scatter_add") { run_all(index_cases(), kCuda); }
EMBER_CUDA_TEST_CASE("cuda ops: reductions") { run_all(reduce_cases(), kCuda); }

namespace {
// The CUDA reduction of x equals the CPU's: for sums within `tolerance` of the largest sum of
// magnitudes (f(|x|): the scale of the rounding of any order of addition), exactly for max and argmax
// (tolerance 0).
void check_reduction_on_cuda(const std::string& what, const Tensor& x, const std::function<Tensor(const Tensor&)>& f,
                             double tolerance) {
  CAPTURE(what);
  const Tensor expected = f(x).to(DType::f64), got = f(x.to(kCuda)).to(kCPU).to(DType::f64);
  REQUIRE(got.shape() == expected.shape());
  const double scale = tolerance > 0 ? max(f(abs(x)).to(DType::f64)).item<double>() : 0.0;
  CHECK(max(abs(got - expected)).item<double>() <= tolerance * scale);
}
}  // namespace

// Few outputs over long rows split len into chunks whose partials a second kernel merges: (20000, 96)
// over dim 0 (96 columns: 3 blocks alone), a whole tensor of 2^22 (one row), (3, 300001) over dim 1.
// Values in few levels make ties, which argmax resolves to the first index on both sides.
EMBER_CUDA_TEST_CASE("cuda reductions: few outputs over long rows, split and merged in order") {
  manual_seed(11);
  const Tensor columns = randint(-8, 8, {20000, 96}, DType::f32), row = randn({int64_t{1} << 22}),
               rows = randn({3, 300001});
  for (const DType d : {DType::f32, DType::bf16}) {
    // f32 accumulation: eps 6e-8 times the longest chain of additions in either order (~2^8); a bf16
    // result rounds to 2^-8 of itself.
    const double sum_tolerance = d == DType::f32 ? 2e-5 : 8e-3;
    const Tensor c = columns.to(d), r = row.to(d), rs = rows.to(d);
    check_reduction_on_cuda("sum dim 0", c, [](const Tensor& x) { return sum(x, {0}); }, sum_tolerance);
    check_reduction_on_cuda("sum of all", r, [](const Tensor& x) { return sum(x); }, sum_tolerance);
    check_reduction_on_cuda("sum dim 1", rs, [](const Tensor& x) { return sum(x, {1}); }, sum_tolerance);
    check_reduction_on_cuda("amax dim 0", c, [](const Tensor& x) { return amax(x, {0}); }, 0.0);
    check_reduction_on_cuda("argmax dim 0", c, [](const Tensor& x) { return argmax(x, 0); }, 0.0);
    check_reduction_on_cuda("argmin dim 1", rs, [](const Tensor& x) { return argmin(x, 1); }, 0.0);
  }
}
EMBER_CUDA_TEST_CASE("cuda ops: matmul mm bmm linear") { run_all(linalg_cases(), kCuda); }
EMBER_CUDA_TEST_CASE("cuda ops: softmax log_softmax") { run_all(softmax_cases(), kCuda); }
EMBER_CUDA_TEST_CASE("cuda ops: cumsum cumprod") { run_all(scan_cases(), kCuda); }
EMBER_CUDA_TEST_CASE("cuda nn ops: conv2d") { run_all(conv_cases(), kCuda); }
EMBER_CUDA_TEST_CASE("cuda nn ops: pooling") { run_all(pool_cases(), kCuda); }
EMBER_CUDA_TEST_CASE("cuda nn ops: batch_norm layer_norm") { run_all(norm_cases(), kCuda); }
EMBER_CUDA_TEST_CASE("cuda nn ops: cross_entropy nll_loss") { run_all(loss_cases(), kCuda); }
EMBER_CUDA_TEST_CASE("cuda nn ops: mse_loss embedding") { run_all(composite_nn_cases(), kCuda); }
EMBER_CUDA_TEST_CASE("cuda nn ops: scaled_dot_product_attention") { run_all(attention_cases(), kCuda); }
