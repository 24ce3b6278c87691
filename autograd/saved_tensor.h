/// @file
/// A tensor kept by a node for its backward. It remembers the storage version at save time, so a
/// later in-place write is reported instead of silently giving a wrong gradient. While saved-tensor
/// hooks are installed (torch.autograd.graph.saved_tensors_hooks), a node keeps what the pack hook
/// made of the tensor instead, and gets the tensor back from it when backward needs it: activation
/// checkpointing (nn/checkpoint.h) keeps nothing and recomputes.
#pragma once

#include <functional>
#include <memory>

#include "autograd/node.h"

namespace ember::autograd {

/// What a pack hook makes of a saved tensor: it gives the tensor back when backward needs it.
class PackedTensor {
 public:
  virtual ~PackedTensor() = default;
  /// The saved tensor's value (the hook answers for it: no version check is made).
  virtual Tensor unpack() = 0;
};

/// Turns a tensor a node saves into what the node keeps. An output of the saving node is passed
/// detached (a hook that keeps it then makes no cycle through the node).
using PackHook = std::function<std::shared_ptr<PackedTensor>(const Tensor& saved)>;

/// While alive, every tensor a node saves for backward on this thread goes through `pack`. Hooks
/// nest: the innermost one applies, and the previous one returns at destruction.
class SavedTensorHooks {
 public:
  /// Installs `pack` on this thread; ValueError for an empty hook.
  explicit SavedTensorHooks(PackHook pack);
  ~SavedTensorHooks();
  SavedTensorHooks(const SavedTensorHooks&) = delete;
  SavedTensorHooks& operator=(const SavedTensorHooks&) = delete;

 private:
  PackHook pack_;
  const PackHook* previous_;
};

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
  void release() {
    data_ = Tensor();
    packed_.reset();
    released_ = true;
  }
  bool defined() const { return was_defined_; }  ///< Whether a defined tensor was saved.

 private:
  // `data` as the node's backward sees it: an output of the node gets the node back as its grad_fn.
  Tensor attach(const Tensor& data, Node& owner) const;

  Tensor data_;
  std::shared_ptr<PackedTensor> packed_;  // instead of data_ when a pack hook was installed
  uint64_t version_ = 0;
  uint32_t output_nr_ = 0;
  bool is_output_ = false;
  bool output_requires_grad_ = false;
  bool was_defined_ = false;
  bool released_ = false;
};

}  // namespace ember::autograd
