// Creation functions and the type-promotion rule that decides what dtype an op computes in.
#include <cmath>
#include <cstring>

#include "tensor/convert.h"
#include "tensor/ops.h"
#include "tensor/primitives/elementwise.h"

namespace ember {

Tensor empty(const Shape& shape, TensorOptions opts) { return Tensor::empty(shape, opts); }

Tensor full(const Shape& shape, Scalar value, TensorOptions opts) {
  check_fits(value, opts.dtype, "full");
  const bool wants_grad = opts.requires_grad;
  Tensor t = Tensor::empty(shape, opts.with_requires_grad(false));
  std::vector<Tensor> out{t};
  Fill fill(value);
  detail::dispatch(fill, t.device(), out, out);
  if (wants_grad) t.requires_grad_(true);
  return t;
}

Tensor zeros(const Shape& shape, TensorOptions opts) { return full(shape, 0, opts); }
Tensor ones(const Shape& shape, TensorOptions opts) { return full(shape, 1, opts); }
Tensor zeros_like(const Tensor& t) { return zeros(t.shape(), TensorOptions(t.dtype()).with_device(t.device())); }
Tensor ones_like(const Tensor& t) { return ones(t.shape(), TensorOptions(t.dtype()).with_device(t.device())); }
Tensor full_like(const Tensor& t, Scalar value) {
  return full(t.shape(), value, TensorOptions(t.dtype()).with_device(t.device()));
}

Tensor scalar_tensor(Scalar value, TensorOptions opts) { return full({}, value, opts); }

Tensor wrapped_scalar(Scalar value, Device device) {
  const DType dt = value.is_bool() ? DType::boolean : (value.is_floating() ? DType::f64 : DType::i64);
  Tensor t = full({}, value, TensorOptions(dt).with_device(device));
  t.impl()->is_wrapped_number = true;
  return t;
}

namespace {
// PyTorch's combine_categories (c10 TensorIterator result_type): the higher-priority group wins
// unless the lower one is of a higher category (bool < integer < floating).
std::optional<DType> combine(std::optional<DType> higher, std::optional<DType> lower) {
  if (!higher) return lower;
  if (!lower) return higher;
  if (is_floating(*higher)) return higher;
  if (*higher == DType::boolean || is_floating(*lower)) return promote_types(*higher, *lower);
  return higher;
}
}  // namespace

DType result_type(const Tensor& a, const Tensor& b) {
  std::optional<DType> dim_result, zero_result, wrapped_result;
  auto update = [](std::optional<DType>& r, DType d) { r = r ? promote_types(*r, d) : d; };
  for (const Tensor* t : {&a, &b}) {
    const DType d = t->dtype();  // first: UndefinedTensorError before impl() is read
    if (t->impl()->is_wrapped_number)
      update(wrapped_result, d == DType::f64 ? kDefaultFloat : d);
    else if (t->dim() == 0)
      update(zero_result, d);
    else
      update(dim_result, d);
  }
  return *combine(dim_result, combine(zero_result, wrapped_result));
}

Tensor arange(Scalar end, std::optional<DType> dtype, Device device) { return arange(0, end, 1, dtype, device); }

Tensor arange(Scalar start, Scalar end, Scalar step, std::optional<DType> dtype, Device device) {
  const double s = start.to_double(), e = end.to_double(), st = step.to_double();
  if (st == 0) throw ValueError("arange: step must be non-zero");
  if ((st > 0 && e < s) || (st < 0 && e > s))
    throw ValueError("arange: upper bound " + std::to_string(e) + " and lower bound " + std::to_string(s) +
                     " inconsistent with step sign");
  const bool floating = start.is_floating() || end.is_floating() || step.is_floating();
  const DType dt = dtype.value_or(floating ? kDefaultFloat : DType::i64);
  const auto n = static_cast<int64_t>(std::ceil((e - s) / st));
  Tensor t = Tensor::empty({n}, dt);
  visit(dt, [&]<class T>() {
    T* p = t.data<T>();
    for (int64_t i = 0; i < n; ++i) {
      if (floating) p[i] = convert<T>(s + static_cast<double>(i) * st);
      else p[i] = convert<T>(start.to_int() + i * step.to_int());
    }
  });
  return t.to(device);
}

template <class T>
Tensor from_vector(const std::vector<T>& values, const Shape& shape, TensorOptions opts) {
  if (static_cast<int64_t>(values.size()) != numel(shape))
    throw ShapeError("from_vector: " + std::to_string(values.size()) + " values cannot fill shape " + to_string(shape));
  Tensor t = Tensor::empty(shape, dtype_v<T>);
  T* p = t.data<T>();
  for (size_t i = 0; i < values.size(); ++i) p[i] = values[i];  // element-wise: std::vector<bool> is packed
  Tensor r = t.to(opts.dtype).to(opts.device);
  if (opts.requires_grad) r.requires_grad_(true);
  return r;
}

template Tensor from_vector(const std::vector<float>&, const Shape&, TensorOptions);
template Tensor from_vector(const std::vector<double>&, const Shape&, TensorOptions);
template Tensor from_vector(const std::vector<f16>&, const Shape&, TensorOptions);
template Tensor from_vector(const std::vector<bf16>&, const Shape&, TensorOptions);
template Tensor from_vector(const std::vector<int32_t>&, const Shape&, TensorOptions);
template Tensor from_vector(const std::vector<int64_t>&, const Shape&, TensorOptions);
template Tensor from_vector(const std::vector<uint8_t>&, const Shape&, TensorOptions);
template Tensor from_vector(const std::vector<bool>&, const Shape&, TensorOptions);

}  // namespace ember
