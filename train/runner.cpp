#include "train/runner.h"

#include <algorithm>
#include <climits>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>

#include "autograd/grad_mode.h"
#include "nn/loss.h"
#include "optim/clip_grad.h"
#include "tensor/atomic_file.h"
#include "tensor/decimal.h"
#include "tensor/nvtx.h"
#include "tensor/ops.h"
#include "tensor/printable.h"
#include "tensor/storage.h"
#include "train/log.h"
#include "train/strategy.h"

namespace ember::train {

namespace fs = std::filesystem;

namespace {

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kMiB = 1024.0 * 1024.0;

// The N of "epoch_N.safetensors", or -1 for any other name.
int64_t epoch_file_number(const std::string& name) {
  const std::string prefix = "epoch_", suffix = ".safetensors";
  if (!name.starts_with(prefix) || !name.ends_with(suffix) || name.size() == prefix.size() + suffix.size()) return -1;
  const std::string digits = name.substr(prefix.size(), name.size() - prefix.size() - suffix.size());
  return parse_decimal(digits, std::numeric_limits<int64_t>::max()).value_or(-1);  // too long: not one of ours
}

// Removes the temporary files of writes that a killed process never finished (tensor/atomic_file.h),
// in `dir` and its checkpoints' shard directories. The work dir is locked: no write is under way.
void remove_stale_temporaries(const fs::path& dir) {
  for (const auto& entry : fs::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    if (entry.is_directory() && name.ends_with(".shards")) remove_stale_temporaries(entry.path());
    else if (entry.is_regular_file() && is_atomic_temporary(name)) fs::remove(entry.path());
  }
}

// Where the other ranks of a data-parallel job print: nowhere.
std::ostream& discarded_output() {
  static std::ostream nowhere(nullptr);
  return nowhere;
}

// `model` moved to `device` (null stays null).
std::shared_ptr<nn::UnaryModule> moved_to(std::shared_ptr<nn::UnaryModule> model, Device device) {
  if (model) model->to(device);
  return model;
}

}  // namespace

// Sums since the last log line (or the epoch's start): the line prints their means, as MMEngine
// smooths over the interval. The loss, gradient norm and skip flag of each step are added on the
// device, in float64 and in order, and read when a line is written. Saved in mid-epoch checkpoints
// so a resumed run logs the same values.
struct Runner::Window {
  Tensor sums;  // float64 (loss, grad_norm, skipped) on the device
  double time = 0, data_time = 0, count = 0;

  explicit Window(Device device) : sums(zeros({3}, TensorOptions(DType::f64).with_device(device))) {}
  void add(const Tensor& values, double t, double d) {
    add_(sums, values);
    time += t;
    data_time += d;
    count += 1;
  }
};

namespace {
// The window's fields under their checkpoint names ("runner.log_window.<name>"): the device sums in
// order, then the host ones.
constexpr const char* kWindowSums[] = {"loss", "grad_norm", "skipped"};
constexpr std::pair<const char*, double Runner::Window::*> kWindowFields[] = {
    {"time", &Runner::Window::time}, {"data_time", &Runner::Window::data_time}, {"count", &Runner::Window::count}};
}  // namespace

Runner::Runner(std::shared_ptr<nn::UnaryModule> model, std::shared_ptr<optim::Optimizer> optimizer,
               std::shared_ptr<optim::LRScheduler> scheduler, std::shared_ptr<data::DataLoader> train_loader,
               std::shared_ptr<data::DataLoader> val_loader, RunnerOptions options)
    : Runner(moved_to(std::move(model), options.device),
             optimizer ? std::make_shared<TrainingPrecision>(std::move(optimizer)) : nullptr, std::move(scheduler),
             std::move(train_loader), std::move(val_loader), std::move(options)) {}

Runner::Runner(std::shared_ptr<nn::UnaryModule> model, std::shared_ptr<TrainingPrecision> precision,
               std::shared_ptr<optim::LRScheduler> scheduler, std::shared_ptr<data::DataLoader> train_loader,
               std::shared_ptr<data::DataLoader> val_loader, RunnerOptions options)
    : model_(std::move(model)),
      precision_(std::move(precision)),
      scheduler_(std::move(scheduler)),
      train_loader_(std::move(train_loader)),
      val_loader_(std::move(val_loader)),
      opts_(std::move(options)),
      console_(opts_.group && opts_.group->rank() != 0 ? discarded_output()
                                                      : opts_.console ? *opts_.console : std::cout),
      best_top1_(kNaN),
      log_window_(std::make_unique<Window>(opts_.device)),
      log_nonfinite_(std::make_unique<NonFiniteWindow>(opts_.device)) {
  if (!model_ || !precision_ || !train_loader_) throw ValueError("Runner: the model, optimizer and train loader must be set");
  strategy_ = strategy_of(model_, *precision_);
  if (opts_.epochs < 1) throw ValueError("Runner: epochs must be >= 1, got " + std::to_string(opts_.epochs));
  if (opts_.log_interval < 1) throw ValueError("Runner: log_interval must be >= 1, got " + std::to_string(opts_.log_interval));
  if (opts_.save_interval < 0 || opts_.keep_checkpoints < 0 || opts_.max_iters < 0)
    throw ValueError("Runner: save_interval, keep_checkpoints and max_iters must be >= 0");
  if (nvtx::enabled()) checkpointed_module().label_ranges();  // forward ranges named by module path
  if (opts_.tensorboard && opts_.work_dir.empty())
    throw ValueError("Runner: tensorboard needs a work_dir to write its event files in");
  if (!(opts_.clip_grad_norm >= 0)) throw ValueError("Runner: clip_grad_norm must be >= 0, got " + std::to_string(opts_.clip_grad_norm));
  if (train_loader_->size() == 0) throw ValueError("Runner: the train loader yields no batch");
  if (opts_.accumulate < 1 || opts_.accumulate > train_loader_->size())
    throw ValueError("Runner: accumulate must be from 1 to the train loader's " + std::to_string(train_loader_->size()) +
                     " batches per epoch, got " + std::to_string(opts_.accumulate));
  if (opts_.compile && opts_.accumulate > 1)
    throw ValueError("Runner: compile (a captured step) with accumulate " + std::to_string(opts_.accumulate) +
                     ": a step of several batches is not captured; drop one of them");
  for (const Tensor& p : model_->parameters())
    if (!(p.device() == opts_.device))
      throw DeviceError("Runner: a model parameter is on " + p.device().str() + ", the run on " + opts_.device.str() +
                        " (move the model before building its TrainingPrecision)");
  if (opts_.locate_nonfinite && !opts_.compile) locator_ = std::make_unique<NonFiniteLocator>(*model_);
  if (opts_.compile && (opts_.group || precision_->zero()))
    throw ValueError("Runner: compile (a captured step) with a process group (" +
                     (opts_.group ? opts_.group->backend_name() + ", " + std::to_string(opts_.group->size()) + " rank(s)"
                                  : std::string("ZeRO's")) +
                     "): collectives are not captured; drop --compile, or train without --strategy");
  if (opts_.compile)
    compiled_ = std::make_unique<CompiledStep>(
        [this](const std::vector<Tensor>& batch) { return step(batch[0], batch[1]); },
        std::vector<optim::Optimizer*>{&precision_->optimizer()}, std::vector<Generator*>{}, opts_.compile_options);
  if (!opts_.work_dir.empty() && writes_files()) {
    std::error_code ec;
    fs::create_directories(opts_.work_dir, ec);
    if (ec || !fs::is_directory(opts_.work_dir))
      throw IOError("work dir " + printable_path(opts_.work_dir) + " cannot be made: " +
                    (ec ? ec.message() : std::string("it exists and is not a directory")));
    lock_ = std::make_unique<WorkDirLock>(opts_.work_dir);
    remove_stale_temporaries(opts_.work_dir);
  }
}

Runner::~Runner() = default;

std::string Runner::work_path(const std::string& file_name) const { return (fs::path(opts_.work_dir) / file_name).string(); }

std::string Runner::last_checkpoint() const {
  const std::string pointer = work_path("last_checkpoint");
  std::error_code ec;
  if (fs::exists(fs::symlink_status(pointer, ec)) && !fs::is_regular_file(pointer, ec))
    throw IOError(pointer + " is not a file (a directory, a dangling link, ...): it should hold one line naming a "
                  "checkpoint");
  std::ifstream in(pointer);
  if (!in) return "";
  // One line, the path; read no further than a path can be long.
  char line[PATH_MAX + 2] = {};
  in.read(line, sizeof line - 1);
  std::string path(line, static_cast<size_t>(in.gcount()));
  if (!path.empty() && path.back() == '\n') path.pop_back();
  if (path.empty() || path.size() > PATH_MAX || path.find_first_of(std::string("\n\0", 2)) != std::string::npos)
    throw IOError(pointer + " does not hold one line naming a checkpoint (" +
                  (path.empty() ? std::string("it is empty")
                                : path.size() > PATH_MAX ? "it is longer than a path can be"
                                                         : std::to_string(in.gcount()) + " bytes") + ")");
  // ember writes an absolute path of printable characters; anything else is damage, shown escaped.
  if (path.front() != '/' || std::any_of(path.begin(), path.end(), [](char c) { return c < 0x20 || c == 0x7f; }))
    throw IOError(pointer + " does not name a checkpoint by an absolute path of printable characters; it holds \"" +
                  printable(path) + "\"");
  return path;
}

bool Runner::stop_agreed(bool log_line) const {
  if (!opts_.group || opts_.group->size() == 1) return stop_requested_.load();
  // Every rank must stop after the same step, or the others would wait for it until the timeout:
  // the ranks agree at log lines, where they synchronise anyway.
  if (!log_line) return false;
  return over_ranks({stop_requested_.load() ? 1.0 : 0.0}, dist::ReduceOp::max)[0] > 0;
}

int64_t Runner::global_batch() const {
  return train_loader_->options().batch_size * (opts_.group ? opts_.group->size() : 1);
}

bool Runner::writes_files() const { return !opts_.group || opts_.group->rank() == 0; }

void Runner::open_log() {
  if (log_) return;
  const bool files = !opts_.work_dir.empty() && writes_files();
  log_ = std::make_unique<MetricLog>(console_, files ? work_path("scalars.json") : "",
                                     files && opts_.tensorboard ? work_path("tensorboard") : "");
}

nn::Module& Runner::checkpointed_module() const { return strategy_->module(); }

std::vector<double> Runner::over_ranks(std::vector<double> values, dist::ReduceOp op) const {
  if (!opts_.group || opts_.group->size() == 1) return values;
  Tensor t = from_vector(values, {static_cast<int64_t>(values.size())}).to(opts_.group->device());
  opts_.group->all_reduce(t, op);
  return t.to_vector<double>();
}

std::vector<Tensor> Runner::step(const Tensor& images, const Tensor& labels) {
  begin_step();
  return end_step(micro_step(images, labels, true));
}

void Runner::begin_step() {
  precision_->zero_grad();
  if (locator_) locator_->begin_step(opts_.device);
}

Tensor Runner::micro_step(const Tensor& images, const Tensor& labels, bool last) {
  // Before the step's last batch, the data-parallel wrappers keep the gradients for it.
  const std::optional<dist::NoSync> keep = last ? std::nullopt : strategy_->no_sync();
  Tensor loss;
  {
    const auto autocast = precision_->autocast(opts_.device);
    // Float32 logits for the loss, as Apex O2 casts model outputs: a half loss would overflow once scaled.
    loss = cross_entropy((*model_)(images).to(DType::f32), labels);
  }
  if (locator_) locator_->check_forward(loss);
  if (opts_.accumulate > 1) loss = div(loss, Scalar(static_cast<double>(opts_.accumulate)));
  const autograd::BackwardObserverGuard observing(locator_ ? locator_->backward_observer() : nullptr);
  precision_->backward(loss);
  return loss;
}

std::vector<Tensor> Runner::end_step(const Tensor& loss) {
  const StepOutcome outcome = precision_->step(opts_.clip_grad_norm);
  return {loss, outcome.grad_norm, outcome.skipped};
}

std::pair<Tensor, Tensor> Runner::on_device(const data::Batch& batch) const {
  return {batch.images.to(opts_.device, batch.images.is_pinned()).to(precision_->input_dtype()),
          batch.labels.to(opts_.device, batch.labels.is_pinned())};
}

int64_t Runner::steps_per_epoch() const { return train_loader_->size() / opts_.accumulate; }

void Runner::finish_iteration(const std::vector<Tensor>& stepped, Window& window, Window& epoch_window,
                              double data_time, double started) {
  const Tensor& loss = stepped[0];
  const StepOutcome outcome{stepped[1], stepped[2]};
  log_nonfinite_->add(locator_ ? locator_->end_step() : NonFiniteStep{}, loss, outcome.skipped, iteration_ + 1);
  if (scheduler_) scheduler_->step();  // taken back at the next read-out if the step was skipped
  Tensor values;
  {
    NoGradGuard no_grad;
    values = stack({loss.detach().to(DType::f64), outcome.grad_norm.to(DType::f64), outcome.skipped.to(DType::f64)});
  }
  const double time = now_seconds() - started;  // the host's part; the device catches up at read-outs
  window.add(values, time, data_time);
  epoch_window.add(values, time, data_time);
  ++iteration_;
}

void Runner::log_train(Window& window, const Window& epoch_window, int64_t batch_index, double lr, double eta) {
  const bool scales = precision_->scales_loss();
  std::vector<double> v;
  {
    NoGradGuard no_grad;
    // v: the window's sums (0-2), the epoch's (3-5), the non-finite codes (6-7), the loss scale (8).
    std::vector<Tensor> parts = {window.sums, epoch_window.sums, log_nonfinite_->codes()};
    if (scales) parts.push_back(precision_->loss_scale().to(DType::f64).reshape({1}));
    v = cat(parts).to_vector<double>();  // the one synchronisation of the interval
  }
  const auto skipped = static_cast<int64_t>(v[2]);  // the same on every rank: all judge the averaged gradients
  if (skipped > 0 && scheduler_) scheduler_->rewind(skipped);
  skipped_steps_ += skipped;
  const std::vector<double> losses = over_ranks({v[0], v[3]}, dist::ReduceOp::avg);
  v[0] = losses[0];
  v[3] = losses[1];
  epoch_mean_loss_ = v[3] / std::max(epoch_window.count, 1.0);
  const double n = window.count;
  const double memory = over_ranks(
      {std::floor(static_cast<double>(backend::max_memory_allocated(opts_.device)) / kMiB)}, dist::ReduceOp::max)[0];
  backend::reset_peak_memory_stats(opts_.device);
  std::vector<LogField> fields = {
      {"lr", lr, FieldFormat::scientific},
      {"eta", eta, FieldFormat::duration},
      {"time", window.time / n},
      {"data_time", window.data_time / n},
      {"memory", memory, FieldFormat::integer},
      {"loss", v[0] / n},
      {"grad_norm", v[1] / n},
  };
  if (opts_.group || opts_.accumulate > 1)  // the images one optimizer step sees, over every rank
    fields.push_back({"global_batch", static_cast<double>(global_batch() * opts_.accumulate), FieldFormat::integer});
  if (scales) fields.push_back({"loss_scale", v[8]});
  fields.push_back({"skipped_steps", static_cast<double>(skipped_steps_), FieldFormat::integer});
  // Every rank counts the bad files its own share met and replaced.
  const double bad_images =
      over_ranks({static_cast<double>(train_loader_->dataset().bad_examples())}, dist::ReduceOp::sum)[0];
  if (bad_images > 0) fields.push_back({"bad_images", bad_images, FieldFormat::integer});
  if (const auto bad = log_nonfinite_->report(&v[6])) {
    fields.push_back({"nonfinite_step", static_cast<double>(bad->iteration), FieldFormat::integer});
    fields.push_back({"nonfinite", bad->where});
  }
  log_->write({"train", epoch_ + 1, batch_index + 1, steps_per_epoch()}, iteration_, fields);
  window = Window(opts_.device);
  *log_nonfinite_ = NonFiniteWindow(opts_.device);
}

RunSummary Runner::run() {
  if (opts_.resume) {
    std::string path = *opts_.resume;
    if (path.empty()) {
      if (opts_.work_dir.empty()) throw ValueError("Runner: resume from last_checkpoint needs a work_dir");
      path = last_checkpoint();
      if (path.empty())
        throw IOError("cannot resume: " + work_path("last_checkpoint") + " is missing (no checkpoint was saved in " +
                      opts_.work_dir + ")");
    }
    if (opts_.resume->empty() && !fs::exists(path))  // last_checkpoint names a file that is gone: say so
      throw IOError("cannot resume: " + work_path("last_checkpoint") + " names " + printable_path(path) +
                    ", which does not exist");
    try {
      restore(load_checkpoint(path));
    } catch (const ValueError& e) {  // the checkpoint does not fit this run: say which checkpoint
      throw ValueError("cannot resume from " + printable_path(path) + ": " + e.what());
    }
    console_ << "Resumed from " << path << " at epoch " << epoch_ << ", iteration " << iteration_ << std::endl;
  }
  open_log();

  RunSummary summary;
  const int64_t iters_per_epoch = steps_per_epoch();
  int64_t total_iters = 0;  // for the eta: the run stops at max_iters or the last epoch
  if (__builtin_mul_overflow(opts_.epochs, iters_per_epoch, &total_iters)) total_iters = std::numeric_limits<int64_t>::max();
  if (opts_.max_iters > 0) total_iters = std::min(opts_.max_iters, total_iters);
  const int64_t first_iteration = iteration_;
  const double run_started = now_seconds();
  bool stopped = false;
  // A resumed run may have nothing left: its epochs done, or max_iters already reached (only tested
  // after a step below, which would take one step past it).
  if (opts_.max_iters > 0 && iteration_ >= opts_.max_iters) {
    console_ << "Nothing left to train: the run is at iteration " << iteration_ << ", max_iters is " << opts_.max_iters
             << std::endl;
    stopped = true;
  } else if (epoch_ >= opts_.epochs) {
    console_ << "Nothing left to train: the run has done its " << opts_.epochs << " epochs" << std::endl;
  }

  while (epoch_ < opts_.epochs && !stopped) {
    model_->train();
    train_loader_->set_position({epoch_, next_batch_});
    Window epoch_window(opts_.device);
    bool stop_at_epoch_end = false;
    double started = now_seconds();  // the step's start
    double waited = started;         // since when the next batch was awaited
    double data_time = 0;            // the step's wait for its batches
    const double epoch_started = started;
    int64_t micro = 0;               // batches of the current step done
    Tensor step_loss;                // their divided losses' sum
    while (auto batch = train_loader_->next()) {
      data_time += now_seconds() - waited;
      const auto [images, labels] = on_device(*batch);
      std::vector<Tensor> stepped;
      if (compiled_) {  // one batch a step (the constructor refuses accumulate with compile)
        stepped = (*compiled_)({images, labels});
      } else {
        if (micro == 0) begin_step();
        const Tensor loss = micro_step(images, labels, micro + 1 == opts_.accumulate);
        step_loss = micro == 0 ? loss.detach() : add(step_loss, loss.detach());
        if (++micro < opts_.accumulate) {
          waited = now_seconds();
          continue;
        }
        micro = 0;
        stepped = end_step(step_loss);
      }
      const int64_t batch_index = train_loader_->position().batch / opts_.accumulate - 1;  // the step's, in the epoch
      const double lr = precision_->optimizer().param_groups().front().lr();  // the lr this step used
      finish_iteration(stepped, *log_window_, epoch_window, data_time, started);
      const bool log_line = (batch_index + 1) % opts_.log_interval == 0 || batch_index + 1 == iters_per_epoch;
      if (log_line) {
        const double per_iter = (now_seconds() - run_started) / static_cast<double>(iteration_ - first_iteration);
        log_train(*log_window_, epoch_window, batch_index, lr, per_iter * static_cast<double>(total_iters - iteration_));
      }
      if (stop_agreed(log_line) || (opts_.max_iters > 0 && iteration_ >= opts_.max_iters)) {
        // At the epoch's last batch the epoch ends as usual (evaluation, checkpoints) first.
        stop_at_epoch_end = true;
        if (batch_index + 1 < iters_per_epoch) {
          stopped = true;
          break;
        }
      }
      if (batch_index + 1 == iters_per_epoch) break;  // the batches left do not fill a step: skipped
      started = waited = now_seconds();
      data_time = 0;
    }
    const double epoch_seconds = now_seconds() - epoch_started;
    if (stopped) {
      // Stopped between log lines: read what the epoch's window holds (the log window stays pending
      // in the checkpoint, and is counted once a resumed run logs it).
      const std::vector<double> pending = cat({log_window_->sums, epoch_window.sums}).to_vector<double>();
      const double mean_loss = pending[3] / std::max(epoch_window.count, 1.0);
      summary.skipped_steps = skipped_steps_ + static_cast<int64_t>(pending[2]);
      next_batch_ = train_loader_->position().batch;
      summary.epochs.push_back({epoch_ + 1, epoch_seconds, epoch_window.data_time, mean_loss, kNaN});
      if (!opts_.work_dir.empty()) save("iter_" + std::to_string(iteration_) + ".safetensors");
      break;
    }
    const double mean_loss = epoch_mean_loss_;  // the epoch's last batch logged, reading it
    ++epoch_;
    next_batch_ = 0;
    const double top1 = val_loader_ ? evaluate() : kNaN;
    summary.epochs.push_back({epoch_, epoch_seconds, epoch_window.data_time, mean_loss, top1});
    const bool saved = save_epoch_checkpoints(top1);
    if (stop_at_epoch_end && epoch_ < opts_.epochs) {
      stopped = true;
      if (!saved && !opts_.work_dir.empty()) save("iter_" + std::to_string(iteration_) + ".safetensors");
    }
  }
  summary.best_top1 = best_top1_;
  summary.iterations = iteration_;
  if (!stopped) summary.skipped_steps = skipped_steps_;
  summary.stopped_early = stopped;
  return summary;
}

double Runner::evaluate() {
  if (!val_loader_) throw ValueError("Runner::evaluate: no validation loader was given");
  open_log();
  NoGradGuard no_grad;
  const bool was_training = model_->is_training();
  model_->eval();
  val_loader_->set_epoch(0);
  // Read once, at the end: top-1 and top-5 hits (top-5 only with more than 5 classes).
  Tensor correct = zeros({}, TensorOptions(DType::i64).with_device(opts_.device));
  Tensor correct5 = zeros({}, TensorOptions(DType::i64).with_device(opts_.device));
  int64_t seen = 0, iters = 0, classes = 0;
  double time = 0, data_time = 0;
  double started = now_seconds();
  while (auto batch = val_loader_->next()) {
    data_time += now_seconds() - started;
    const Tensor images = batch->images.to(opts_.device, batch->images.is_pinned()).to(precision_->input_dtype());
    const Tensor labels = batch->labels.to(opts_.device, batch->labels.is_pinned());
    Tensor logits;
    {
      const auto autocast = precision_->autocast(opts_.device);
      logits = (*model_)(images);
    }
    add_(correct, sum(eq(argmax(logits, 1), labels)));
    classes = logits.size(1);
    if (classes > 5) {
      // In the top 5 when fewer than 5 classes score above the label's (a tie counts as a hit).
      const Tensor label_logit = gather(logits, 1, labels.unsqueeze(1));
      add_(correct5, sum(lt(sum(gt(logits, label_logit), {1}), 5)));
    }
    seen += labels.numel();
    ++iters;
    time += now_seconds() - started;
    started = now_seconds();
  }
  model_->train(was_training);
  // Data parallel: every rank counted its own share.
  const std::vector<double> counts =
      over_ranks({static_cast<double>(correct.item<int64_t>()), static_cast<double>(correct5.item<int64_t>()),
                  static_cast<double>(seen)},
                 dist::ReduceOp::sum);
  if (counts[2] == 0) throw ValueError("Runner::evaluate: the validation loader yields no example");
  const double top1 = 100.0 * counts[0] / counts[2];
  const double n = static_cast<double>(iters);
  std::vector<LogField> fields = {{"accuracy/top1", top1}};
  if (classes > 5) fields.push_back({"accuracy/top5", 100.0 * counts[1] / counts[2]});
  fields.push_back({"data_time", data_time / n});
  fields.push_back({"time", time / n});
  log_->write({"val", epoch_, iters, val_loader_->size()}, epoch_, fields);
  return top1;
}

Checkpoint Runner::checkpoint() const {
  Checkpoint c;
  strategy_->add_state(c, *precision_);
  if (scheduler_) c.scheduler = scheduler_->state_dict();
  c.runner["best_top1"] = optim::scalar_f64(best_top1_);
  c.runner["global_batch"] = optim::scalar_f64(static_cast<double>(global_batch()));
  c.runner["skipped_steps"] = optim::scalar_f64(static_cast<double>(skipped_steps_));
  const std::vector<double> sums = cat({log_window_->sums, log_nonfinite_->codes()}).to_vector<double>();
  for (size_t i = 0; i < std::size(kWindowSums); ++i)
    c.runner[std::string("log_window.") + kWindowSums[i]] = optim::scalar_f64(sums[i]);
  if (const auto bad = log_nonfinite_->report(&sums[std::size(kWindowSums)])) {
    c.runner["log_window.nonfinite_step"] = optim::scalar_f64(static_cast<double>(bad->iteration));
    c.runner_text["log_window.nonfinite"] = bad->where;
  }
  for (const auto& [name, field] : kWindowFields)
    c.runner[std::string("log_window.") + name] = optim::scalar_f64((*log_window_).*field);
  c.runner_text["optimizer"] = precision_->optimizer().name();
  c.rng = default_generator().state();
  c.epoch = epoch_;
  c.iteration = iteration_;
  c.loader = {epoch_, next_batch_};
  c.info = opts_.info;
  return c;
}

void Runner::restore(const Checkpoint& c) {
  // Every value read from the file is checked before it is used as a count or an index.
  auto runner_value = [&](const std::string& key) {
    const auto it = c.runner.find(key);
    if (it == c.runner.end()) throw ValueError("Runner: the checkpoint lacks runner." + key);
    if (it->second.numel() != 1)
      throw ValueError("Runner: runner." + key + " in the checkpoint has shape " + to_string(it->second.shape()) +
                       ", expected one value");
    return it->second.to(DType::f64).item<double>();
  };
  auto runner_count = [&](const std::string& key, double low) {
    const double v = runner_value(key);
    if (!is_exact_count(v, low))
      throw ValueError("Runner: runner." + key + " in the checkpoint is " + decimal_text(v) + ", not a whole number from " +
                       std::to_string(static_cast<int64_t>(low)) + " to 2^53");
    return static_cast<int64_t>(v);
  };
  // A job of another size (or batch) goes on from the same image of the epoch: the batch index is
  // scaled by the saved global batch over this run's.
  int64_t batch = c.loader.batch;
  if (c.runner.count("global_batch")) {
    int64_t images = 0;
    if (__builtin_mul_overflow(batch, runner_count("global_batch", 1), &images))
      throw ValueError("Runner: the checkpoint's position (batch " + std::to_string(batch) + " of global batch " +
                       std::to_string(runner_count("global_batch", 1)) + ") is beyond any epoch");
    if (images % global_batch() != 0)
      throw ValueError("Runner: the checkpoint stopped after " + std::to_string(images) + " images of epoch " +
                       std::to_string(c.loader.epoch + 1) + ", which is no whole number of this run's "
                       "global batches of " + std::to_string(global_batch()) + ": resume at an epoch's end, or with a "
                       "global batch that divides it");
    batch = images / global_batch();
  }
  if (c.loader.epoch != c.epoch || batch >= steps_per_epoch() * opts_.accumulate)
    throw ValueError("Runner: checkpoint position epoch " + std::to_string(c.loader.epoch) + ", batch " +
                     std::to_string(batch) + " does not fit a loader of " + std::to_string(train_loader_->size()) +
                     " batches per epoch (" + std::to_string(steps_per_epoch()) + " steps of " +
                     std::to_string(opts_.accumulate) + ") at epoch " + std::to_string(c.epoch));
  if (batch % opts_.accumulate != 0)
    throw ValueError("Runner: the checkpoint stopped after batch " + std::to_string(batch) + " of epoch " +
                     std::to_string(c.epoch + 1) + ", which is not the end of a step of accumulate " +
                     std::to_string(opts_.accumulate) + " batches: resume with an accumulate that divides it");
  if (c.scheduler.empty() != !scheduler_)
    throw ValueError(std::string("Runner: the checkpoint ") + (scheduler_ ? "has no" : "has a") +
                     " scheduler state but this run " + (scheduler_ ? "has a scheduler" : "has none"));
  if (const auto saved = c.runner_text.find("optimizer");
      saved != c.runner_text.end() && saved->second != precision_->optimizer().name())
    throw ValueError("Runner: the checkpoint was written by a run with " + saved->second.substr(0, 40) + ", this run's optimizer is " +
                     precision_->optimizer().name() + ": its state cannot continue in another optimizer");
  // What the run was started with and a resume cannot change: the saved optimizer and scheduler state
  // would override it while the new run announced it (checkpoints that lack an entry are not checked).
  for (const char* key : {"scheduler", "precision", "lr", "momentum", "weight_decay", "warmup_iters"}) {
    const auto saved = c.info.find(key);
    const auto ours = opts_.info.find(key);
    if (saved != c.info.end() && ours != opts_.info.end() && saved->second != ours->second)
      throw ValueError("Runner: the checkpoint's run has " + std::string(key) + " " + printable(saved->second, 40) +
                       ", this run " + ours->second + ": a resume continues the saved run (keep its settings, or start "
                       "a new run in another work dir)");
  }
  // The file's learning rates agree: each optimizer group runs at the scheduler's last lr, and the
  // scheduler's base lrs are this run's where the saved run's lr was checked equal above.
  if (scheduler_) {
    const auto one_value = [](const StateDict& d, const std::string& key) -> std::optional<double> {
      const auto it = d.find(key);
      if (it == d.end() || !it->second.defined() || it->second.numel() != 1) return std::nullopt;
      return it->second.to(DType::f64).item<double>();
    };
    for (size_t g = 0; g < scheduler_->base_lrs().size(); ++g) {
      const std::string group = std::to_string(g);
      const auto last = one_value(c.scheduler, "last_lr." + group), lr = one_value(c.optimizer, "param_groups." + group + ".lr");
      if (last && lr && !(*last == *lr))
        throw ValueError("Runner: the checkpoint's optimizer runs param group " + group + " at lr " + decimal_text(*lr) +
                         ", its scheduler at " + decimal_text(*last) + ": the file is inconsistent");
      const auto base = one_value(c.scheduler, "base_lrs." + group);
      if (base && c.info.count("lr") && opts_.info.count("lr") && !(*base == scheduler_->base_lrs()[g]))
        throw ValueError("Runner: the checkpoint's scheduler has base lr " + decimal_text(*base) + " for param group " +
                         group + ", its run's lr is " + printable(c.info.at("lr"), 40) + ": the file is inconsistent");
    }
  }
  Window window(opts_.device);
  std::vector<double> sums;
  for (const char* name : kWindowSums) sums.push_back(runner_value(std::string("log_window.") + name));
  window.sums = from_vector(sums, {3}).to(opts_.device);
  for (const auto& [name, field] : kWindowFields) {
    window.*field = runner_value(std::string("log_window.") + name);
    if (!(window.*field >= 0 && std::isfinite(window.*field)))
      throw ValueError("Runner: runner.log_window." + std::string(name) + " in the checkpoint is " +
                       decimal_text(window.*field) + ", not a finite value >= 0");
  }
  // Counts are whole numbers: a fraction would scale the logged means.
  for (const auto& [name, value] : {std::pair{"count", window.count}, std::pair{"skipped", sums[2]}})
    if (!is_exact_count(value))
      throw ValueError("Runner: runner.log_window." + std::string(name) + " in the checkpoint is " + decimal_text(value) +
                       ", not a count");
  NonFiniteWindow nonfinite(opts_.device);
  if (c.runner.count("log_window.nonfinite_step")) {
    const auto where = c.runner_text.find("log_window.nonfinite");
    if (where == c.runner_text.end()) throw ValueError("Runner: the checkpoint has runner.log_window.nonfinite_step but no text for it");
    nonfinite.restore({runner_count("log_window.nonfinite_step", 1), where->second});
  }
  const double best = runner_value("best_top1");
  if (!std::isnan(best) && !(best >= 0 && best <= 100))
    throw ValueError("Runner: runner.best_top1 in the checkpoint is " + decimal_text(best) + ", not an accuracy in percent");
  const int64_t skipped = runner_count("skipped_steps", 0);
  if (skipped > c.iteration)
    throw ValueError("Runner: the checkpoint counts " + std::to_string(skipped) + " skipped steps in " +
                     std::to_string(c.iteration) + " iterations");
  // Everything that can fail is checked before anything changes; the loads below validate first too.
  strategy_->restore_state(c, *precision_);
  if (scheduler_) scheduler_->load_state_dict(c.scheduler);
  // A sharded checkpoint of as many ranks holds each rank's generator; else every rank takes rank 0's.
  const int rank = opts_.group ? opts_.group->rank() : 0;
  const bool own_rng = opts_.group && c.rank_rngs.size() == static_cast<size_t>(opts_.group->size());
  default_generator().set_state(own_rng ? c.rank_rngs[static_cast<size_t>(rank)] : c.rng);
  *log_window_ = window;
  *log_nonfinite_ = nonfinite;
  best_top1_ = best;
  skipped_steps_ = skipped;
  epoch_ = c.epoch;
  iteration_ = c.iteration;
  next_batch_ = batch;
}

void Runner::save(const std::string& file_name) {
  const std::string path = fs::absolute(work_path(file_name)).string();
  write_checkpoint(path);
  if (!writes_files()) return;
  const std::string pointer = path + "\n";
  write_file_atomic(work_path("last_checkpoint"), pointer.data(), pointer.size());
}

void Runner::write_checkpoint(const std::string& path) {
  // The pending log window's loss as the mean over the ranks, which every rank of a resumed job
  // starts from (the logged loss is the ranks' mean, and the mean is linear).
  const double loss_sum = over_ranks({log_window_->sums.narrow(0, 0, 1).item<double>()}, dist::ReduceOp::avg)[0];
  const auto job_checkpoint = [&] {
    Checkpoint c = checkpoint();
    c.runner["log_window.loss"] = optim::scalar_f64(loss_sum);
    return c;
  };
  // Under ZeRO every rank writes its shard; else rank 0 writes the job's checkpoints.
  if (strategy_->every_rank_writes() || writes_files()) strategy_->save(path, job_checkpoint());
}

bool Runner::save_epoch_checkpoints(double top1) {
  if (opts_.work_dir.empty()) return false;
  const bool best = std::isfinite(top1) && !(top1 <= best_top1_);  // NaN best: the first is the best
  if (best) best_top1_ = top1;
  const bool due = opts_.save_interval > 0 && (epoch_ % opts_.save_interval == 0 || epoch_ == opts_.epochs);
  if (due) save("epoch_" + std::to_string(epoch_) + ".safetensors");
  if (best && opts_.save_best) write_checkpoint(work_path("best_accuracy_top1.safetensors"));
  if (!writes_files() || opts_.keep_checkpoints == 0) return due;
  std::vector<std::pair<int64_t, fs::path>> epoch_files;
  for (const auto& entry : fs::directory_iterator(opts_.work_dir)) {
    const int64_t n = epoch_file_number(entry.path().filename().string());
    if (n >= 0) epoch_files.emplace_back(n, entry.path());
  }
  std::sort(epoch_files.rbegin(), epoch_files.rend());
  // Never the file last_checkpoint names: an earlier run may have left epoch files numbered past it.
  const std::string named = last_checkpoint();
  for (size_t i = static_cast<size_t>(opts_.keep_checkpoints); i < epoch_files.size(); ++i)
    if (fs::absolute(epoch_files[i].second).string() != named) remove_checkpoint(epoch_files[i].second.string());
  return due;
}

}  // namespace ember::train
