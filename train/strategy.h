/// @file
/// How a training job shares its work among ranks, in one place: the strategies users name
/// (`train --strategy`, bench_train's `--strategy=`), each owning how the model is wrapped, how its
/// gradients are reduced, what the optimizer steps and what happens around the step, and how
/// checkpoints are written and read.
///   none      one process: the model's parameters, plain checkpoints
///   ddp       dist::DistributedDataParallel wraps the model; gradients averaged in backward; rank 0
///             writes the checkpoints, which one process resumes
///   zero1..3  dist::ZeroPartition: the optimizer steps this rank's pieces; the ranks agree on
///             overflow and on the gradient norm; after the step the updated shards are gathered;
///             every rank writes its shard of each checkpoint (train/sharded_state.h)
///   fsdp      FSDP's names for them (sharding_strategy): FULL_SHARD is zero3 with FSDP's defaults
///             (stage3_param_persistence_threshold 0, and min_num_params 1e7 unless module types are
///             wrapped), SHARD_GRAD_OP zero2, NO_SHARD ddp
/// train::TrainingPrecision calls the step's part of its strategy; the Runner asks it for the
/// accumulation guard, the model checkpoints hold, and the checkpoint's reading and writing.
#pragma once

#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "dist/distributed_data_parallel.h"
#include "dist/zero_partition.h"
#include "nn/module.h"
#include "train/checkpoint.h"

namespace ember::train {

class TrainingPrecision;

/// The strategy names `train --strategy` takes, in order: none, ddp, zero1, zero2, zero3, fsdp.
const std::vector<std::string>& strategy_names();

struct StrategyOptions;
/// What runs for `options`: "none", "ddp", "zero1", "zero2" or "zero3" (fsdp by its sharding
/// strategy). ValueError naming an unknown name or sharding strategy and the choices.
std::string strategy_kind(const StrategyOptions& options);
/// As the user named it: the name, and for fsdp its sharding strategy ("fsdp FULL_SHARD").
std::string strategy_display_name(const StrategyOptions& options);

/// A strategy by name and its settings.
struct StrategyOptions {
  std::string name = "none";                     ///< one of strategy_names()
  std::string sharding_strategy = "FULL_SHARD";  ///< fsdp: FULL_SHARD, SHARD_GRAD_OP or NO_SHARD
  dist::DDPOptions ddp{};                        ///< ddp (and fsdp NO_SHARD)
  dist::ZeroOptions zero{};                      ///< zero1-3 and fsdp; the stage follows the name
  /// ZeroOptions::overlap_comm; unset: DeepSpeed's default, on at stage 3 only.
  std::optional<bool> overlap_comm{};
  /// The ZeroOptions fields the user set (by name: "min_num_params", ...), which FSDP's defaults
  /// leave as they are.
  std::set<std::string> zero_knobs_set{};
};

/// One strategy (see the file's description). Build it with make_strategy, hand it to the precision
/// mode (PrecisionOptions::strategy), then call wrap() for the module the loop calls.
class Strategy {
 public:
  virtual ~Strategy() = default;

  /// As the user named it ("zero2", "fsdp FULL_SHARD").
  const std::string& name() const { return name_; }
  /// What runs: "none", "ddp", "zero1", "zero2" or "zero3".
  virtual std::string kind() const = 0;
  /// The group the ranks train over; null for one process (and for DDP adopted by strategy_of).
  const std::shared_ptr<dist::ProcessGroup>& process_group() const { return group_; }

  // ---- the model and its gradients

  /// The tensors the optimizer steps, once the precision mode has cast `model` (which the strategy
  /// keeps as module()): its parameters that require grad, or under ZeRO this rank's pieces of them
  /// (the partition is built here). StateError when called a second time.
  std::vector<Tensor> prepare(nn::Module& model);
  /// The module the training loop calls: DDP's wrapper of `model` (built here, once), else the model.
  virtual std::shared_ptr<nn::UnaryModule> wrap(std::shared_ptr<nn::UnaryModule> model) { return model; }
  /// The model the strategy trains, as checkpoints hold it (never a wrapper); StateError before prepare().
  nn::Module& module() const;
  /// Gradient accumulation: the guard that keeps a backward's gradients for the next (DDP's and
  /// ZeRO's no_sync), or none for one process.
  virtual std::optional<dist::NoSync> no_sync() { return std::nullopt; }
  /// The ZeRO partition, or null.
  virtual dist::ZeroPartition* zero_partition() const { return nullptr; }
  /// DDP's wrapper once wrap() built it, or null.
  virtual dist::DistributedDataParallel* ddp() const { return nullptr; }

  // ---- around the optimizer step (train::TrainingPrecision calls these)

  /// found_inf (0-dim) as the maximum over the ranks, so that every rank skips or steps together:
  /// in place when found_inf is on the group's device, else (from the host) a copy there.
  virtual Tensor agree_on_overflow(const Tensor& found_inf) { return found_inf; }
  /// The gradient norm of the whole model from this rank's (0-dim).
  virtual Tensor total_norm(const Tensor& local_norm) { return local_norm; }
  /// After the optimizer stepped: the updated shards gathered into the parameters.
  virtual void after_step() {}
  /// With the optimizer's zero_grad: forget what accumulation kept.
  virtual void zero_grad() {}

  // ---- checkpoints

  /// Adds the model's, the optimizer's and the precision mode's state to `c` (under ZeRO, this
  /// rank's pieces of what is sharded).
  virtual void add_state(Checkpoint& c, const TrainingPrecision& precision) const;
  /// Restores them from a loaded checkpoint; ValueError before anything changes when it does not fit.
  virtual void restore_state(const Checkpoint& c, TrainingPrecision& precision) const;
  /// Whether every rank writes a part of each checkpoint (ZeRO), or rank 0 alone writes it.
  virtual bool every_rank_writes() const { return false; }
  /// Writes `c` to `path` as the strategy does (one file, or every rank's shard beside rank 0's index).
  virtual void save(const std::string& path, const Checkpoint& c) const { save_checkpoint(path, c); }

 protected:
  /// A strategy named `name` (as name() shows it) over `group` (null for one process).
  Strategy(std::string name, std::shared_ptr<dist::ProcessGroup> group) : name_(std::move(name)), group_(std::move(group)) {}
  /// What prepare() returns for `model`: its parameters, unless the strategy steps something else.
  virtual std::vector<Tensor> stepped_tensors(nn::Module& model);

 private:
  std::string name_;
  std::shared_ptr<dist::ProcessGroup> group_;
  nn::Module* module_ = nullptr;
};

/// The strategy `options` name, over `group` (ignored by none; ddp, zero* and fsdp need one):
/// ValueError naming an unknown name or sharding strategy, a missing group, or ZeRO knobs out of range.
std::shared_ptr<Strategy> make_strategy(StrategyOptions options, std::shared_ptr<dist::ProcessGroup> group);
/// ZeRO at options.stage over `group`, as PrecisionOptions::zero_group asks for.
std::shared_ptr<Strategy> make_zero_strategy(std::shared_ptr<dist::ProcessGroup> group, dist::ZeroOptions options);
/// The strategy a Runner trains `model` under: the precision mode's, or DDP's around `model` when
/// it is a DistributedDataParallel built outside a strategy. ValueError when the precision mode's
/// strategy is DDP and `model` is not its wrapper.
std::shared_ptr<Strategy> strategy_of(const std::shared_ptr<nn::UnaryModule>& model, const TrainingPrecision& precision);

}  // namespace ember::train
