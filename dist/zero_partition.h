/// @file
/// ZeroPartition: the sharding of ZeRO (Rajbhandari et al., SC'20; `docs/reference.md#zero`) over a
/// process group, for one model trained by every rank on its own part of the batch.
///
/// The parameters that require grad are grouped into units, one dtype each, and each unit is one
/// flat buffer (each parameter 64-byte aligned in it) padded to a multiple of the world size N and
/// cut into N equal shards: rank r owns
/// shard r of every unit (its "pieces" of the parameters it overlaps). What each stage partitions:
///   stage 1  optimizer state: every rank keeps whole parameters and whole gradients (each .grad a
///            view into its unit's gradient buffer); the gradients are reduce-scattered so that each
///            rank receives the average of its own shard only, steps it, and the updated shards are
///            all-gathered back into every rank's parameters.
///   stage 2  + gradients: a unit's gradient buffer lives only from its first gradient until it is
///            reduce-scattered during backward; between steps a rank holds its shard's gradients.
///   stage 3  + parameters: units follow the modules (each module's own parameters, or the modules
///            the wrap policy picks: ZeroOptions::min_num_params, wrap_module_types); a unit is
///            whole only from its module's forward pre-hook to its forward hook, and again from the
///            gradient of its output to the end of its backward (all-gathered, the next units in the
///            order of the previous forward prefetched, then the memory released); units of at most
///            stage3_param_persistence_threshold elements stay whole.
/// The optimizer (any ember optimizer, or naive AMP's masters over them) steps pieces(): 1-D views
/// into the shards, whose .grad after each backward is the gradient averaged over the ranks.
/// With offload_param (stage 3, DeepSpeed's offload_param to "cpu") the shards and their averaged
/// gradients live in host memory (page-locked when the model is on a GPU), so the optimizer steps
/// them there: each gather first copies this rank's shard from the host into its slot of the unit,
/// and each reduction copies its average back, both on the communication thread's stream, so they
/// overlap compute as the collectives do. On a CPU group the same copies run host to host.
///
/// Collectives run on one communication thread in the order they are posted, which is the same on
/// every rank: reductions in the units' fixed order (the last registered parameters first),
/// gathers in the order the modules run. Rank 0's parameters and buffers are broadcast at
/// construction and its buffers again before each forward, as DistributedDataParallel does.
/// Build it after the model is on its device and cast to its training dtype; do not move or cast
/// the model afterwards. Every rank must run forward and backward in step.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "dist/no_sync.h"
#include "dist/process_group.h"
#include "nn/module.h"

namespace ember::dist {

/// DeepSpeed's zero_optimization knobs, under its names and with its defaults (`docs/reference.md#zero`).
struct ZeroOptions {
  int stage = 1;  ///< 1, 2 or 3
  int64_t reduce_bucket_size = 500'000'000;          ///< elements per gradient unit (stages 1 and 2)
  int64_t allgather_bucket_size = 500'000'000;       ///< elements gathered per all-gather call
  bool overlap_comm = false;                         ///< reduce on the communication thread while backward runs
  bool contiguous_gradients = true;                  ///< copy each gradient into its unit's buffer as it arrives
  bool reduce_scatter = true;                        ///< false: all-reduce the unit, keep the own shard
  int64_t stage3_prefetch_bucket_size = 50'000'000;  ///< elements gathered ahead of use (stage 3)
  int64_t stage3_param_persistence_threshold = 100'000;  ///< units this small stay whole (stage 3)
  /// Stage 3's wrap policy (FSDP's auto_wrap_policy), which decides the units: with neither knob,
  /// every module with parameters of its own is a unit of those. min_num_params > 0: FSDP's
  /// size_based_auto_wrap_policy, from the leaves up a module becomes a unit once its subtree holds
  /// that many elements no unit below it took; wrap_module_types: every module of these types
  /// (Module::name(): "Block", "Bottleneck") is a unit of its subtree. The model itself takes the rest.
  /// A unit is gathered for its module's forward and backward: fewer, larger units mean fewer
  /// all-gathers and more memory held whole at a time.
  int64_t min_num_params = 0;
  std::vector<std::string> wrap_module_types{};  ///< see min_num_params
  /// Optimizer state, float32 masters and the step in host memory (train::TrainingPrecision does it:
  /// the partition itself only holds parameters and gradients). Nothing moves on a CPU run.
  bool offload_optimizer = false;
  /// Stage 3: this rank's parameter shards and their gradients in host memory (see the file's
  /// description); the optimizer then steps on the host, so offload_optimizer must be set too.
  bool offload_param = false;
  bool find_unused_parameters = false;  ///< as DistributedDataParallel's
  bool broadcast_buffers = true;        ///< rank 0's buffers before each forward
};

/// Checks the knobs' ranges: ValueError naming the knob and its value.
void check_zero_options(const ZeroOptions& options);

/// ZeRO's partition of one model over a process group (see the file's description).
class ZeroPartition {
  struct State;  // shared with the hooks, which hold it weakly

 public:
  /// ValueError for a model with no parameter that requires grad, or one whose parameters do not
  /// give every rank a piece; DeviceError for parameters off the group's device; ValueError for
  /// non-contiguous or non-floating parameters.
  ZeroPartition(nn::Module& module, std::shared_ptr<ProcessGroup> group, ZeroOptions options = {});
  ~ZeroPartition();
  ZeroPartition(const ZeroPartition&) = delete;
  ZeroPartition& operator=(const ZeroPartition&) = delete;

  /// This rank's pieces of the parameters, in parameter order: 1-D tensors viewing the shards, each
  /// with .grad (the average over the ranks) after a backward.
  const std::vector<Tensor>& pieces() const;
  /// Which elements of which parameter a piece holds: [offset, offset + numel) of the flattened
  /// parameter (`parameter` counts the parameters that require grad in registration order).
  struct PieceInfo {
    size_t parameter;  ///< which parameter
    std::string name;  ///< its dotted name
    int64_t offset;    ///< where the piece starts in the flattened parameter, in elements
  };
  const std::vector<PieceInfo>& piece_info() const;  ///< What each of pieces() holds, in the same order.

  /// Gradient accumulation: while the guard lives, each backward's gradients are kept for the next,
  /// and the first backward after it gives the pieces the average of the sum. Stage 1 keeps them
  /// unreduced in its whole gradient buffers and communicates nothing, as DDP's no_sync; stages 2 and
  /// 3 still reduce-scatter each backward and add the averages up in this rank's shard, as DeepSpeed
  /// does: holding whole gradients until the last backward would undo what these stages save.
  NoSync no_sync();
  /// Forgets what no_sync() kept: the next backward begins a new step (ZeroOptimizer::zero_grad and
  /// train::TrainingPrecision::zero_grad call it, so a step cut short leaves nothing behind).
  void zero_grad();

  /// After the optimizer stepped the pieces: every rank's updated shard all-gathered into the whole
  /// parameters (all units at stages 1 and 2, the persistent ones at stage 3; the others are gathered
  /// at their next use).
  void gather_updated_parameters();
  /// Sets found_inf (0-dim) to its maximum over the ranks, so every rank skips or steps together.
  void agree_on_overflow(const Tensor& found_inf) const;
  /// The 2-norm of every rank's gradients together from each rank's own (0-dim): sqrt(sum of squares),
  /// on the group's device.
  Tensor total_norm(const Tensor& local_norm) const;

  /// While alive, every parameter is whole (stage 3 gathers them all; a no-op at stages 1 and 2):
  /// to save, compare or evaluate them outside forward. Not inside a forward or backward.
  class Gathered {
   public:
    ~Gathered();
    Gathered(Gathered&&) noexcept;  ///< Moves the guard (the one moved from does nothing at destruction).
    Gathered(const Gathered&) = delete;
    Gathered& operator=(const Gathered&) = delete;

   private:
    friend class ZeroPartition;
    explicit Gathered(std::shared_ptr<State> state) : state_(std::move(state)) {}
    std::shared_ptr<State> state_;  // null once moved from
  };
  Gathered gathered();  ///< A guard that keeps every parameter whole while it lives; StateError during a backward.

  /// A unit, as units() lists them in reduction order: its parameters' names, elements (with the
  /// alignment gaps, before the padding to the ranks), dtype and whether the parameters stay whole
  /// between uses.
  struct Unit {
    std::vector<std::string> parameters;  ///< the unit's parameters, by dotted name
    int64_t numel;                        ///< elements, with the alignment gaps
    int64_t padded;                       ///< elements after padding to a multiple of the ranks
    DType dtype;                          ///< the parameters' dtype
    bool persistent;                      ///< whether the parameters stay whole between uses
  };
  std::vector<Unit> units() const;  ///< The units, in reduction order.

  /// The bytes this rank holds now for parameters (whole and sharded) and for gradients (the
  /// units' buffers and the averaged shards), and what offload_param keeps in host memory.
  struct Memory {
    int64_t parameters = 0;  ///< bytes of parameters, but for offloaded shards
    int64_t gradients = 0;   ///< bytes of gradients, but for offloaded shards
    int64_t offloaded = 0;   ///< offload_param: bytes of the shards and their gradients in host memory
  };
  Memory memory() const;  ///< The bytes this rank holds now.
  /// Stage 3: how many times a unit was gathered since construction (each gather is one or more
  /// all_gather calls of at most allgather_bucket_size elements); 0 at stages 1 and 2.
  int64_t unit_gathers() const;

  int stage() const;                    ///< The ZeRO stage: 1, 2 or 3.
  const ZeroOptions& options() const;   ///< The settings it was built with.
  ProcessGroup& process_group() const;  ///< The group it partitions over.

 private:
  std::shared_ptr<State> state_;
};

}  // namespace ember::dist
