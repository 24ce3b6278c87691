/// @file
/// ZeroOptimizer: any ember optimizer run under ZeRO (`docs/reference.md#zero`): a ZeroPartition of the
/// model over the group, and the optimizer built over this rank's pieces only, so its state (and
/// its memory) is divided by the number of ranks. The loop stays a plain one:
///
///   dist::ZeroOptimizer zero(model, group, [](std::vector<Tensor> p) {
///     return std::make_unique<optim::AdamW>(std::move(p), opts); }, {.stage = 2});
///   loss = cross_entropy(model(x), y); loss.backward(); zero.step(); zero.zero_grad();
///
/// The mixed-precision modes combine the partition with their scaler and master weights themselves
/// (train::TrainingPrecision).
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "dist/zero_partition.h"
#include "optim/optimizer.h"

namespace ember::dist {

/// NotImplementedError for an optimizer that cannot step shards (one that is not elementwise: LAMB).
void check_shardable(const optim::Optimizer& optimizer);

/// An optimizer under ZeRO (see the file's description): step() and zero_grad() in place of the
/// inner optimizer's.
class ZeroOptimizer {
 public:
  /// Builds the inner optimizer over the tensors it is to step (this rank's pieces).
  using InnerFactory = std::function<std::unique_ptr<optim::Optimizer>(std::vector<Tensor> pieces)>;

  /// Partitions `module` over `group` (ZeroPartition's errors) and builds the inner optimizer over this
  /// rank's pieces; ValueError when the factory returns none, NotImplementedError for one that cannot
  /// step shards (check_shardable).
  ZeroOptimizer(nn::Module& module, std::shared_ptr<ProcessGroup> group, const InnerFactory& make_inner,
                ZeroOptions options = {});

  /// Clips every rank's gradients together to a 2-norm of max_norm (the global norm, as one
  /// process over the whole batch would) and returns that norm, before clipping.
  Tensor clip_grad_norm_(double max_norm);
  /// Steps this rank's pieces with the averaged gradients, then gathers the updated parameters.
  void step(const optim::StepInputs& inputs = {});
  void zero_grad();  ///< Sets the gradients of this rank's pieces to none (the inner optimizer's zero_grad()).

  optim::Optimizer& inner() { return *inner_; }  ///< The optimizer over this rank's pieces (what a scheduler drives).
  ZeroPartition& partition() { return partition_; }  ///< The partition of the model.

 private:
  ZeroPartition partition_;
  std::unique_ptr<optim::Optimizer> inner_;
};

}  // namespace ember::dist
