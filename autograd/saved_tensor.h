/// @file
/// A tensor kept by a node for its backward. It remembers the storage version at save time, so a
/// later in-place write is reported instead of silently giving a wrong gradient.
#pragma once

#include <memory>

#include "autograd/node.h"

namespace ember::autograd {

/// A tensor a node keeps for its backward (see the file's description).
class SavedTensor {
 public:
  SavedTensor() = default;
  /// `is_output`: t is an output of the saving node; it is kept without history (no cycle) and
  /// reattached to the node when unpacked, so double backward still sees the dependency.
  SavedTensor(const Tensor& t, bool is_output);

  /// Raises AutogradError when released or modified in place since it was saved.
  Tensor unpack(Node& owner, int index) const;
  /// Frees the tensor (after a backward without retain_graph); unpack() then raises.
  void release() { data_ = Tensor(); released_ = true; }
  bool defined() const { return was_defined_; }  ///< Whether a defined tensor was saved.

 private:
  Tensor data_;
  uint64_t version_ = 0;
  uint32_t output_nr_ = 0;
  bool is_output_ = false;
  bool output_requires_grad_ = false;
  bool was_defined_ = false;
  bool released_ = false;
};

}  // namespace ember::autograd
