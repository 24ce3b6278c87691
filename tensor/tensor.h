// Tensor: a cheap handle (one intrusive pointer) to storage + offset + shape + strides + dtype,
// with autograd metadata allocated only for tensors that take part in a graph.
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

// A hook sees a gradient and may return a replacement (or an undefined Tensor to keep it).
using GradHook = std::function<Tensor(const Tensor& grad)>;
// Runs after a leaf's .grad was updated; receives the leaf itself.
using PostAccumulateGradHook = std::function<void(const Tensor& leaf)>;

struct TensorImpl final : RefCounted {
  TensorImpl(IntrusivePtr<Storage> s, int64_t off, Shape sh, Strides st, DType dt);
  ~TensorImpl();
  IntrusivePtr<Storage> storage;
  int64_t offset = 0;  // in elements
  Shape shape;
  Strides strides;  // in elements
  DType dtype;
  bool is_wrapped_number = false;  // a C++ scalar turned tensor: lowest priority in promotion
  bool is_view = false;            // made by a view op: shares storage with its base
  std::unique_ptr<autograd::AutogradMeta> autograd;
};

// Options for factory functions: Tensor::zeros({2, 3}, DType::f64), ones(s, Device::parse("cuda")).
struct TensorOptions {
  DType dtype = kDefaultFloat;
  Device device = kCPU;
  bool requires_grad = false;
  TensorOptions() = default;
  TensorOptions(DType d) : dtype(d) {}   // NOLINT: implicit on purpose
  TensorOptions(Device d) : device(d) {}  // NOLINT
  TensorOptions with_dtype(DType d) const { auto o = *this; o.dtype = d; return o; }
  TensorOptions with_device(Device d) const { auto o = *this; o.device = d; return o; }
  TensorOptions with_requires_grad(bool r = true) const { auto o = *this; o.requires_grad = r; return o; }
};

class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(IntrusivePtr<TensorImpl> impl) : impl_(std::move(impl)) {}
  // A fresh, uninitialised, contiguous tensor.
  static Tensor empty(const Shape& shape, TensorOptions opts = {});

  bool defined() const { return static_cast<bool>(impl_); }
  TensorImpl* impl() const { return impl_.get(); }
  bool is_same(const Tensor& o) const { return impl_ == o.impl_; }
  int64_t use_count() const { return impl_ ? impl_->use_count() : 0; }

  const Shape& shape() const { return impl_->shape; }
  const Strides& strides() const { return impl_->strides; }
  int dim() const { return impl_->shape.size(); }
  int64_t size(int64_t d) const;
  int64_t stride(int64_t d) const;
  int64_t numel() const { return ember::numel(impl_->shape); }
  int64_t offset() const { return impl_->offset; }
  DType dtype() const { return impl_->dtype; }
  Device device() const { return impl_->storage->device(); }
  const IntrusivePtr<Storage>& storage() const { return impl_->storage; }
  bool is_contiguous() const;
  bool is_pinned() const { return impl_->storage->is_pinned(); }  // in page-locked host memory
  bool is_floating_point() const { return is_floating(dtype()); }

  // Pointer to the first element; T must be the storage type of dtype() (checked).
  template <class T> T* data() const {
    if (dtype_v<T> != dtype())
      throw DTypeError(std::string("data<T>(): tensor is ") + dtype_name(dtype()) + ", asked for " +
                       dtype_name(dtype_v<T>));
    return static_cast<T*>(impl_->storage->data()) + impl_->offset;
  }
  void* raw_data() const;

  // ---- host access
  // The single value of a one-element tensor, converted to T.
  template <class T> T item() const;
  // All elements in row-major order, converted to T, copied to the host.
  template <class T> std::vector<T> to_vector() const;
  std::string str() const;  // PyTorch-style printing: tensor([[1.0000, 2.0000]], dtype=...)

  // ---- autograd
  bool requires_grad() const;
  Tensor& requires_grad_(bool enabled = true);
  bool is_leaf() const;  // no grad_fn
  Tensor grad() const;
  void set_grad(const Tensor& g) const;
  const std::shared_ptr<autograd::Node>& grad_fn() const;
  uint32_t output_nr() const;
  void set_grad_fn(std::shared_ptr<autograd::Node> fn, uint32_t output_nr) const;
  // Backpropagates from this tensor; `grad` defaults to ones for a one-element tensor.
  void backward(const Tensor& grad = {}, bool retain_graph = false, bool create_graph = false) const;
  Tensor detach() const;  // shares storage, no history
  void register_hook(GradHook hook) const;
  void register_post_accumulate_grad_hook(PostAccumulateGradHook hook) const;
  void retain_grad() const;  // keep .grad on a non-leaf after backward
  uint64_t version() const { return impl_->storage->version(); }
  autograd::AutogradMeta* autograd_meta() const { return impl_->autograd.get(); }
  autograd::AutogradMeta& ensure_autograd_meta() const;

  // ---- conversions and views (free functions in tensor/ops.h hold the full set)
  Tensor to(DType dtype) const;
  Tensor to(Device device, bool non_blocking = false) const;
  Tensor pin_memory() const;
  Tensor contiguous() const;
  Tensor clone() const;
  Tensor view(const Shape& shape) const;
  Tensor reshape(const Shape& shape) const;
  Tensor permute(const Shape& dims) const;
  Tensor transpose(int64_t d0, int64_t d1) const;
  Tensor t() const;  // transpose of a 2-D tensor
  Tensor narrow(int64_t dim, int64_t start, int64_t length) const;
  Tensor select(int64_t dim, int64_t index) const;
  Tensor expand(const Shape& shape) const;
  Tensor squeeze(int64_t dim) const;
  Tensor squeeze() const;
  Tensor unsqueeze(int64_t dim) const;
  Tensor flatten(int64_t start_dim = 0, int64_t end_dim = -1) const;
  Tensor sum() const;
  Tensor sum(const Shape& dims, bool keepdim = false) const;
  Tensor mean() const;
  Tensor mean(const Shape& dims, bool keepdim = false) const;

 private:
  IntrusivePtr<TensorImpl> impl_;
};

std::ostream& operator<<(std::ostream& os, const Tensor& t);

}  // namespace ember
