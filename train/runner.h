/// @file
/// train::Runner: the loop every training program shares (`docs/design.md#the-runner`). Per iteration: the batch to
/// the device, forward (under the precision mode's autocast), cross-entropy loss, backward, gradient
/// norm (clipped when asked), optimizer step and scheduler step; the step is skipped on an overflow
/// or a non-finite norm. Per epoch: top-1 accuracy on the validation loader and checkpoints. Log
/// lines follow MMEngine's format (train/log.h).
///
/// An iteration queues its work without waiting for the device: the loss, norm and skip flag are
/// summed on the device and read once per log line (host_sync_count() stays flat between lines), as
/// is the record of the first step whose loss or gradient was not finite and, when
/// locate_nonfinite is on, of the module and op that first made a NaN or an infinity in it
/// (train/nonfinite.h).
/// The optimizer skips on the device, so the host learns of a skipped step at that read-out: the
/// schedule is then taken back by the skipped steps (LRScheduler::rewind). Between a skip and the
/// next log line the lr runs one position ahead; the lr logged and every later one follow the steps
/// taken.
///
/// Work dir layout: epoch_N.safetensors (the newest `keep_checkpoints` kept), best_accuracy_top1.safetensors,
/// iter_N.safetensors (written when a run is stopped early), last_checkpoint (the newest path, one
/// line), scalars.json (the log's fields as JSON lines), tensorboard/events.out.tfevents.* (with
/// options.tensorboard: the same fields as TensorBoard scalars, one file per Runner, so a resumed
/// run never writes into an earlier run's file), .lock (train/work_dir_lock.h) while a Runner holds
/// the work dir. Every file is replaced atomically and last_checkpoint is repointed only once
/// its file is complete, so a process killed at any moment leaves it naming a loadable checkpoint;
/// a Runner removes the temporary files that such a kill left behind.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "data/dataloader.h"
#include "dist/process_group.h"
#include "nn/module.h"
#include "optim/lr_scheduler.h"
#include "optim/optimizer.h"
#include "train/checkpoint.h"
#include "train/compiled_step.h"
#include "train/nonfinite.h"
#include "train/precision.h"
#include "train/work_dir_lock.h"

namespace ember::train {

class MetricLog;

/// The Runner's settings; train's flags set them (`./ember train --help`).
struct RunnerOptions {
  int64_t epochs = 1;            ///< the last epoch: a resumed run goes on to it (ValueError below 1)
  int64_t log_interval = 50;     ///< iterations between train log lines (and the epoch's last one)
  int64_t save_interval = 1;     ///< epochs between epoch_N checkpoints; 0: none
  bool save_best = true;         ///< keep best_accuracy_top1 (MMEngine's save_best), whatever save_interval says
  int64_t keep_checkpoints = 3;  ///< epoch_N files kept, newest first; 0: all
  double clip_grad_norm = 0;     ///< max 2-norm of all gradients together; 0: no clipping
  /// Gradient accumulation (MMEngine's accumulative_counts, DeepSpeed's gradient_accumulation_steps):
  /// each optimizer step takes this many batches of the train loader, each loss divided by it, so a
  /// step equals one over a batch that many times larger. Iterations, log_interval, max_iters and the
  /// schedule count steps; an epoch has loader batches / accumulate of them (the last batches that
  /// do not fill a step are skipped); checkpoints fall between steps. Data parallel: the ranks
  /// average only at each step's last batch (no_sync before it; ZeRO stages 2 and 3 add each batch's
  /// average into their shards). ValueError below 1, above the loader's batches, or with compile.
  int64_t accumulate = 1;
  /// Name the module and op that first made a non-finite value in a bad step (forward hooks and a
  /// check of every backward node: a few percent of a step, measured in docs/training.md); off, the log
  /// line still gives the step.
  bool locate_nonfinite = true;
  /// "": no files (no checkpoints, no JSON lines). Else locked, by the process that writes it (rank 0
  /// of a data-parallel job), for the Runner's lifetime: a Runner on a work dir in use raises WorkDirInUse.
  std::string work_dir;
  /// Write the log's numeric fields as TensorBoard scalars too, in `<work_dir>/tensorboard/` (tagged
  /// train/loss, val/accuracy/top1, ...: train/log.h); needs a work_dir.
  bool tensorboard = false;
  /// Resume before training: "" from the path in `<work_dir>/last_checkpoint`, else from this file.
  std::optional<std::string> resume;
  int64_t max_iters = 0;  ///< stop after this many iterations in all, with a checkpoint; 0: run every epoch
  Device device = kCPU;  ///< where the model and each batch are
  std::ostream* console = nullptr;           ///< log lines; null: std::cout
  std::map<std::string, std::string> info;   ///< saved in each checkpoint's metadata
  /// Data parallel: the group of the job, whose every rank runs a Runner over its own share of the
  /// data (the model a dist::DistributedDataParallel). Rank 0 alone prints and writes files; the
  /// logged loss is the mean over the ranks, memory the largest rank's, accuracy over every rank's
  /// share, and train lines add global_batch (the per-rank batch x the ranks x accumulate). Checkpoints hold the
  /// wrapped module's state, so plain one-process runs resume them. Null: one process.
  std::shared_ptr<dist::ProcessGroup> group;
  /// Capture each iteration's step (forward, backward, unscale, clipping, optimizer step) after
  /// compile_options.warmup_steps eager ones per batch shape and replay it (train::CompiledStep:
  /// CUDA graphs; on the CPU the same rules, run eagerly). locate_nonfinite is then off: it follows
  /// each step on the host.
  bool compile = false;
  CompileOptions compile_options;  ///< with compile
};

/// What one epoch of run() did.
struct EpochSummary {
  int64_t epoch;        ///< 1-based
  double seconds;       ///< the training part of the epoch, wall clock
  double data_seconds;  ///< of which waiting for batches
  double mean_loss;     ///< over the epoch's iterations
  double top1;          ///< validation accuracy in percent (NaN without a validation loader)
};

/// What run() returns.
struct RunSummary {
  std::vector<EpochSummary> epochs;  ///< those run by this call (not those before a resume)
  double best_top1;                  ///< over the whole run, resumed parts included (NaN: none)
  int64_t iterations;                ///< finished, over the whole run
  int64_t skipped_steps;             ///< steps skipped (overflow, non-finite norm), over the whole run
  bool stopped_early;                ///< max_iters or request_stop() ended it before the last epoch
};

/// The training loop (see the file's description): run() trains, evaluates, logs and checkpoints.
class Runner {
 public:
  ~Runner();
  /// A Runner in any precision mode. `scheduler` and `val_loader` may be null. The model must already
  /// be on options.device and cast by `precision` (whose optimizer the scheduler drives). ValueError
  /// for options out of range; WorkDirInUse when another run holds the work dir.
  Runner(std::shared_ptr<nn::UnaryModule> model, std::shared_ptr<TrainingPrecision> precision,
         std::shared_ptr<optim::LRScheduler> scheduler, std::shared_ptr<data::DataLoader> train_loader,
         std::shared_ptr<data::DataLoader> val_loader, RunnerOptions options);
  /// A Runner in fp32 with an optimizer over the model's parameters; the model is moved to
  /// options.device.
  Runner(std::shared_ptr<nn::UnaryModule> model, std::shared_ptr<optim::Optimizer> optimizer,
         std::shared_ptr<optim::LRScheduler> scheduler, std::shared_ptr<data::DataLoader> train_loader,
         std::shared_ptr<data::DataLoader> val_loader, RunnerOptions options);

  /// Trains (after resuming, when options.resume is set) until the last epoch, max_iters or a stop
  /// request; then the state is in a checkpoint when a work dir is set.
  RunSummary run();
  /// Asks run() to stop after the current iteration and checkpoint there; in a data-parallel job,
  /// after the next log line, where the ranks agree on it (so a signal that reaches them at different
  /// steps stops them all at the same one). Safe from a signal handler.
  void request_stop() { stop_requested_.store(true); }

  /// Top-1 accuracy in percent over the validation loader; logs the Epoch(val) line.
  double evaluate();

  /// Everything a checkpoint holds, taken now (under ZeRO, this rank's pieces of the sharded state).
  Checkpoint checkpoint() const;
  /// Restores everything a checkpoint holds; ValueError when it does not fit this run (other shapes,
  /// another optimizer, a position past the loader's end).
  void restore(const Checkpoint& checkpoint);

  int64_t epoch() const { return epoch_; }          ///< Epochs finished.
  int64_t iteration() const { return iteration_; }  ///< Training iterations finished, over all epochs.

  struct Window;  ///< sums of the logged values since the last log line (or the epoch's start)

 private:
  // The device work of one step on one batch: zero_grad, forward, loss, backward, unscale,
  // clipping, step; returns {loss, grad_norm, skipped}.
  std::vector<Tensor> step(const Tensor& images, const Tensor& labels);
  // A step in parts (accumulation): begin_step (zero_grad), micro_step on each batch (forward, loss
  // over opts_.accumulate, backward; without averaging over the ranks unless `last`; returns the
  // divided loss), end_step with the divided losses' sum (unscale, clipping, step).
  void begin_step();
  Tensor micro_step(const Tensor& images, const Tensor& labels, bool last);
  std::vector<Tensor> end_step(const Tensor& loss);
  // The images and labels of `batch` on the device, the images in the precision's input dtype.
  std::pair<Tensor, Tensor> on_device(const data::Batch& batch) const;
  // Books a finished step ({loss, grad_norm, skipped}) whose batches took `data_time` s to arrive;
  // the step began at `started`.
  void finish_iteration(const std::vector<Tensor>& stepped, Window& window, Window& epoch_window, double data_time,
                        double started);
  // Optimizer steps per epoch: the loader's batches over opts_.accumulate.
  int64_t steps_per_epoch() const;
  // Reads the windows' device sums (one synchronisation), takes skipped steps back from the
  // schedule, writes the log line and restarts `window`.
  void log_train(Window& window, const Window& epoch_window, int64_t batch_index, double lr, double eta);
  // Writes the checkpoint to the work dir and points last_checkpoint at it.
  void save(const std::string& file_name);
  // Writes the checkpoint to `path`: rank 0 alone, or under ZeRO every rank its shard (a collective).
  void write_checkpoint(const std::string& path);
  // epoch_N when due (and prunes old ones), best_accuracy_top1 on a new best; true when epoch_N was written.
  bool save_epoch_checkpoints(double top1);
  std::string work_path(const std::string& file_name) const;
  // The path in <work_dir>/last_checkpoint; "" when there is none.
  std::string last_checkpoint() const;
  // Whether run() stops after this iteration at the request of request_stop() (on any rank).
  bool stop_agreed(bool log_line) const;
  // The images of one loader batch over every rank (a step sees opts_.accumulate times as many).
  int64_t global_batch() const;
  // Whether this process writes the work dir's files: rank 0 of a data-parallel job, or the one process.
  bool writes_files() const;
  // Opens the log when it is not yet open: the console and, in the process that writes files,
  // scalars.json and (options.tensorboard) a new event file.
  void open_log();
  // The module whose state checkpoints hold: the model, or the module a DDP wrapper wraps.
  nn::Module& checkpointed_module() const;
  // Sums (avg) or maxima (max) of values over the job's ranks; values itself for one process.
  std::vector<double> over_ranks(std::vector<double> values, dist::ReduceOp op) const;

  std::unique_ptr<WorkDirLock> lock_;  // first, so released last; null without files to write
  std::shared_ptr<nn::UnaryModule> model_;
  std::shared_ptr<TrainingPrecision> precision_;
  std::shared_ptr<Strategy> strategy_;  // the model's checkpointed form, accumulation's no_sync, checkpoint files
  std::shared_ptr<optim::LRScheduler> scheduler_;
  std::shared_ptr<data::DataLoader> train_loader_, val_loader_;
  RunnerOptions opts_;
  std::ostream& console_;
  std::unique_ptr<CompiledStep> compiled_;  // with opts_.compile

  int64_t epoch_ = 0;          // finished epochs
  int64_t iteration_ = 0;      // finished iterations
  int64_t next_batch_ = 0;     // where the current epoch goes on (non-zero after a mid-epoch resume)
  int64_t skipped_steps_ = 0;  // as of the last read-out
  double epoch_mean_loss_ = 0;  // of the epoch's iterations, as of the last read-out
  double best_top1_;
  std::unique_ptr<NonFiniteLocator> locator_;  // null when locate_nonfinite is off
  std::unique_ptr<Window> log_window_;  // kept across a mid-epoch checkpoint
  std::unique_ptr<NonFiniteWindow> log_nonfinite_;  // the same interval's first bad step
  std::unique_ptr<MetricLog> log_;      // opened by run() or evaluate()
  std::atomic<bool> stop_requested_{false};
};

}  // namespace ember::train
