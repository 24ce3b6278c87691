#include "autograd/function.h"

#include <algorithm>

#include "tensor/primitive.h"

namespace ember::autograd {

void FunctionContext::save_for_backward(std::vector<Tensor> tensors) { to_save_ = std::move(tensors); }

std::vector<Tensor> FunctionContext::saved_tensors() const {
  if (!recorded_)
    throw AutogradError("saved_tensors(): nothing is recorded yet; call it in backward, not in forward");
  std::vector<Tensor> out;
  out.reserve(saved_.size());
  for (size_t i = 0; i < saved_.size(); ++i) out.push_back(saved_[i].unpack(*owner_, static_cast<int>(i)));
  return out;
}

bool FunctionContext::needs_input_grad(size_t index) const {
  if (index >= needs_input_grad_.size())
    throw IndexError("needs_input_grad(" + std::to_string(index) + "): forward took " +
                     std::to_string(needs_input_grad_.size()) + " arguments");
  return needs_input_grad_[index];
}

void FunctionContext::mark_non_differentiable(const std::vector<Tensor>& outputs) {
  for (const Tensor& t : outputs)
    if (t.defined()) non_differentiable_.push_back(t.impl());
}

FunctionNode::FunctionNode(std::string name, Backward backward, size_t slot_count, std::vector<size_t> tensor_slot,
                           const std::vector<Tensor>& inputs)
    : name_(std::move(name)), backward_(std::move(backward)), slot_count_(slot_count),
      tensor_slot_(std::move(tensor_slot)) {
  ctx_.owner_ = this;
  ctx_.needs_input_grad_.assign(slot_count_, false);
  if (detail::function_records(inputs))
    for (size_t i = 0; i < inputs.size(); ++i) ctx_.needs_input_grad_[tensor_slot_[i]] = inputs[i].requires_grad();
}

namespace {
TensorMeta meta_of(const Tensor& t) {
  return t.defined() ? TensorMeta{t.shape(), t.dtype(), t.device()} : TensorMeta{{}, DType::f32, kCPU};
}

bool same_tensor(const Tensor& a, const Tensor& b) { return a.defined() && b.defined() && a.impl() == b.impl(); }

// A new handle on t's elements with no history, for an output that forward did not compute itself (an
// input, or a tensor from outside that requires grad): giving it this node as grad_fn must not rewrite
// the caller's tensor.
Tensor alias_of(const Tensor& t) {
  const TensorImpl* s = t.impl();
  Tensor alias(make_intrusive<TensorImpl>(s->storage, s->offset, s->shape, s->strides, s->dtype));
  alias.impl()->is_view = true;
  return alias;
}
}  // namespace

std::vector<Tensor> FunctionNode::record(const std::vector<Tensor>& inputs, std::vector<Tensor> outputs) {
  if (!detail::function_records(inputs)) {
    ctx_.to_save_.clear();  // nothing will run backward: keep nothing alive
    return outputs;
  }
  for (const Tensor& t : inputs) {
    mutable_next_edges().push_back(gradient_edge(t));
    input_meta_.push_back(meta_of(t));
  }
  const auto self = shared_from_this();
  for (size_t i = 0; i < outputs.size(); ++i) {
    Tensor& t = outputs[i];
    mutable_output_meta().push_back(meta_of(t));
    if (!t.defined()) continue;
    const bool non_differentiable =
        std::ranges::find(ctx_.non_differentiable_, t.impl()) != ctx_.non_differentiable_.end();
    const bool foreign = t.requires_grad() || t.grad_fn() ||
                         std::ranges::any_of(inputs, [&](const Tensor& in) { return same_tensor(in, t); });
    if (foreign) t = alias_of(t);
    if (!non_differentiable && is_floating(t.dtype())) t.set_grad_fn(self, static_cast<uint32_t>(i));
  }
  for (const Tensor& t : ctx_.to_save_) {
    const bool is_output = std::ranges::any_of(outputs, [&](const Tensor& o) { return same_tensor(o, t); });
    ctx_.saved_.emplace_back(t, is_output);
  }
  ctx_.to_save_.clear();  // an output held here would hold this node: a cycle
  ctx_.non_differentiable_.clear();
  ctx_.recorded_ = true;
  return outputs;
}

std::vector<Tensor> FunctionNode::apply(std::vector<Tensor>&& grad_outputs) {
  std::vector<Tensor> grads;
  {
    amp::detail::Pause no_autocast;  // backward runs in the dtypes forward chose
    grads = backward_(ctx_, std::move(grad_outputs));
  }
  if (grads.size() != slot_count_)
    throw AutogradError("backward of " + name_ + " returned " + std::to_string(grads.size()) +
                        " gradients; forward took " + std::to_string(slot_count_) +
                        " arguments (one entry each, undefined for a non-tensor argument)");
  std::vector<Tensor> by_input(tensor_slot_.size());
  std::vector<bool> is_tensor_slot(slot_count_, false);
  for (size_t i = 0; i < tensor_slot_.size(); ++i) {
    by_input[i] = std::move(grads[tensor_slot_[i]]);
    is_tensor_slot[tensor_slot_[i]] = true;
  }
  for (size_t s = 0; s < slot_count_; ++s)
    if (!is_tensor_slot[s] && grads[s].defined())
      throw AutogradError("backward of " + name_ + " returned a gradient for argument " + std::to_string(s) +
                          ", which is not a tensor; return an undefined Tensor() there");
  conform_input_gradients(*this, by_input, input_meta_);
  return by_input;
}

void FunctionNode::release_saved() {
  for (SavedTensor& s : ctx_.saved_) s.release();
}

namespace detail {

bool function_records(const std::vector<Tensor>& inputs) {
  return GradMode::is_enabled() && ember::detail::any_requires_grad(inputs);
}

bool function_autocast(const std::string& name, std::vector<Tensor>& inputs) {
  if (!amp::detail::any_enabled() || !amp::find_policy(name)) return false;
  amp::detail::apply_policy(name, std::nullopt, inputs.data(), inputs.size());
  return true;
}

}  // namespace detail
}  // namespace ember::autograd
