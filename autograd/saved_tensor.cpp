#include "autograd/saved_tensor.h"

namespace ember::autograd {

SavedTensor::SavedTensor(const Tensor& t, bool is_output) : is_output_(is_output), was_defined_(t.defined()) {
  if (!t.defined()) return;
  version_ = t.version();
  if (is_output) {
    output_nr_ = t.output_nr();
    output_requires_grad_ = t.requires_grad();
    data_ = t.detach();
  } else {
    data_ = t;
  }
}

Tensor SavedTensor::unpack(Node& owner, int index) const {
  if (!was_defined_) return {};
  if (released_)
    throw AutogradError(std::string("backward through the graph a second time: the saved tensors of ") + owner.name() +
                        " were freed by the first backward; pass retain_graph=true to the first call");
  if (data_.version() != version_)
    throw AutogradError(std::string("a tensor saved for the backward of ") + owner.name() + " (saved tensor " +
                        std::to_string(index) + ", shape " + to_string(data_.shape()) +
                        ") was modified by an in-place operation: it is at version " +
                        std::to_string(data_.version()) + ", expected version " + std::to_string(version_));
  if (!is_output_ || !output_requires_grad_) return data_;
  Tensor t = data_.detach();
  t.set_grad_fn(owner.shared_from_this(), output_nr_);
  return t;
}

}  // namespace ember::autograd
