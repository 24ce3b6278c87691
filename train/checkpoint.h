// A training checkpoint: everything a run needs to continue bit for bit, in one safetensors file
// (written atomically: a crash mid-save leaves the previous file intact).
//   tensors   "model.<name>", "optimizer.<key>", "scheduler.<key>", "precision.<key>", "runner.<key>",
//             "rng.default" (the default generator's seed and offset, as two i64)
//   metadata  "format": "ember-checkpoint/1", "epoch", "iteration", "loader.epoch", "loader.batch",
//             the Runner's text state under "runner.<key>", and the run's own free-form entries
//             under "info.<key>"
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "data/dataloader.h"
#include "tensor/random.h"
#include "tensor/state_dict.h"

namespace ember::train {

struct Checkpoint {
  StateDict model;
  StateDict optimizer;
  StateDict scheduler;  // empty when the run has none
  StateDict precision;  // loss scaler and master weights (train/precision.h); empty in fp32
  StateDict runner;     // the Runner's own state (best accuracy, log windows)
  std::map<std::string, std::string> runner_text;  // and its text (the log window's non-finite report)
  GeneratorState rng;
  int64_t epoch = 0;      // epochs finished
  int64_t iteration = 0;  // training iterations finished, over all epochs
  data::LoaderPosition loader;
  std::map<std::string, std::string> info;  // model name, flags: for people reading the file
};

// IOError when the file cannot be written; the previous file at `path`, if any, is kept then.
void save_checkpoint(const std::string& path, const Checkpoint& checkpoint);
// FormatError (naming the file and the problem) for a corrupt file, one that is not an ember
// checkpoint, or one whose counters are missing or malformed; IOError when it cannot be read.
Checkpoint load_checkpoint(const std::string& path);

}  // namespace ember::train
