// Conversions and copies: to(dtype), to(device), pin_memory, contiguous, clone, copy_.
#include "tensor/ops.h"
#include "tensor/primitives/creation.h"
#include "tensor/primitives/elementwise.h"

namespace ember {

Tensor to(const Tensor& x, DType dtype) {
  if (x.dtype() == dtype) return x;
  return run1(Cast(dtype, Cast::Layout::like_input), {x});
}

Tensor contiguous(const Tensor& x) { return x.is_contiguous() ? x : run1(Cast(x.dtype()), {x}); }

Tensor clone(const Tensor& x) { return run1(Cast(x.dtype()), {x}); }

namespace {

size_t nbytes_of(const Tensor& x) { return static_cast<size_t>(x.numel() * dtype_size(x.dtype())); }

// A contiguous copy of x in `storage` (of nbytes_of(x) bytes); for autograd, a move between devices.
Tensor copy_to_storage(const Tensor& x, IntrusivePtr<Storage> storage, bool non_blocking) {
  const Tensor src = x.contiguous();
  Tensor out(make_intrusive<TensorImpl>(std::move(storage), 0, x.shape(), contiguous_strides(x.shape()), x.dtype()));
  backend::copy_bytes(out.raw_data(), out.device(), src.raw_data(), src.device(), nbytes_of(src), non_blocking);
  if (autograd::GradMode::is_enabled() && x.requires_grad()) {
    auto node = std::make_shared<ToDevice>(out.device(), non_blocking);
    node->record_inputs({x}, kSaveNone);
    node->record_outputs({out}, kSaveNone);
  }
  return out;
}

}  // namespace

Tensor to(const Tensor& x, Device device, bool non_blocking) {
  if (x.device() == device) return x;
  if (device.is_cuda() && device.index >= backend::cuda_device_count())
    throw DeviceError("to: " + device.str() + " requested but " + std::to_string(backend::cuda_device_count()) +
                      " CUDA device(s) are available");
  return copy_to_storage(x, make_intrusive<Storage>(nbytes_of(x), device), non_blocking);
}

Tensor pin_memory(const Tensor& x) {
  if (!x.device().is_cpu())
    throw ValueError("pin_memory: only CPU tensors can be pinned, this one is on " + x.device().str());
  if (x.is_pinned()) return x;
  return copy_to_storage(x, make_intrusive<Storage>(nbytes_of(x), Storage::Pinned{}), false);
}

std::vector<Tensor> ToDevice::vjp(const std::vector<Tensor>& g, const std::vector<Tensor>&,
                                  const std::vector<Tensor>&) {
  return {to(g[0], input_meta(0).device)};
}

Tensor& copy_(Tensor& self, const Tensor& src, bool non_blocking) {
  const Tensor s = src.device() == self.device() ? src : to(src, self.device(), non_blocking);
  run_inplace(CopyInto{}, {self, s});
  return self;
}

std::vector<OutputSpec> CopyInto::infer(const std::vector<Tensor>& in) const {
  if (!(broadcast_shapes(in[0].shape(), in[1].shape(), "copy_") == in[0].shape()))
    throw ShapeError("copy_: source of shape " + to_string(in[1].shape()) + " cannot be broadcast to " +
                     to_string(in[0].shape()));
  return {{in[0].shape(), in[0].dtype()}};
}

std::vector<Tensor> Cast::vjp(const std::vector<Tensor>& g, const std::vector<Tensor>&, const std::vector<Tensor>&) {
  return {g[0]};  // Primitive::apply converts it back to the input's dtype
}

std::vector<Tensor> CopyInto::vjp(const std::vector<Tensor>& g, const std::vector<Tensor>&,
                                  const std::vector<Tensor>&) {
  // self's old values were overwritten: they get no gradient; src gets g summed to its shape.
  return {zeros_like(g[0]), sum_to(g[0], input_meta(1).shape)};
}

std::vector<Tensor> Fill::vjp(const std::vector<Tensor>& g, const std::vector<Tensor>&, const std::vector<Tensor>&) {
  return {zeros_like(g[0])};
}

}  // namespace ember
