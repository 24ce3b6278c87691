// Conversions and copies: to(dtype), to(device), contiguous, clone, copy_.
#include "tensor/ops.h"
#include "tensor/primitives/creation.h"
#include "tensor/primitives/elementwise.h"

namespace ember {

Tensor to(const Tensor& x, DType dtype) {
  if (x.dtype() == dtype) return x;
  return run1(Cast(dtype), {x});
}

Tensor contiguous(const Tensor& x) { return x.is_contiguous() ? x : run1(Cast(x.dtype()), {x}); }

Tensor clone(const Tensor& x) { return run1(Cast(x.dtype()), {x}); }

Tensor to(const Tensor& x, Device device, bool non_blocking) {
  if (x.device() == device) return x;
  if (device.is_cuda() && device.index >= backend::cuda_device_count())
    throw DeviceError("to: " + device.str() + " requested but " + std::to_string(backend::cuda_device_count()) +
                      " CUDA device(s) are available");
  const Tensor src = x.contiguous();
  Tensor out = Tensor::empty(x.shape(), TensorOptions(x.dtype()).with_device(device));
  backend::copy_bytes(out.raw_data(), device, src.raw_data(), src.device(),
                      static_cast<size_t>(src.numel() * dtype_size(src.dtype())), non_blocking);
  if (autograd::GradMode::is_enabled() && x.requires_grad()) {
    auto node = std::make_shared<ToDevice>(device, non_blocking);
    node->record_inputs({x}, kSaveNone);
    node->record_outputs({out}, kSaveNone);
  }
  return out;
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
