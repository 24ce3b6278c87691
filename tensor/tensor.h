/// @file
/// Tensor: a cheap handle (one intrusive pointer) to storage + offset + shape + strides + dtype,
/// with autograd metadata allocated only for tensors that take part in a graph.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "tensor/dtype.h"
#include "tensor/shape.h"
#include "tensor/storage.h"

namespace ember {

class Tensor;
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
/// here are shorthands for the common ones. Most accessors require a defined tensor.
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

  const Shape& shape() const { return impl_->shape; }        ///< Size of each dim.
  const Strides& strides() const { return impl_->strides; }  ///< Step of each dim, in elements.
  int dim() const { return impl_->shape.size(); }            ///< Number of dims (0 for a scalar).
  int64_t size(int64_t d) const;  ///< Size of dim d (negative d counts from the end); IndexError when out of range.
  /// Stride of dim d in elements (negative d counts from the end); IndexError when out of range.
  int64_t stride(int64_t d) const;
  int64_t numel() const { return ember::numel(impl_->shape); }  ///< Number of elements.
  int64_t offset() const { return impl_->offset; }  ///< Position of the first element in the storage, in elements.
  DType dtype() const { return impl_->dtype; }  ///< Element type.
  Device device() const { return impl_->storage->device(); }  ///< Where the memory lives.
  /// The memory, shared with the views of this tensor.
  const IntrusivePtr<Storage>& storage() const { return impl_->storage; }
  bool is_contiguous() const;  ///< Whether the elements are dense in row-major order (size-1 dims ignore their stride).
  bool is_pinned() const { return impl_->storage->is_pinned(); }   ///< in page-locked host memory
  bool is_floating_point() const { return is_floating(dtype()); }  ///< Whether the dtype is f32, f16, bf16 or f64.

  /// Pointer to the first element; T must be the storage type of dtype() (checked).
  template <class T> T* data() const {
    if (dtype_v<T> != dtype())
      throw DTypeError(std::string("data<T>(): tensor is ") + dtype_name(dtype()) + ", asked for " +
                       dtype_name(dtype_v<T>));
    return static_cast<T*>(impl_->storage->data()) + impl_->offset;
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
  bool is_leaf() const;  ///< no grad_fn
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
  Tensor detach() const;  ///< shares storage, no history
  /// Runs `hook` on this tensor's gradient each time backward computes it; AutogradError when the
  /// tensor does not require grad.
  void register_hook(GradHook hook) const;
  /// Runs `hook` after backward added into this leaf's .grad; AutogradError unless a leaf that
  /// requires grad.
  void register_post_accumulate_grad_hook(PostAccumulateGradHook hook) const;
  void retain_grad() const;  ///< keep .grad on a non-leaf after backward
  /// The storage's version counter, bumped by every in-place write.
  uint64_t version() const { return impl_->storage->version(); }
  /// The autograd state; null for tensors outside any graph.
  autograd::AutogradMeta* autograd_meta() const { return impl_->autograd.get(); }
  autograd::AutogradMeta& ensure_autograd_meta() const;  ///< The autograd state, created when missing.

  // ---- conversions and views (free functions in tensor/ops.h hold the full set)
  Tensor to(DType dtype) const;  ///< ember::to(*this, dtype): a differentiable cast.
  /// ember::to(*this, device, non_blocking): a copy to `device`.
  Tensor to(Device device, bool non_blocking = false) const;
  Tensor pin_memory() const;                 ///< ember::pin_memory(*this).
  Tensor contiguous() const;                 ///< ember::contiguous(*this).
  Tensor clone() const;                      ///< ember::clone(*this).
  Tensor view(const Shape& shape) const;     ///< ember::view(*this, shape).
  Tensor reshape(const Shape& shape) const;  ///< ember::reshape(*this, shape).
  Tensor permute(const Shape& dims) const;   ///< ember::permute(*this, dims).
  Tensor transpose(int64_t d0, int64_t d1) const;  ///< ember::transpose(*this, d0, d1).
  Tensor t() const;  ///< transpose of a 2-D tensor; a 0-D or 1-D tensor is returned as it is
  Tensor narrow(int64_t dim, int64_t start, int64_t length) const;  ///< ember::narrow(*this, dim, start, length).
  Tensor select(int64_t dim, int64_t index) const;                  ///< ember::select(*this, dim, index).
  Tensor expand(const Shape& shape) const;                          ///< ember::expand(*this, shape).
  Tensor squeeze(int64_t dim) const;    ///< ember::squeeze(*this, dim).
  Tensor squeeze() const;               ///< ember::squeeze(*this).
  Tensor unsqueeze(int64_t dim) const;  ///< ember::unsqueeze(*this, dim).
  Tensor flatten(int64_t start_dim = 0, int64_t end_dim = -1) const;  ///< ember::flatten(*this, start_dim, end_dim).
  Tensor sum() const;  ///< The sum of all elements (0-dim).
  Tensor sum(const Shape& dims, bool keepdim = false) const;  ///< ember::sum(*this, dims, keepdim).
  Tensor mean() const;  ///< The mean of all elements (0-dim).
  Tensor mean(const Shape& dims, bool keepdim = false) const;  ///< ember::mean(*this, dims, keepdim).

 private:
  IntrusivePtr<TensorImpl> impl_;
};

std::ostream& operator<<(std::ostream& os, const Tensor& t);  ///< Prints t.str().

}  // namespace ember
