// Tensor's methods for the ops of tensor/ops.h: each checks that the tensor is defined (naming
// itself) and hands it to the free function of the same name.
#include "tensor/ops.h"

namespace ember {

Tensor Tensor::t() const {
  checked("t()");
  if (dim() > 2) throw ShapeError("t: expects a tensor of at most 2 dims, got shape " + to_string(shape()));
  return dim() < 2 ? *this : ember::transpose(*this, 0, 1);  // 0-D and 1-D: itself, as PyTorch's t()
}

Tensor Tensor::neg() const { return ember::neg(self("neg()")); }
Tensor Tensor::abs() const { return ember::abs(self("abs()")); }
Tensor Tensor::sign() const { return ember::sign(self("sign()")); }
Tensor Tensor::exp() const { return ember::exp(self("exp()")); }
Tensor Tensor::log() const { return ember::log(self("log()")); }
Tensor Tensor::log1p() const { return ember::log1p(self("log1p()")); }
Tensor Tensor::sqrt() const { return ember::sqrt(self("sqrt()")); }
Tensor Tensor::rsqrt() const { return ember::rsqrt(self("rsqrt()")); }
Tensor Tensor::sin() const { return ember::sin(self("sin()")); }
Tensor Tensor::cos() const { return ember::cos(self("cos()")); }
Tensor Tensor::tanh() const { return ember::tanh(self("tanh()")); }
Tensor Tensor::sigmoid() const { return ember::sigmoid(self("sigmoid()")); }
Tensor Tensor::relu() const { return ember::relu(self("relu()")); }
Tensor Tensor::gelu(bool tanh_approximation) const { return ember::gelu(self("gelu()"), tanh_approximation); }
Tensor Tensor::silu() const { return ember::silu(self("silu()")); }
Tensor Tensor::erf() const { return ember::erf(self("erf()")); }
Tensor Tensor::reciprocal() const { return ember::reciprocal(self("reciprocal()")); }
Tensor Tensor::square() const { return ember::square(self("square()")); }
Tensor Tensor::clamp(std::optional<double> min, std::optional<double> max) const { return ember::clamp(self("clamp()"), min, max); }
Tensor Tensor::clamp(const Tensor& min, const Tensor& max) const { return ember::clamp(self("clamp()"), min, max); }
Tensor Tensor::pow(Scalar exponent) const { return ember::pow(self("pow()"), exponent); }
Tensor Tensor::add(const Tensor& b) const { return ember::add(self("add()"), b); }
Tensor Tensor::sub(const Tensor& b) const { return ember::sub(self("sub()"), b); }
Tensor Tensor::mul(const Tensor& b) const { return ember::mul(self("mul()"), b); }
Tensor Tensor::div(const Tensor& b) const { return ember::div(self("div()"), b); }
Tensor Tensor::div(const Tensor& b, RoundingMode mode) const { return ember::div(self("div()"), b, mode); }
Tensor Tensor::div(Scalar b, RoundingMode mode) const { return ember::div(self("div()"), b, mode); }
Tensor Tensor::pow(const Tensor& b) const { return ember::pow(self("pow()"), b); }
Tensor Tensor::maximum(const Tensor& b) const { return ember::maximum(self("maximum()"), b); }
Tensor Tensor::minimum(const Tensor& b) const { return ember::minimum(self("minimum()"), b); }
Tensor Tensor::eq(const Tensor& b) const { return ember::eq(self("eq()"), b); }
Tensor Tensor::ne(const Tensor& b) const { return ember::ne(self("ne()"), b); }
Tensor Tensor::lt(const Tensor& b) const { return ember::lt(self("lt()"), b); }
Tensor Tensor::le(const Tensor& b) const { return ember::le(self("le()"), b); }
Tensor Tensor::gt(const Tensor& b) const { return ember::gt(self("gt()"), b); }
Tensor Tensor::ge(const Tensor& b) const { return ember::ge(self("ge()"), b); }
Tensor Tensor::logical_not() const { return ember::logical_not(self("logical_not()")); }
Tensor Tensor::masked_fill(const Tensor& mask, Scalar value) const { return ember::masked_fill(self("masked_fill()"), mask, value); }
Tensor Tensor::masked_fill(const Tensor& mask, const Tensor& value) const { return ember::masked_fill(self("masked_fill()"), mask, value); }
bool Tensor::all_finite() const { return ember::all_finite(self("all_finite()")); }
bool Tensor::equal(const Tensor& b) const { return ember::equal(self("equal()"), b); }
bool Tensor::allclose(const Tensor& b, double rtol, double atol) const { return ember::allclose(self("allclose()"), b, rtol, atol); }
Tensor Tensor::add(Scalar b) const { return ember::add(self("add()"), b); }
Tensor Tensor::sub(Scalar b) const { return ember::sub(self("sub()"), b); }
Tensor Tensor::add(const Tensor& b, Scalar alpha) const { return ember::add(self("add()"), b, alpha); }
Tensor Tensor::sub(const Tensor& b, Scalar alpha) const { return ember::sub(self("sub()"), b, alpha); }
Tensor Tensor::rsub(const Tensor& b, Scalar alpha) const { return ember::rsub(self("rsub()"), b, alpha); }
Tensor Tensor::rsub(Scalar b, Scalar alpha) const { return ember::rsub(self("rsub()"), b, alpha); }
Tensor Tensor::mul(Scalar b) const { return ember::mul(self("mul()"), b); }
Tensor Tensor::div(Scalar b) const { return ember::div(self("div()"), b); }
Tensor Tensor::maximum(Scalar b) const { return ember::maximum(self("maximum()"), b); }
Tensor Tensor::minimum(Scalar b) const { return ember::minimum(self("minimum()"), b); }
Tensor Tensor::eq(Scalar b) const { return ember::eq(self("eq()"), b); }
Tensor Tensor::ne(Scalar b) const { return ember::ne(self("ne()"), b); }
Tensor Tensor::lt(Scalar b) const { return ember::lt(self("lt()"), b); }
Tensor Tensor::le(Scalar b) const { return ember::le(self("le()"), b); }
Tensor Tensor::gt(Scalar b) const { return ember::gt(self("gt()"), b); }
Tensor Tensor::ge(Scalar b) const { return ember::ge(self("ge()"), b); }
const Tensor& Tensor::add_(const Tensor& other) const {
  Tensor handle = self("add_()");  // shares the tensor: the op writes through it
  ember::add_(handle, other);
  return *this;
}
const Tensor& Tensor::sub_(const Tensor& other) const {
  Tensor handle = self("sub_()");  // shares the tensor: the op writes through it
  ember::sub_(handle, other);
  return *this;
}
const Tensor& Tensor::mul_(const Tensor& other) const {
  Tensor handle = self("mul_()");  // shares the tensor: the op writes through it
  ember::mul_(handle, other);
  return *this;
}
const Tensor& Tensor::div_(const Tensor& other) const {
  Tensor handle = self("div_()");  // shares the tensor: the op writes through it
  ember::div_(handle, other);
  return *this;
}
const Tensor& Tensor::add_(Scalar other) const {
  Tensor handle = self("add_()");  // shares the tensor: the op writes through it
  ember::add_(handle, other);
  return *this;
}
const Tensor& Tensor::sub_(Scalar other) const {
  Tensor handle = self("sub_()");  // shares the tensor: the op writes through it
  ember::sub_(handle, other);
  return *this;
}
const Tensor& Tensor::mul_(Scalar other) const {
  Tensor handle = self("mul_()");  // shares the tensor: the op writes through it
  ember::mul_(handle, other);
  return *this;
}
const Tensor& Tensor::div_(Scalar other) const {
  Tensor handle = self("div_()");  // shares the tensor: the op writes through it
  ember::div_(handle, other);
  return *this;
}
const Tensor& Tensor::neg_() const {
  Tensor handle = self("neg_()");  // shares the tensor: the op writes through it
  ember::neg_(handle);
  return *this;
}
const Tensor& Tensor::exp_() const {
  Tensor handle = self("exp_()");  // shares the tensor: the op writes through it
  ember::exp_(handle);
  return *this;
}
const Tensor& Tensor::relu_() const {
  Tensor handle = self("relu_()");  // shares the tensor: the op writes through it
  ember::relu_(handle);
  return *this;
}
const Tensor& Tensor::sigmoid_() const {
  Tensor handle = self("sigmoid_()");  // shares the tensor: the op writes through it
  ember::sigmoid_(handle);
  return *this;
}
const Tensor& Tensor::tanh_() const {
  Tensor handle = self("tanh_()");  // shares the tensor: the op writes through it
  ember::tanh_(handle);
  return *this;
}
const Tensor& Tensor::sqrt_() const {
  Tensor handle = self("sqrt_()");  // shares the tensor: the op writes through it
  ember::sqrt_(handle);
  return *this;
}
const Tensor& Tensor::clamp_(std::optional<double> min, std::optional<double> max) const {
  Tensor handle = self("clamp_()");  // shares the tensor: the op writes through it
  ember::clamp_(handle, min, max);
  return *this;
}
const Tensor& Tensor::fill_(Scalar value) const {
  Tensor handle = self("fill_()");  // shares the tensor: the op writes through it
  ember::fill_(handle, value);
  return *this;
}
const Tensor& Tensor::zero_() const {
  Tensor handle = self("zero_()");  // shares the tensor: the op writes through it
  ember::zero_(handle);
  return *this;
}
const Tensor& Tensor::copy_(const Tensor& src, bool non_blocking) const {
  Tensor handle = self("copy_()");  // shares the tensor: the op writes through it
  ember::copy_(handle, src, non_blocking);
  return *this;
}
const Tensor& Tensor::masked_fill_(const Tensor& mask, Scalar value) const {
  Tensor handle = self("masked_fill_()");  // shares the tensor: the op writes through it
  ember::masked_fill_(handle, mask, value);
  return *this;
}
Tensor Tensor::to(DType dtype) const { return ember::to(self("to()"), dtype); }
Tensor Tensor::to(Device device, bool non_blocking) const { return ember::to(self("to()"), device, non_blocking); }
Tensor Tensor::contiguous() const { return ember::contiguous(self("contiguous()")); }
Tensor Tensor::pin_memory() const { return ember::pin_memory(self("pin_memory()")); }
Tensor Tensor::clone() const { return ember::clone(self("clone()")); }
Tensor Tensor::view(const Shape& shape) const { return ember::view(self("view()"), shape); }
Tensor Tensor::reshape(const Shape& shape) const { return ember::reshape(self("reshape()"), shape); }
Tensor Tensor::permute(const Shape& dims) const { return ember::permute(self("permute()"), dims); }
Tensor Tensor::transpose(int64_t dim0, int64_t dim1) const { return ember::transpose(self("transpose()"), dim0, dim1); }
Tensor Tensor::narrow(int64_t dim, int64_t start, int64_t length) const { return ember::narrow(self("narrow()"), dim, start, length); }
Tensor Tensor::slice(int64_t dim, int64_t start, int64_t end, int64_t step) const { return ember::slice(self("slice()"), dim, start, end, step); }
Tensor Tensor::select(int64_t dim, int64_t index) const { return ember::select(self("select()"), dim, index); }
Tensor Tensor::expand(const Shape& shape) const { return ember::expand(self("expand()"), shape); }
Tensor Tensor::broadcast_to(const Shape& shape) const { return ember::broadcast_to(self("broadcast_to()"), shape); }
Tensor Tensor::squeeze() const { return ember::squeeze(self("squeeze()")); }
Tensor Tensor::squeeze(int64_t dim) const { return ember::squeeze(self("squeeze()"), dim); }
Tensor Tensor::squeeze(const Shape& dims) const { return ember::squeeze(self("squeeze()"), dims); }
Tensor Tensor::unsqueeze(int64_t dim) const { return ember::unsqueeze(self("unsqueeze()"), dim); }
Tensor Tensor::flatten(int64_t start_dim, int64_t end_dim) const { return ember::flatten(self("flatten()"), start_dim, end_dim); }
Tensor Tensor::sum_to(const Shape& shape) const { return ember::sum_to(self("sum_to()"), shape); }
Tensor Tensor::pad(const std::vector<int64_t>& pads, Scalar value) const { return ember::pad(self("pad()"), pads, value); }
std::vector<Tensor> Tensor::split(int64_t split_size, int64_t dim) const { return ember::split(self("split()"), split_size, dim); }
std::vector<Tensor> Tensor::split_with_sizes(const std::vector<int64_t>& sizes, int64_t dim) const { return ember::split_with_sizes(self("split_with_sizes()"), sizes, dim); }
std::vector<Tensor> Tensor::chunk(int64_t chunks, int64_t dim) const { return ember::chunk(self("chunk()"), chunks, dim); }
Tensor Tensor::index_select(int64_t dim, const Tensor& index) const { return ember::index_select(self("index_select()"), dim, index); }
Tensor Tensor::index_add(int64_t dim, const Tensor& index, const Tensor& src) const { return ember::index_add(self("index_add()"), dim, index, src); }
Tensor Tensor::index_add(int64_t dim, const Tensor& index, const Tensor& src, Scalar alpha) const { return ember::index_add(self("index_add()"), dim, index, src, alpha); }
Tensor Tensor::gather(int64_t dim, const Tensor& index) const { return ember::gather(self("gather()"), dim, index); }
Tensor Tensor::scatter_add(int64_t dim, const Tensor& index, const Tensor& src) const { return ember::scatter_add(self("scatter_add()"), dim, index, src); }
Tensor Tensor::sum(const Shape& dims, bool keepdim, std::optional<DType> dtype) const { return ember::sum(self("sum()"), dims, keepdim, dtype); }
Tensor Tensor::mean(const Shape& dims, bool keepdim) const { return ember::mean(self("mean()"), dims, keepdim); }
Tensor Tensor::prod(const Shape& dims, bool keepdim, std::optional<DType> dtype) const { return ember::prod(self("prod()"), dims, keepdim, dtype); }
Tensor Tensor::amax(const Shape& dims, bool keepdim) const { return ember::amax(self("amax()"), dims, keepdim); }
Tensor Tensor::amin(const Shape& dims, bool keepdim) const { return ember::amin(self("amin()"), dims, keepdim); }
ValuesIndices Tensor::max(int64_t dim, bool keepdim) const { return ember::max(self("max()"), dim, keepdim); }
ValuesIndices Tensor::min(int64_t dim, bool keepdim) const { return ember::min(self("min()"), dim, keepdim); }
Tensor Tensor::max() const { return ember::max(self("max()")); }
Tensor Tensor::min() const { return ember::min(self("min()")); }
Tensor Tensor::argmax(std::optional<int64_t> dim, bool keepdim) const { return ember::argmax(self("argmax()"), dim, keepdim); }
Tensor Tensor::argmin(std::optional<int64_t> dim, bool keepdim) const { return ember::argmin(self("argmin()"), dim, keepdim); }
Tensor Tensor::var(const Shape& dims, double correction, bool keepdim) const { return ember::var(self("var()"), dims, correction, keepdim); }
Tensor Tensor::logsumexp(const Shape& dims, bool keepdim) const { return ember::logsumexp(self("logsumexp()"), dims, keepdim); }
Tensor Tensor::cumsum(int64_t dim, std::optional<DType> dtype) const { return ember::cumsum(self("cumsum()"), dim, dtype); }
Tensor Tensor::cumprod(int64_t dim, std::optional<DType> dtype) const { return ember::cumprod(self("cumprod()"), dim, dtype); }
Tensor Tensor::norm(double p, const Shape& dims, bool keepdim) const { return ember::norm(self("norm()"), p, dims, keepdim); }
Tensor Tensor::matmul(const Tensor& b) const { return ember::matmul(self("matmul()"), b); }
Tensor Tensor::mm(const Tensor& b) const { return ember::mm(self("mm()"), b); }
Tensor Tensor::bmm(const Tensor& b) const { return ember::bmm(self("bmm()"), b); }
Tensor Tensor::linear(const Tensor& w, const Tensor& b) const { return ember::linear(self("linear()"), w, b); }
Tensor Tensor::softmax(int64_t dim, std::optional<DType> dtype) const { return ember::softmax(self("softmax()"), dim, dtype); }
Tensor Tensor::log_softmax(int64_t dim, std::optional<DType> dtype) const { return ember::log_softmax(self("log_softmax()"), dim, dtype); }

}  // namespace ember
