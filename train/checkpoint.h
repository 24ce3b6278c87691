/// @file
/// A training checkpoint: everything a run needs to continue bit for bit, in one safetensors file
/// (written atomically: a crash mid-save leaves the previous file intact).
///   tensors   "model.<name>", "optimizer.<key>", "scheduler.<key>", "precision.<key>", "runner.<key>",
///             "rng.default" (the default generator's seed and offset, as two i64)
///   metadata  "format": "ember-checkpoint/1", "epoch", "iteration", "loader.epoch", "loader.batch",
///             the Runner's text state under "runner.<key>", and the run's own free-form entries
///             under "info.<key>"
///
/// Sharded (ZeRO): every tensor is still saved as its logical, whole tensor, but in pieces. Each rank
/// writes the pieces it holds to a shard file of its own, "<name>.shards/rank<r>-of-<N>.<token>.safetensors":
///   tensors   "<key>@<offset>": elements [offset, offset + numel) of the flattened tensor "<key>",
///             and "rng.default", the rank's generator
///   metadata  "format": "ember-checkpoint-shard/1", "shape.<key>": the logical shape ("32,16")
/// and rank 0 writes "<name>.safetensors" as above, with the whole tensors and "shards": "<N>",
/// "shard.<r>": each shard's path relative to it. Loading puts the pieces together, whatever N was,
/// so a run resumes on any number of ranks and any stage, or in one process, with no tool between.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "data/dataloader.h"
#include "dist/process_group.h"
#include "tensor/random.h"
#include "tensor/state_dict.h"

namespace ember::train {

/// One rank's share of a sharded tensor: `values` (1-D) are the elements [offset, offset + numel) of the
/// flattened logical tensor `key` ("model.fc.weight", "optimizer.state.3.exp_avg") of `shape`.
struct TensorPiece {
  std::string key;     ///< the logical tensor's name ("model.fc.weight")
  Shape shape;         ///< its whole shape
  int64_t offset = 0;  ///< where `values` starts in the flattened tensor, in elements
  Tensor values;       ///< the elements held (1-D)
};

/// Everything a run needs to continue bit for bit (see the file's description for the file's layout).
struct Checkpoint {
  StateDict model;      ///< the model's state_dict()
  StateDict optimizer;  ///< the optimizer's state_dict()
  StateDict scheduler;  ///< empty when the run has none
  StateDict precision;  ///< loss scaler and master weights (train/precision.h); empty in fp32
  StateDict runner;     ///< the Runner's own state (best accuracy, log windows)
  std::map<std::string, std::string> runner_text;  ///< and its text (the log window's non-finite report)
  GeneratorState rng;                       ///< the default generator's state
  int64_t epoch = 0;                        ///< epochs finished
  int64_t iteration = 0;                    ///< training iterations finished, over all epochs
  data::LoaderPosition loader;              ///< the training loader's position
  std::map<std::string, std::string> info;  ///< model name, flags: for people reading the file
  /// Sharded state: what this rank saves of tensors split over the ranks (empty in one process).
  /// A loaded checkpoint has them put together into the sections above.
  std::vector<TensorPiece> pieces;
  /// A loaded sharded checkpoint: each rank's generator, by rank (rng is rank 0's).
  std::vector<GeneratorState> rank_rngs;
};

/// Writes `checkpoint` to `path`, atomically. IOError when the file cannot be written; the previous
/// file at `path`, if any, is kept then.
/// ValueError for a checkpoint with pieces (those need the group's form).
void save_checkpoint(const std::string& path, const Checkpoint& checkpoint);
/// The sharded form, called by every rank of `group` with its own pieces (rank 0's checkpoint holds
/// the whole tensors): the shards are written first, then the index at `path` once every rank's
/// shard is complete, then the shards of an earlier save under the same name are removed; a crash at
/// any point leaves a loadable checkpoint at `path` (the old one or the new). IOError on every rank
/// when any rank cannot write.
void save_checkpoint(const std::string& path, const Checkpoint& checkpoint, dist::ProcessGroup& group);
/// Reads the checkpoint at `path`, a sharded one put together whole. FormatError (naming the file and
/// the problem) for a corrupt file, one that is not an ember
/// checkpoint, or one whose counters are missing or malformed, and for shards that are missing,
/// disagree on a tensor's shape or dtype, or leave elements of a tensor uncovered or covered twice;
/// IOError when a file cannot be read.
Checkpoint load_checkpoint(const std::string& path);
/// Removes the files of the checkpoint at `path`: the file itself, and its shards directory if any.
void remove_checkpoint(const std::string& path);

}  // namespace ember::train
