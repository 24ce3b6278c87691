#include "autograd/saved_tensor.h"

namespace ember::autograd {

namespace {
thread_local const PackHook* current_pack_hook = nullptr;  // the innermost installed hook
}  // namespace

SavedTensorHooks::SavedTensorHooks(PackHook pack) : pack_(std::move(pack)), previous_(current_pack_hook) {
  if (!pack_) throw ValueError("SavedTensorHooks: the pack hook is empty");
  current_pack_hook = &pack_;
}

SavedTensorHooks::~SavedTensorHooks() { current_pack_hook = previous_; }

SavedTensor::SavedTensor(const Tensor& t, bool is_output) : is_output_(is_output), was_defined_(t.defined()) {
  if (!t.defined()) return;
  version_ = t.version();
  if (is_output) {
    output_nr_ = t.output_nr();
    output_requires_grad_ = t.requires_grad();
  }
  const Tensor kept = is_output ? t.detach() : t;
  if (current_pack_hook) {
    packed_ = (*current_pack_hook)(kept);
    if (!packed_) throw AutogradError("a saved-tensor pack hook returned nothing for a tensor of shape " + to_string(t.shape()));
  } else {
    data_ = kept;
  }
}

Tensor SavedTensor::unpack(Node& owner, int index) const {
  if (!was_defined_) return {};
  if (released_)
    throw AutogradError(std::string("backward through the graph a second time: the saved tensors of ") + owner.name() +
                        " were freed by the first backward; pass retain_graph=true to the first call");
  if (packed_) return attach(packed_->unpack(), owner);
  if (data_.version() != version_)
    throw AutogradError(std::string("a tensor saved for the backward of ") + owner.name() + " (saved tensor " +
                        std::to_string(index) + ", shape " + to_string(data_.shape()) +
                        ") was modified by an in-place operation: it is at version " +
                        std::to_string(data_.version()) + ", expected version " + std::to_string(version_));
  return attach(data_, owner);
}

Tensor SavedTensor::attach(const Tensor& data, Node& owner) const {
  if (!is_output_ || !output_requires_grad_) return data;
  Tensor t = data.detach();
  t.set_grad_fn(owner.shared_from_this(), output_nr_);
  return t;
}

}  // namespace ember::autograd
