/// @file
/// DistributedDataParallel: one model trained by every rank of a process group on its own part of
/// the batch, gradients averaged across ranks during backward, as PyTorch's DDP does it
/// (`docs/reference.md#data-parallel-semantics`):
/// - At construction rank 0's parameters and buffers are broadcast, so every rank starts equal.
/// - Gradients live in flat buckets, one dtype and device each, filled in reverse registration order
///   (the order backward produces them): the first bucket holds up to first_bucket_mb, the others up
///   to bucket_cap_mb. Each parameter's .grad is a view into its bucket, so no copy is made.
/// - Each parameter's post-accumulate-grad hook marks it ready; once a bucket's parameters are all
///   ready, and every bucket before it was launched, it is averaged across ranks on a communication
///   thread (on its own CUDA stream for CUDA tensors) while backward goes on. Buckets launch in the
///   same order on every rank, whatever order their gradients arrive in.
/// - When backward ends (an autograd callback), it waits for every bucket: the optimizer step that
///   follows sees averaged gradients. A parameter that got no gradient raises ValueError naming it,
///   unless find_unused_parameters (which walks the forward's graph to find them; costly).
/// - Buffers (batch-norm statistics) are broadcast from rank 0 before each forward, as PyTorch does.
/// Wrap the module after moving it to its device; build the optimizer from the wrapper's (the
/// module's) parameters. Every rank must call forward and backward in step.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "dist/no_sync.h"
#include "dist/process_group.h"
#include "nn/module.h"

namespace ember::dist {

/// DistributedDataParallel's settings, with PyTorch's defaults.
struct DDPOptions {
  double bucket_cap_mb = 25;   ///< PyTorch's bucket_cap_mb
  double first_bucket_mb = 1;  ///< the first bucket (the last layers) small, so communication starts early
  /// walk each forward's graph for parameters it did not use (costly); off: such a parameter raises
  bool find_unused_parameters = false;
  bool broadcast_buffers = true;  ///< rank 0's buffers before each forward
  /// ember's ring_all_reduce (true) or the backend's own all_reduce (false). Unset: the ring over
  /// Gloo, ncclAllReduce over NCCL (NCCL's own rings and trees use NVLink and the network better).
  std::optional<bool> use_ring{};
};

/// Data-parallel training of one module over a process group, as torch.nn.parallel.
/// DistributedDataParallel (see the file's description). Call it as the module it wraps.
class DistributedDataParallel : public nn::UnaryModule {
  struct State;  // shared with the parameters' hooks, which hold it weakly

 public:
  /// Wraps `module` (already on its device) and broadcasts rank 0's parameters and buffers. Raises
  /// ValueError for a null module or group, a module without parameters that require grad, or a bad
  /// bucket size.
  DistributedDataParallel(std::shared_ptr<nn::UnaryModule> module, std::shared_ptr<ProcessGroup> group,
                          DDPOptions options = {});
  ~DistributedDataParallel() override;

  std::string name() const override { return "DistributedDataParallel"; }
  std::string extra_repr() const override;

  /// The wrapped module (what checkpoints hold).
  const std::shared_ptr<nn::UnaryModule>& module() const { return module_; }
  ProcessGroup& process_group() const;  ///< The group gradients are averaged over.

  /// Gradient accumulation: while the guard lives, backward only accumulates into the buckets; the
  /// first backward after it averages the sum (PyTorch's no_sync()).
  using NoSync = dist::NoSync;
  NoSync no_sync();  ///< A guard that turns the averaging off while it lives.

  /// A bucket, as buckets() lists them in launch order: the dotted names of its parameters, its
  /// elements and dtype.
  struct Bucket {
    std::vector<std::string> parameters;  ///< the bucket's parameters, by dotted name
    int64_t numel;                        ///< elements in the bucket
    DType dtype;                          ///< its gradients' dtype
  };
  std::vector<Bucket> buckets() const;  ///< The buckets, in launch order.

 private:
  std::shared_ptr<nn::UnaryModule> module_;
  std::shared_ptr<State> state_;
 protected:
  Tensor forward(const Tensor& x) override;
};

}  // namespace ember::dist
