/// @file
/// DataParallel: one interface over ember's data-parallel strategies, so that a training loop does not
/// change with the strategy. DistributedDataParallel wraps the model (every rank holds everything and
/// gradients are averaged during backward); ZeRO wraps the optimizer (ZeroOptimizer: optimizer state,
/// then gradients, then parameters divided among the ranks). DataParallel takes the model and a factory
/// for the optimizer and builds whichever the strategy names; the loop is the same for all four:
///
///   dist::DataParallel dp(model, group, [](std::vector<Tensor> params) {
///     return std::make_unique<optim::AdamW>(std::move(params), optim::AdamWOptions{.lr = 1e-3}); },
///     {.strategy = dist::Strategy::zero3});
///   for (...) {
///     Tensor loss = cross_entropy(dp(x), y);
///     loss.backward();          // gradients averaged (DDP) or reduce-scattered (ZeRO) over the ranks
///     dp.clip_grad_norm_(1.0);  // the norm of the whole model's gradient, every rank's part in it
///     dp.step();
///     dp.zero_grad();
///   }
///
/// A scheduler drives optimizer() (under ZeRO, the optimizer over this rank's pieces). To save or compare
/// the model's weights, hold gathered() (ZeRO-3 keeps only a shard between uses). Mixed precision with a
/// loss scaler under ZeRO needs the ranks to agree on overflow: train::TrainingPrecision does that.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string_view>
#include <vector>

#include "dist/distributed_data_parallel.h"
#include "dist/zero_optimizer.h"
#include "dist/zero_partition.h"
#include "optim/optimizer.h"

namespace ember::dist {

/// How the ranks share the training (the bytes each holds: dist/zero_partition.h).
enum class Strategy {
  ddp,    ///< DistributedDataParallel: everything on every rank, gradients all-reduced
  zero1,  ///< ZeRO stage 1: the optimizer state sharded
  zero2,  ///< ZeRO stage 2: and the gradients
  zero3,  ///< ZeRO stage 3: and the parameters, gathered for each use
};
const char* strategy_name(Strategy s);  ///< "ddp", "zero1", "zero2", "zero3"
/// The strategy of a name strategy_name() gives; ValueError naming the value and the choices.
Strategy parse_strategy(std::string_view name);

/// DataParallel's settings: the strategy and the knobs of the wrapper it builds.
struct DataParallelOptions {
  Strategy strategy = Strategy::ddp;  ///< which wrapper
  DDPOptions ddp{};                   ///< for Strategy::ddp
  /// For the ZeRO strategies. Its stage follows the strategy; a stage set here that differs raises.
  ZeroOptions zero{};
};

/// A model and its optimizer trained data-parallel by one strategy (see the file's description). Call
/// it as the model.
class DataParallel : public nn::UnaryModule {
 public:
  /// Builds the optimizer over the tensors it is to step (all parameters under DDP, this rank's
  /// pieces under ZeRO).
  using OptimizerFactory = std::function<std::unique_ptr<optim::Optimizer>(std::vector<Tensor> params)>;

  /// Wraps `model` (already on its device) over `group` as options.strategy says; the wrapper's
  /// errors (DistributedDataParallel's, ZeroOptimizer's), and ValueError for a null model or group,
  /// a factory that returns no optimizer, or a ZeRO stage that contradicts the strategy.
  DataParallel(std::shared_ptr<nn::UnaryModule> model, std::shared_ptr<ProcessGroup> group,
               const OptimizerFactory& make_optimizer, DataParallelOptions options = {});

  std::string name() const override { return "DataParallel"; }
  std::string extra_repr() const override;

  /// Steps the optimizer with the averaged gradients (under ZeRO: this rank's pieces, then the
  /// updated parameters are gathered).
  void step(const optim::StepInputs& inputs = {});
  void zero_grad();  ///< Sets the gradients to none (and forgets what no_sync() kept).
  /// Gradient accumulation: while the guard lives, backward keeps its gradients for the next one,
  /// which averages the sum (DDP's and ZeroPartition's no_sync(): at ZeRO stages 2 and 3 the
  /// shards still take each backward's average, adding them up).
  NoSync no_sync();
  /// Clips the whole model's gradient, across the ranks, to a 2-norm of max_norm; returns the norm
  /// before clipping, the same on every rank.
  Tensor clip_grad_norm_(double max_norm);

  /// While alive, every parameter is whole (ZeRO-3 gathers them; DDP and stages 1 and 2 always hold
  /// them whole, and then nothing is held): to save, compare or evaluate the weights outside forward.
  std::optional<ZeroPartition::Gathered> gathered();

  optim::Optimizer& optimizer();  ///< The optimizer that steps (what a scheduler drives).
  const std::shared_ptr<nn::UnaryModule>& module() const { return model_; }  ///< The model (what checkpoints hold).
  Strategy strategy() const { return strategy_; }  ///< The strategy it was built with.
  ProcessGroup& process_group() const { return *group_; }  ///< The group it trains over.
  /// The ZeRO partition (bytes per rank, units), or null under DDP.
  ZeroPartition* zero_partition() { return zero_ ? &zero_->partition() : nullptr; }

 protected:
  Tensor forward(const Tensor& x) override;

 private:
  Strategy strategy_;
  std::shared_ptr<nn::UnaryModule> model_;
  std::shared_ptr<ProcessGroup> group_;
  std::shared_ptr<DistributedDataParallel> ddp_;   // Strategy::ddp
  std::unique_ptr<optim::Optimizer> optimizer_;    // Strategy::ddp
  std::unique_ptr<ZeroOptimizer> zero_;            // the ZeRO strategies
};

}  // namespace ember::dist
