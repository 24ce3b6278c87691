/// @file
/// Tensor: a cheap handle (one intrusive pointer) to storage + offset + shape + strides + dtype,
/// with autograd metadata allocated only for tensors that take part in a graph.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tensor/dtype.h"
#include "tensor/scalar.h"
#include "tensor/shape.h"
#include "tensor/storage.h"

namespace ember {

class Tensor;
struct ValuesIndices;      // tensor/ops.h
enum class RoundingMode;   // tensor/ops.h
namespace autograd {
class Node;
struct AutogradMeta;
}  // namespace autograd

/// A hook sees a gradient and may return a replacement (or an undefined Tensor to keep it).
using GradHook = std::function<Tensor(const Tensor& grad)>;
/// Runs after a leaf's .grad was updated; receives the leaf itself.
using PostAccumulateGradHook = std::function<void(const Tensor& leaf)>;

/// What a Tensor points to: its view of a storage, its dtype and its autograd state. Code
/// using ember reaches it through Tensor's accessors.
struct TensorImpl final : RefCounted {
  /// A view of `s` at element offset `off` with the given shape, strides and dtype.
  TensorImpl(IntrusivePtr<Storage> s, int64_t off, Shape sh, Strides st, DType dt);
  ~TensorImpl();                   ///< Frees the autograd state; the storage goes with its last view.
  IntrusivePtr<Storage> storage;   ///< the memory, shared by views
  int64_t offset = 0;              ///< in elements
  Shape shape;                     ///< size of each dim
  Strides strides;                 ///< in elements
  DType dtype;                     ///< element type
  bool is_wrapped_number = false;  ///< a C++ scalar turned tensor: lowest priority in promotion
  bool is_view = false;            ///< made by a view op: shares storage with its base
  std::unique_ptr<autograd::AutogradMeta> autograd;  ///< null for tensors outside any graph
};

/// Options for factory functions: zeros({2, 3}, DType::f64), ones(s, Device::parse("cuda")).
struct TensorOptions {
  DType dtype = kDefaultFloat;  ///< element type (float32 by default)
  Device device = kCPU;         ///< where the memory lives
  bool requires_grad = false;   ///< make the new tensor a leaf that requires grad
  TensorOptions() = default;    ///< float32 on the CPU, no grad
  /// Options with dtype d (implicit: a DType passes where options are expected).
  TensorOptions(DType d) : dtype(d) {}   // NOLINT: implicit on purpose
  /// Options with device d (implicit, as the DType form).
  TensorOptions(Device d) : device(d) {}  // NOLINT
  TensorOptions with_dtype(DType d) const { auto o = *this; o.dtype = d; return o; }     ///< A copy with dtype d.
  TensorOptions with_device(Device d) const { auto o = *this; o.device = d; return o; }  ///< A copy with device d.
  /// A copy with requires_grad r.
  TensorOptions with_requires_grad(bool r = true) const { auto o = *this; o.requires_grad = r; return o; }
};

/// An n-dimensional array: a cheap, shared handle to a TensorImpl (copies alias the same data; use
/// clone() for a copy). The free functions of tensor/ops.h are its operations; the member functions
/// here are shorthands for the common ones. Every member but defined(), impl(), is_same(),
/// use_count() and str() raises UndefinedTensorError on an undefined tensor, naming itself.
class Tensor {
 public:
  Tensor() = default;  ///< An undefined tensor (defined() is false): "no tensor", as an absent gradient.
  explicit Tensor(IntrusivePtr<TensorImpl> impl) : impl_(std::move(impl)) {}  ///< A handle to `impl`.
  /// A fresh, uninitialised, contiguous tensor.
  static Tensor empty(const Shape& shape, TensorOptions opts = {});

  bool defined() const { return static_cast<bool>(impl_); }  ///< Whether the handle points to a tensor.
  TensorImpl* impl() const { return impl_.get(); }           ///< The implementation, null when undefined.
  /// Whether both handles point to the same tensor (not merely equal values).
  bool is_same(const Tensor& o) const { return impl_ == o.impl_; }
  /// How many handles share this tensor (0 when undefined).
  int64_t use_count() const { return impl_ ? impl_->use_count() : 0; }

  const Shape& shape() const { return checked("shape()").shape; }        ///< Size of each dim.
  const Strides& strides() const { return checked("strides()").strides; }  ///< Step of each dim, in elements.
  int dim() const { return checked("dim()").shape.size(); }  ///< Number of dims (0 for a scalar).
  int64_t size(int64_t d) const;  ///< Size of dim d (negative d counts from the end); IndexError when out of range.
  /// Stride of dim d in elements (negative d counts from the end); IndexError when out of range.
  int64_t stride(int64_t d) const;
  int64_t numel() const { return ember::numel(checked("numel()").shape); }  ///< Number of elements.
  /// Position of the first element in the storage, in elements.
  int64_t offset() const { return checked("offset()").offset; }
  DType dtype() const { return checked("dtype()").dtype; }  ///< Element type.
  Device device() const { return checked("device()").storage->device(); }  ///< Where the memory lives.
  /// The memory, shared with the views of this tensor.
  const IntrusivePtr<Storage>& storage() const { return checked("storage()").storage; }
  bool is_contiguous() const;  ///< Whether the elements are dense in row-major order (size-1 dims ignore their stride).
  bool is_pinned() const { return checked("is_pinned()").storage->is_pinned(); }  ///< in page-locked host memory
  /// Whether the dtype is f32, f16, bf16 or f64.
  bool is_floating_point() const { return is_floating(checked("is_floating_point()").dtype); }

  /// Pointer to the first element; T must be the storage type of dtype() (checked).
  template <class T> T* data() const {
    const TensorImpl& t = checked("data()");
    if (dtype_v<T> != t.dtype)
      throw DTypeError(std::string("data<T>(): tensor is ") + dtype_name(t.dtype) + ", asked for " +
                       dtype_name(dtype_v<T>));
    return static_cast<T*>(t.storage->data()) + t.offset;
  }
  void* raw_data() const;  ///< Untyped pointer to the first element.

  // ---- host access
  /// The single value of a one-element tensor, converted to T.
  template <class T> T item() const;
  /// All elements in row-major order, converted to T, copied to the host.
  template <class T> std::vector<T> to_vector() const;
  std::string str() const;  ///< PyTorch-style printing: tensor([[1.0000, 2.0000]], dtype=...)

  // ---- autograd
  /// Whether gradients flow to this tensor: a leaf marked so, or the result of an op on one.
  bool requires_grad() const;
  /// Marks a leaf as requiring grad (or not). AutogradError on a non-leaf, DTypeError for a
  /// non-floating dtype.
  Tensor& requires_grad_(bool enabled = true);
  bool is_leaf() const;  ///< Whether it has no grad_fn: made by the user (or detached), not by a recorded op.
  /// The gradient backward accumulated (undefined before the first backward, and on non-leaves
  /// unless retain_grad()).
  Tensor grad() const;
  /// Replaces the gradient (undefined g clears it); ShapeError when g's shape differs.
  void set_grad(const Tensor& g) const;
  /// The node of the op that made this tensor; null for leaves.
  const std::shared_ptr<autograd::Node>& grad_fn() const;
  uint32_t output_nr() const;  ///< Which output of grad_fn() this tensor is.
  /// Makes this tensor output `output_nr` of node `fn` (how ops record themselves).
  void set_grad_fn(std::shared_ptr<autograd::Node> fn, uint32_t output_nr) const;
  /// Backpropagates from this tensor; `grad` defaults to ones for a one-element tensor.
  void backward(const Tensor& grad = {}, bool retain_graph = false, bool create_graph = false) const;
  Tensor detach() const;  ///< A tensor sharing this one's storage, without autograd history.
  /// Runs `hook` on this tensor's gradient each time backward computes it; AutogradError when the
  /// tensor does not require grad.
  void register_hook(GradHook hook) const;
  /// Runs `hook` after backward added into this leaf's .grad; AutogradError unless a leaf that
  /// requires grad.
  void register_post_accumulate_grad_hook(PostAccumulateGradHook hook) const;
  void retain_grad() const;  ///< Keeps .grad on this non-leaf after backward (only leaves keep theirs otherwise).
  /// The storage's version counter, bumped by every in-place write.
  uint64_t version() const { return checked("version()").storage->version(); }
  /// The autograd state; null for tensors outside any graph.
  autograd::AutogradMeta* autograd_meta() const { return checked("autograd_meta()").autograd.get(); }
  autograd::AutogradMeta& ensure_autograd_meta() const;  ///< The autograd state, created when missing.

  // ---- the ops of tensor/ops.h as methods, as in PyTorch: x.exp() is ember::exp(x) and x.add_(y)
  // ember::add_(x, y); see each free function for what it does (tensor/methods.cpp). In-place
  // methods are const, as a Tensor is a handle to the data they write: a temporary view takes
  // them, as in t.narrow(0, 0, 2).add_(x). Every function of tensor/ops.h whose first argument is
  // a tensor has its method (a test holds that) except zeros_like, ones_like, full_like,
  // result_type, where (PyTorch's x.where has another order) and std (the name would hide
  // namespace std in the class: use ember::std(x)).
  Tensor t() const;  ///< The transpose of a 2-D tensor; a 0-D or 1-D tensor comes back as it is.
  Tensor neg() const;  ///< ember::neg(*this)
  Tensor abs() const;  ///< ember::abs(*this)
  Tensor sign() const;  ///< ember::sign(*this)
  Tensor exp() const;  ///< ember::exp(*this)
  Tensor log() const;  ///< ember::log(*this)
  Tensor log1p() const;  ///< ember::log1p(*this)
  Tensor sqrt() const;  ///< ember::sqrt(*this)
  Tensor rsqrt() const;  ///< ember::rsqrt(*this)
  Tensor sin() const;  ///< ember::sin(*this)
  Tensor cos() const;  ///< ember::cos(*this)
  Tensor tanh() const;  ///< ember::tanh(*this)
  Tensor sigmoid() const;  ///< ember::sigmoid(*this)
  Tensor relu() const;  ///< ember::relu(*this)
  Tensor gelu(bool tanh_approximation = false) const;  ///< ember::gelu(*this, tanh_approximation)
  Tensor silu() const;  ///< ember::silu(*this)
  Tensor erf() const;  ///< ember::erf(*this)
  Tensor reciprocal() const;  ///< ember::reciprocal(*this)
  Tensor square() const;  ///< ember::square(*this)
  Tensor clamp(std::optional<double> min, std::optional<double> max) const;  ///< ember::clamp(*this, min, max)
  Tensor clamp(const Tensor& min, const Tensor& max) const;  ///< ember::clamp(*this, min, max)
  Tensor pow(Scalar exponent) const;  ///< ember::pow(*this, exponent)
  Tensor add(const Tensor& b) const;  ///< ember::add(*this, b)
  Tensor sub(const Tensor& b) const;  ///< ember::sub(*this, b)
  Tensor mul(const Tensor& b) const;  ///< ember::mul(*this, b)
  Tensor div(const Tensor& b) const;  ///< ember::div(*this, b)
  Tensor div(const Tensor& b, RoundingMode mode) const;  ///< ember::div(*this, b, mode)
  Tensor div(Scalar b, RoundingMode mode) const;  ///< ember::div(*this, b, mode)
  Tensor pow(const Tensor& b) const;  ///< ember::pow(*this, b)
  Tensor maximum(const Tensor& b) const;  ///< ember::maximum(*this, b)
  Tensor minimum(const Tensor& b) const;  ///< ember::minimum(*this, b)
  Tensor eq(const Tensor& b) const;  ///< ember::eq(*this, b)
  Tensor ne(const Tensor& b) const;  ///< ember::ne(*this, b)
  Tensor lt(const Tensor& b) const;  ///< ember::lt(*this, b)
  Tensor le(const Tensor& b) const;  ///< ember::le(*this, b)
  Tensor gt(const Tensor& b) const;  ///< ember::gt(*this, b)
  Tensor ge(const Tensor& b) const;  ///< ember::ge(*this, b)
  Tensor logical_not() const;  ///< ember::logical_not(*this)
  Tensor masked_fill(const Tensor& mask, Scalar value) const;  ///< ember::masked_fill(*this, mask, value)
  Tensor masked_fill(const Tensor& mask, const Tensor& value) const;  ///< ember::masked_fill(*this, mask, value)
  bool all_finite() const;  ///< ember::all_finite(*this)
  bool equal(const Tensor& b) const;  ///< ember::equal(*this, b)
  bool allclose(const Tensor& b, double rtol = 1e-5, double atol = 1e-8) const;  ///< ember::allclose(*this, b, rtol, atol)
  Tensor add(Scalar b) const;  ///< ember::add(*this, b)
  Tensor sub(Scalar b) const;  ///< ember::sub(*this, b)
  Tensor add(const Tensor& b, Scalar alpha) const;  ///< ember::add(*this, b, alpha)
  Tensor sub(const Tensor& b, Scalar alpha) const;  ///< ember::sub(*this, b, alpha)
  Tensor rsub(const Tensor& b, Scalar alpha = 1) const;  ///< ember::rsub(*this, b, alpha)
  Tensor rsub(Scalar b, Scalar alpha = 1) const;  ///< ember::rsub(*this, b, alpha)
  Tensor mul(Scalar b) const;  ///< ember::mul(*this, b)
  Tensor div(Scalar b) const;  ///< ember::div(*this, b)
  Tensor maximum(Scalar b) const;  ///< ember::maximum(*this, b)
  Tensor minimum(Scalar b) const;  ///< ember::minimum(*this, b)
  Tensor eq(Scalar b) const;  ///< ember::eq(*this, b)
  Tensor ne(Scalar b) const;  ///< ember::ne(*this, b)
  Tensor lt(Scalar b) const;  ///< ember::lt(*this, b)
  Tensor le(Scalar b) const;  ///< ember::le(*this, b)
  Tensor gt(Scalar b) const;  ///< ember::gt(*this, b)
  Tensor ge(Scalar b) const;  ///< ember::ge(*this, b)
  const Tensor& add_(const Tensor& other) const;  ///< ember::add_(*this, other)
  const Tensor& sub_(const Tensor& other) const;  ///< ember::sub_(*this, other)
  const Tensor& mul_(const Tensor& other) const;  ///< ember::mul_(*this, other)
  const Tensor& div_(const Tensor& other) const;  ///< ember::div_(*this, other)
  const Tensor& add_(Scalar other) const;  ///< ember::add_(*this, other)
  const Tensor& sub_(Scalar other) const;  ///< ember::sub_(*this, other)
  const Tensor& mul_(Scalar other) const;  ///< ember::mul_(*this, other)
  const Tensor& div_(Scalar other) const;  ///< ember::div_(*this, other)
  const Tensor& neg_() const;  ///< ember::neg_(*this)
  const Tensor& exp_() const;  ///< ember::exp_(*this)
  const Tensor& relu_() const;  ///< ember::relu_(*this)
  const Tensor& sigmoid_() const;  ///< ember::sigmoid_(*this)
  const Tensor& tanh_() const;  ///< ember::tanh_(*this)
  const Tensor& sqrt_() const;  ///< ember::sqrt_(*this)
  const Tensor& clamp_(std::optional<double> min, std::optional<double> max) const;  ///< ember::clamp_(*this, min, max)
  const Tensor& fill_(Scalar value) const;  ///< ember::fill_(*this, value)
  const Tensor& zero_() const;  ///< ember::zero_(*this)
  const Tensor& copy_(const Tensor& src, bool non_blocking = false) const;  ///< ember::copy_(*this, src, non_blocking)
  const Tensor& masked_fill_(const Tensor& mask, Scalar value) const;  ///< ember::masked_fill_(*this, mask, value)
  Tensor to(DType dtype) const;  ///< ember::to(*this, dtype)
  Tensor to(Device device, bool non_blocking = false) const;  ///< ember::to(*this, device, non_blocking)
  Tensor contiguous() const;  ///< ember::contiguous(*this)
  Tensor pin_memory() const;  ///< ember::pin_memory(*this)
  Tensor clone() const;  ///< ember::clone(*this)
  Tensor view(const Shape& shape) const;  ///< ember::view(*this, shape)
  Tensor reshape(const Shape& shape) const;  ///< ember::reshape(*this, shape)
  Tensor permute(const Shape& dims) const;  ///< ember::permute(*this, dims)
  Tensor transpose(int64_t dim0, int64_t dim1) const;  ///< ember::transpose(*this, dim0, dim1)
  Tensor narrow(int64_t dim, int64_t start, int64_t length) const;  ///< ember::narrow(*this, dim, start, length)
  Tensor slice(int64_t dim, int64_t start, int64_t end, int64_t step = 1) const;  ///< ember::slice(*this, dim, start, end, step)
  Tensor select(int64_t dim, int64_t index) const;  ///< ember::select(*this, dim, index)
  Tensor expand(const Shape& shape) const;  ///< ember::expand(*this, shape)
  Tensor broadcast_to(const Shape& shape) const;  ///< ember::broadcast_to(*this, shape)
  Tensor squeeze() const;  ///< ember::squeeze(*this)
  Tensor squeeze(int64_t dim) const;  ///< ember::squeeze(*this, dim)
  Tensor squeeze(const Shape& dims) const;  ///< ember::squeeze(*this, dims)
  Tensor unsqueeze(int64_t dim) const;  ///< ember::unsqueeze(*this, dim)
  Tensor flatten(int64_t start_dim = 0, int64_t end_dim = -1) const;  ///< ember::flatten(*this, start_dim, end_dim)
  Tensor sum_to(const Shape& shape) const;  ///< ember::sum_to(*this, shape)
  Tensor pad(const std::vector<int64_t>& pads, Scalar value = 0.0) const;  ///< ember::pad(*this, pads, value)
  std::vector<Tensor> split(int64_t split_size, int64_t dim = 0) const;  ///< ember::split(*this, split_size, dim)
  std::vector<Tensor> split_with_sizes(const std::vector<int64_t>& sizes, int64_t dim = 0) const;  ///< ember::split_with_sizes(*this, sizes, dim)
  std::vector<Tensor> chunk(int64_t chunks, int64_t dim = 0) const;  ///< ember::chunk(*this, chunks, dim)
  Tensor index_select(int64_t dim, const Tensor& index) const;  ///< ember::index_select(*this, dim, index)
  Tensor index_add(int64_t dim, const Tensor& index, const Tensor& src) const;  ///< ember::index_add(*this, dim, index, src)
  Tensor index_add(int64_t dim, const Tensor& index, const Tensor& src, Scalar alpha) const;  ///< ember::index_add(*this, dim, index, src, alpha)
  Tensor gather(int64_t dim, const Tensor& index) const;  ///< ember::gather(*this, dim, index)
  Tensor scatter_add(int64_t dim, const Tensor& index, const Tensor& src) const;  ///< ember::scatter_add(*this, dim, index, src)
  Tensor sum(const Shape& dims = {}, bool keepdim = false, std::optional<DType> dtype = {}) const;  ///< ember::sum(*this, dims, keepdim, dtype)
  Tensor mean(const Shape& dims = {}, bool keepdim = false) const;  ///< ember::mean(*this, dims, keepdim)
  Tensor prod(const Shape& dims = {}, bool keepdim = false, std::optional<DType> dtype = {}) const;  ///< ember::prod(*this, dims, keepdim, dtype)
  Tensor amax(const Shape& dims = {}, bool keepdim = false) const;  ///< ember::amax(*this, dims, keepdim)
  Tensor amin(const Shape& dims = {}, bool keepdim = false) const;  ///< ember::amin(*this, dims, keepdim)
  ValuesIndices max(int64_t dim, bool keepdim = false) const;  ///< ember::max(*this, dim, keepdim)
  ValuesIndices min(int64_t dim, bool keepdim = false) const;  ///< ember::min(*this, dim, keepdim)
  Tensor max() const;  ///< ember::max(*this)
  Tensor min() const;  ///< ember::min(*this)
  Tensor argmax(std::optional<int64_t> dim = {}, bool keepdim = false) const;  ///< ember::argmax(*this, dim, keepdim)
  Tensor argmin(std::optional<int64_t> dim = {}, bool keepdim = false) const;  ///< ember::argmin(*this, dim, keepdim)
  Tensor var(const Shape& dims = {}, double correction = 1, bool keepdim = false) const;  ///< ember::var(*this, dims, correction, keepdim)
  Tensor logsumexp(const Shape& dims, bool keepdim = false) const;  ///< ember::logsumexp(*this, dims, keepdim)
  Tensor cumsum(int64_t dim, std::optional<DType> dtype = {}) const;   ///< ember::cumsum(*this, dim, dtype)
  Tensor cumprod(int64_t dim, std::optional<DType> dtype = {}) const;  ///< ember::cumprod(*this, dim, dtype)
  Tensor norm(double p = 2.0, const Shape& dims = {}, bool keepdim = false) const;  ///< ember::norm(*this, p, dims, keepdim)
  Tensor matmul(const Tensor& b) const;  ///< ember::matmul(*this, b)
  Tensor mm(const Tensor& b) const;  ///< ember::mm(*this, b)
  Tensor bmm(const Tensor& b) const;  ///< ember::bmm(*this, b)
  Tensor linear(const Tensor& w, const Tensor& b = {}) const;  ///< ember::linear(*this, w, b)
  Tensor softmax(int64_t dim, std::optional<DType> dtype = {}) const;  ///< ember::softmax(*this, dim, dtype)
  Tensor log_softmax(int64_t dim, std::optional<DType> dtype = {}) const;  ///< ember::log_softmax(*this, dim, dtype)

 private:
  // The tensor pointed to, or UndefinedTensorError naming `member` (cold and out of line: the
  // accessors stay one branch).
  TensorImpl& checked(const char* member) const {
    if (!impl_) [[unlikely]]
      throw_undefined(member);
    return *impl_;
  }
  [[noreturn]] static void throw_undefined(const char* member);
  // *this, or UndefinedTensorError naming `member`: what the methods hand to the free functions.
  const Tensor& self(const char* member) const {
    checked(member);
    return *this;
  }

  IntrusivePtr<TensorImpl> impl_;
};

std::ostream& operator<<(std::ostream& os, const Tensor& t);  ///< Prints t.str().

}  // namespace ember
