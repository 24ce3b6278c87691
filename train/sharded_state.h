/// @file
/// A run under ZeRO checkpoints the same logical state as one process does (train/checkpoint.h's
/// sharded form): the model's parameters by name, the optimizer's per-parameter state and the float32
/// masters by parameter index, with their whole shapes, so any number of ranks at any stage, or one
/// process, can resume from it. These two functions translate between that and this rank's pieces.
/// They expect an optimizer with one param group (the Runner's); NotImplementedError otherwise.
#pragma once

#include "nn/module.h"
#include "train/checkpoint.h"
#include "train/precision.h"

namespace ember::train {

/// Adds to `c` the state of `module` (which `precision` partitions) and of the precision mode's
/// optimizer and scaler: whole what every rank holds whole (buffers, frozen parameters,
/// hyperparameters, the loss scale), and this rank's pieces of what ZeRO shards (parameters,
/// per-parameter optimizer state and step counts, masters).
void add_sharded_state(Checkpoint& c, const TrainingPrecision& precision, const nn::Module& module);

/// Restores `module`, the optimizer and the precision mode from a loaded checkpoint (whole tensors,
/// whatever wrote it): this rank takes its pieces' slices, then the ranks gather the parameters.
/// ValueError naming the key for a tensor that is missing, unexpected or of another size, before
/// anything changes.
void restore_sharded_state(const Checkpoint& c, TrainingPrecision& precision, nn::Module& module);

}  // namespace ember::train
