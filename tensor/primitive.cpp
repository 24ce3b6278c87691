#include "tensor/primitive.h"

#include "tensor/autocast.h"
#include "tensor/ops.h"

namespace ember {

std::vector<Tensor> Primitive::vjp(const std::vector<Tensor>&, const std::vector<Tensor>&,
                                   const std::vector<Tensor>&) {
  throw AutogradError(std::string(name()) + " is not differentiable");
}

void Primitive::record_inputs(const std::vector<Tensor>& inputs, int saves, unsigned saved_input_mask) {
  auto& edges = mutable_next_edges();
  edges.reserve(inputs.size());
  input_meta_.reserve(inputs.size());
  for (const Tensor& t : inputs) {
    edges.push_back(autograd::gradient_edge(t));
    input_meta_.push_back({t.shape(), t.dtype(), t.device()});
  }
  if (saves & kSaveInputs)
    for (size_t i = 0; i < inputs.size(); ++i)
      saved_inputs_.emplace_back((saved_input_mask >> i) & 1u ? inputs[i] : Tensor(), /*is_output=*/false);
}

void Primitive::record_outputs(const std::vector<Tensor>& outputs, int saves) {
  auto self = shared_from_this();
  auto& meta = mutable_output_meta();
  for (size_t i = 0; i < outputs.size(); ++i) {
    const Tensor& t = outputs[i];
    meta.push_back({t.shape(), t.dtype(), t.device()});
    if (is_floating(t.dtype())) t.set_grad_fn(self, static_cast<uint32_t>(i));
  }
  if (saves & kSaveOutputs)
    for (const Tensor& t : outputs) saved_outputs_.emplace_back(t, /*is_output=*/true);
}

std::vector<Tensor> Primitive::apply(std::vector<Tensor>&& grad_outputs) {
  std::vector<Tensor> inputs(input_meta_.size()), outputs(output_meta().size());
  for (size_t i = 0; i < saved_inputs_.size(); ++i) inputs[i] = saved_inputs_[i].unpack(*this, static_cast<int>(i));
  for (size_t i = 0; i < saved_outputs_.size(); ++i)
    outputs[i] = saved_outputs_[i].unpack(*this, static_cast<int>(saved_inputs_.size() + i));
  // Backward ops run in the dtypes autocast chose for the forward (PyTorch's documented rule).
  std::vector<Tensor> grads;
  {
    amp::detail::Pause no_autocast;
    grads = vjp(grad_outputs, inputs, outputs);
  }
  autograd::conform_input_gradients(*this, grads, input_meta_);
  return grads;
}

void Primitive::release_saved() {
  for (auto& s : saved_inputs_) s.release();
  for (auto& s : saved_outputs_) s.release();
}

namespace detail {

Tensor empty_output(const OutputSpec& spec, Device device) {
  const Tensor out = Tensor::empty(spec.shape, TensorOptions(spec.dtype).with_device(device));
  if (spec.strides.empty()) return out;
  return Tensor(make_intrusive<TensorImpl>(out.storage(), 0, spec.shape, spec.strides, spec.dtype));
}

Device common_device(const char* op, const std::vector<Tensor>& inputs) {
  if (inputs.empty()) return kCPU;
  const Device d = inputs[0].device();
  for (size_t i = 1; i < inputs.size(); ++i)
    if (!(inputs[i].device() == d))
      throw DeviceError(std::string(op) + ": expected all tensors on one device, found " + d.str() + " (input 0) and " +
                        inputs[i].device().str() + " (input " + std::to_string(i) + ")");
  return d;
}

bool any_requires_grad(const std::vector<Tensor>& inputs) {
  for (const Tensor& t : inputs)
    if (t.requires_grad()) return true;
  return false;
}

void check_nan_outputs(const char* op, const std::vector<Tensor>& outputs) {
  NoGradGuard no_grad;
  autograd::AnomalyModeGuard not_while_checking(false);  // the check runs ops itself
  for (size_t i = 0; i < outputs.size(); ++i) {
    const Tensor& t = outputs[i];
    if (!is_floating(t.dtype()) || t.numel() == 0) continue;
    if (amax(ne(t, t).to(DType::u8)).item<int64_t>() != 0)
      throw AutogradError(std::string("anomaly: ") + op + " produced a NaN in output " + std::to_string(i) +
                          " of shape " + to_string(t.shape()));
  }
}

void check_inplace_allowed(const char* op, const Tensor& self) {
  if (self.is_leaf() && self.requires_grad())
    throw AutogradError(std::string(op) + "_: a leaf tensor that requires grad is used in an in-place operation; "
                        "do it under NoGradGuard or on a clone");
  if (self.impl()->is_view)
    throw AutogradError(std::string(op) + "_: in-place operation on a view while recording for backward is not "
                        "supported; use the out-of-place form");
}

void check_no_self_overlap(const char* op, const Tensor& self) {
  for (int d = 0; d < self.dim(); ++d)
    if (self.size(d) > 1 && self.stride(d) == 0)
      throw ValueError(std::string(op) + "_: the written-to tensor (shape " + to_string(self.shape()) + ", strides " +
                       to_string(self.strides()) + ") has elements that share memory, as an expanded tensor does; "
                       "write into a clone()");
}

namespace {

// The element range [first, last] of t's storage its elements reach (ember's strides are never negative).
std::pair<int64_t, int64_t> element_extent(const Tensor& t) {
  int64_t last = t.offset();
  for (int d = 0; d < t.dim(); ++d) last += (t.size(d) - 1) * t.stride(d);
  return {t.offset(), last};
}

}  // namespace

std::optional<std::vector<Tensor>> apart_from_self(const std::vector<Tensor>& inputs) {
  const Tensor& self = inputs[0];
  std::optional<std::vector<Tensor>> out;
  if (self.numel() == 0) return out;
  for (size_t i = 1; i < inputs.size(); ++i) {
    const Tensor& in = inputs[i];
    if (!in.defined() || in.numel() == 0 || in.storage().get() != self.storage().get()) continue;
    const bool same_view = in.offset() == self.offset() && in.shape() == self.shape() &&
                           in.strides() == self.strides() && in.dtype() == self.dtype();
    if (same_view) continue;
    const auto [a_first, a_last] = element_extent(self);
    const auto [b_first, b_last] = element_extent(in);
    // Extents in bytes: a dtype view (same storage, other element size) compares as bytes.
    const int64_t a_item = dtype_size(self.dtype()), b_item = dtype_size(in.dtype());
    if (a_first * a_item > b_last * b_item + b_item - 1 || b_first * b_item > a_last * a_item + a_item - 1) continue;
    if (!out) out = inputs;
    (*out)[i] = clone(in);
  }
  return out;
}

Tensor value_before_write(const Tensor& self, bool keep_values) {
  auto* s = self.impl();
  Tensor alias(make_intrusive<TensorImpl>(s->storage, s->offset, s->shape, s->strides, s->dtype));
  if (self.grad_fn()) alias.set_grad_fn(self.grad_fn(), self.output_nr());
  return keep_values ? clone(alias) : alias;
}

}  // namespace detail
}  // namespace ember
