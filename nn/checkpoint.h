/// @file
/// Activation checkpointing: trading compute for memory, with the semantics of PyTorch's
/// torch.utils.checkpoint(use_reentrant=False).
///
/// checkpoint(fn, inputs) runs fn and records its graph as usual, but the tensors its ops save for
/// backward are not kept (autograd/saved_tensor.h's pack hook): only the inputs are. When backward
/// first needs one of them, fn runs again on the same inputs, under the autocast state and from the
/// default generator's position of the first run (dropout draws the same masks), with grad mode on,
/// and the saved tensors are taken from that run. So:
/// - gradients reach the inputs and every parameter fn uses, whether or not an input requires grad,
///   bit-equal to a run without checkpointing (the same ops on the same values);
/// - autograd::grad and double backward work where fn's ops allow them;
/// - an input modified in place between the forward and the backward raises AutogradError naming it,
///   as does a recompute that saves other tensors than the first run (fn must be deterministic in
///   what it computes: no control flow on data that changed);
/// - batch norm updates its running statistics in the first run only (is_recomputing()).
/// Outside grad mode fn just runs. Only the default generator is replayed: a region that draws from
/// another generator gets new numbers in the recompute.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "nn/module.h"

namespace ember::nn {

/// A checkpointed region: tensors in, tensors out.
using CheckpointFunction = std::function<std::vector<Tensor>(const std::vector<Tensor>& inputs)>;

/// fn(inputs), keeping only the inputs for backward and recomputing the rest (see the file's
/// description). ValueError for an empty fn; CaptureError inside a captured step (train::CompiledStep),
/// whose random numbers a recompute could not replay.
std::vector<Tensor> checkpoint(const CheckpointFunction& fn, const std::vector<Tensor>& inputs);
/// The one-tensor form: fn(input) checkpointed.
Tensor checkpoint(const std::function<Tensor(const Tensor&)>& fn, const Tensor& input);

/// torch.utils.checkpoint_sequential: `modules` cut into `segments` runs of consecutive children (as
/// even as the count allows); every run but the last is one checkpointed region, so only the
/// segments' boundaries are kept. ValueError when segments is below 1 or above the module count.
Tensor checkpoint_sequential(const Sequential& modules, int segments, const Tensor& input);

/// Whether this thread is inside a checkpoint's recompute: state updates that must happen once per
/// step (batch norm's running statistics) are skipped there.
bool is_recomputing();

/// MMEngine's activation_checkpointing list: every module below `root` (itself included) whose type
/// name (Module::name(): "Bottleneck", "Block") is in `module_types` computes checkpointed from now on
/// (UnaryModule::set_activation_checkpointing). Returns how many were switched; ValueError naming the
/// types `root` does have when one of `module_types` matches none, or names a module that is not a
/// UnaryModule.
int64_t apply_activation_checkpointing(Module& root, const std::vector<std::string>& module_types);

/// The module types ember's models checkpoint by default: a ResNet's blocks (BasicBlock, Bottleneck),
/// a VisionTransformer's encoder blocks (Block). ValueError for another model, naming its type.
std::vector<std::string> default_checkpoint_modules(const Module& model);

}  // namespace ember::nn
