/// @file
/// DeepSpeed's JSON configuration (https://www.deepspeed.ai/docs/config-json/), read so that its
/// users keep their file: `train --deepspeed-config ds_config.json`. What it maps onto ember:
///   zero_optimization    stage 0 -> --strategy ddp, 1-3 -> zero1-zero3, and the knobs of
///                        dist::ZeroOptions under their names (offload_optimizer and offload_param:
///                        device "cpu" or "none"; "nvme" is refused)
///   fp16 {enabled, loss_scale, initial_scale_power, loss_scale_window, hysteresis, min_loss_scale}
///                        -> naive_fp16 (DeepSpeed's fp16: a half model, float32 masters, dynamic
///                        loss scaling: `docs/reference.md#dynamic-loss-scaling`) with those scaler
///                        settings
///   bf16 {enabled}       -> naive_bf16 (a bf16 model, float32 masters)
///   gradient_clipping    -> the gradient norm's bound
///   train_micro_batch_size_per_gpu -> the batch per rank; train_batch_size, when given, must equal
///                        it times gradient_accumulation_steps times the ranks
///   gradient_accumulation_steps -> the batches per optimizer step (train --accumulate)
///   optimizer {type: SGD, AdamW or Lamb; params: lr, weight_decay, momentum (SGD), betas and eps at
///                        ember's defaults}
/// A key it does not know becomes a warning naming it; a value it cannot honour is a ValueError
/// naming the key and the value; "auto" (the Hugging Face Trainer fills those in) leaves ember's own.
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "dist/zero_partition.h"
#include "optim/amp/loss_scaler.h"
#include "train/precision.h"

namespace ember::train {

/// What a DeepSpeed configuration file sets, in ember's terms (see the file's description);
/// unset optionals leave ember's own settings.
struct DeepSpeedConfig {
  std::optional<int> zero_stage;              ///< 0: plain data parallel (DDP)
  dist::ZeroOptions zero;                     ///< the knobs, as set by the file (defaults otherwise)
  std::set<std::string> zero_knobs;           ///< the knobs the file set, by DeepSpeed's names
  std::optional<Precision> precision;         ///< naive_fp16 or naive_bf16
  amp::DynamicLossScalerOptions loss_scaler;  ///< fp16's scaler settings
  std::optional<double> gradient_clipping;    ///< the bound of the gradient 2-norm
  std::optional<int64_t> micro_batch_size;    ///< per rank
  std::optional<int64_t> train_batch_size;    ///< over every rank
  std::optional<int64_t> gradient_accumulation_steps;  ///< batches per optimizer step
  std::optional<std::string> optimizer;       ///< "sgd", "adamw" or "lamb" (train's names)
  /// the optimizer's params @{
  std::optional<double> lr, weight_decay, momentum;
  /// @}
  std::vector<std::string> warnings;  ///< what was read but not used, one sentence each
};

/// Reads the DeepSpeed JSON file at `path`. IOError when it cannot be read; FormatError naming the
/// path for text that is not JSON or a key of the wrong type; ValueError naming the key and value for
/// one ember cannot honour.
DeepSpeedConfig read_deepspeed_config(const std::string& path);
/// The same from the text of a file (`source` names it in messages).
DeepSpeedConfig parse_deepspeed_config(const std::string& text, const std::string& source);

}  // namespace ember::train
