/// @file
/// Learning-rate schedulers (PyTorch's torch.optim.lr_scheduler): each sets its optimizer's group
/// lrs from a closed form of the epoch count. Step one only after a step the optimizer really took
/// (a step skipped for non-finite gradients must not advance the schedule).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "optim/optimizer.h"

namespace ember::optim {

class SequentialLR;

/// The base of the schedulers (torch.optim.lr_scheduler.LRScheduler). A scheduler is built after
/// its optimizer and takes its first step, to epoch 0, in the constructor.
class LRScheduler {
 public:
  virtual ~LRScheduler() = default;
  LRScheduler(const LRScheduler&) = delete;
  LRScheduler& operator=(const LRScheduler&) = delete;

  /// Advances last_epoch by one and sets every group's lr.
  virtual void step();
  /// Takes back the last `steps` steps (steps the optimizer turned out to skip on the device) and sets
  /// the lrs of the epoch reached. ValueError when steps is negative or more than were taken.
  virtual void rewind(int64_t steps);
  /// The lr of each group, as the last step set it.
  const std::vector<double>& get_last_lr() const { return last_lr_; }
  int64_t last_epoch() const { return last_epoch_; }  ///< The epoch reached: 0 after construction, one more per step().
  const std::vector<double>& base_lrs() const { return base_lrs_; }  ///< Each group's initial lr.

  /// "last_epoch", "step_count", "base_lrs.<g>", "last_lr.<g>" as 0-dim f64 tensors (SequentialLR
  /// adds its children under "schedulers.<i>."). Hyperparameters come from the constructor.
  virtual StateDict state_dict() const;
  /// ValueError when the dict's group count differs or an entry is missing.
  virtual void load_state_dict(const StateDict& dict);

 protected:
  /// Records each group's "initial_lr" (kept when an earlier scheduler set it) as the base lr.
  explicit LRScheduler(Optimizer& optimizer);
  /// The lrs at last_epoch_, from the closed form.
  virtual std::vector<double> get_lr() const = 0;
  /// The first step, to epoch 0; derived constructors call it last.
  void initial_step() { step(); }
  /// Jumps to `epoch` and sets the lrs there (SequentialLR restarts a child at 0).
  void step_to(int64_t epoch);
  /// Sets each group's lr (ValueError when lrs does not have one per group).
  void apply(const std::vector<double>& lrs);

  Optimizer& optimizer_;          ///< the optimizer whose lrs it sets
  std::vector<double> base_lrs_;  ///< each group's initial_lr
  std::vector<double> last_lr_;   ///< the lrs set last
  int64_t last_epoch_ = -1;       ///< the epoch reached; -1 until the first step
  int64_t step_count_ = 0;        ///< calls of step() (PyTorch's _step_count)

  friend class SequentialLR;
};

/// Multiplies the lr by gamma every step_size epochs: base_lr * gamma^(epoch / step_size).
class StepLR final : public LRScheduler {
 public:
  StepLR(Optimizer& optimizer, int64_t step_size, double gamma = 0.1);  ///< ValueError unless step_size > 0.

 protected:
  std::vector<double> get_lr() const override;

 private:
  int64_t step_size_;
  double gamma_;
};

/// Multiplies the lr by gamma at each milestone: base_lr * gamma^(number of milestones <= epoch);
/// milestones may repeat (each counts).
class MultiStepLR final : public LRScheduler {
 public:
  /// The milestones are epochs, in any order.
  MultiStepLR(Optimizer& optimizer, std::vector<int64_t> milestones, double gamma = 0.1);

 protected:
  std::vector<double> get_lr() const override;

 private:
  std::vector<int64_t> milestones_;  // sorted
  double gamma_;
};

/// Anneals the lr from base_lr to eta_min along a half cosine over T_max epochs:
/// eta_min + (base_lr - eta_min) * (1 + cos(pi * epoch / T_max)) / 2.
class CosineAnnealingLR final : public LRScheduler {
 public:
  CosineAnnealingLR(Optimizer& optimizer, int64_t T_max, double eta_min = 0.0);  ///< ValueError unless T_max > 0.

 protected:
  std::vector<double> get_lr() const override;

 private:
  int64_t T_max_;
  double eta_min_;
};

/// Scales the lr linearly from start_factor to end_factor over total_iters epochs:
/// base_lr * (start + (end - start) * min(epoch, total_iters) / total_iters); a linear warmup is
/// LinearLR(opt, start_factor, 1.0, warmup_steps).
class LinearLR final : public LRScheduler {
 public:
  /// ValueError unless start_factor is in (0, 1], end_factor in [0, 1] and total_iters > 0.
  LinearLR(Optimizer& optimizer, double start_factor = 1.0 / 3, double end_factor = 1.0, int64_t total_iters = 5);

 protected:
  std::vector<double> get_lr() const override;

 private:
  double start_factor_, end_factor_;
  int64_t total_iters_;
};

/// OneCycleLR's settings, with PyTorch's defaults.
struct OneCycleOptions {
  double pct_start = 0.3;         ///< the share of total_steps spent rising to max_lr
  bool cos_anneal = true;         ///< anneal_strategy: true = "cos", false = "linear"
  bool cycle_momentum = true;     ///< move momentum (or Adam's beta1) against the lr
  double base_momentum = 0.85;    ///< the momentum at the lr's peak
  double max_momentum = 0.95;     ///< the momentum at the lr's start and end
  double div_factor = 25.0;       ///< initial_lr = max_lr / div_factor
  double final_div_factor = 1e4;  ///< the last lr = initial_lr / final_div_factor
  bool three_phase = false;       ///< come back down to initial_lr before falling to the last lr
};

/// The 1cycle policy (Smith & Topin 2018): from max_lr / div_factor up to max_lr over pct_start of
/// total_steps, then down to initial_lr / final_div_factor (three_phase: back to initial_lr first).
/// With cycle_momentum, momentum (or Adam's beta1) moves inversely between max_momentum and
/// base_momentum. Stepping past total_steps raises ValueError.
class OneCycleLR final : public LRScheduler {
 public:
  /// A cycle of total_steps steps peaking at max_lr in every group. ValueError for total_steps <= 0,
  /// pct_start outside [0, 1], or cycle_momentum with an optimizer that has neither momentum nor betas.
  OneCycleLR(Optimizer& optimizer, double max_lr, int64_t total_steps, OneCycleOptions options = {});

 protected:
  std::vector<double> get_lr() const override;

 private:
  struct Phase {
    double end_step;
    int start, end;  // 0 = initial_lr, 1 = max_lr, 2 = min_lr
  };
  double anneal(double start, double end, double pct) const;
  void set_momentum(double m);
  int64_t total_steps_;
  OneCycleOptions o_;
  std::vector<Phase> phases_;
  std::vector<double> initial_lrs_, max_lrs_, min_lrs_;
  std::string momentum_key_;  // "momentum" or "beta1" when cycling
};

/// Runs schedulers[0] until milestones[0], then schedulers[1] restarted at epoch 0, and so on.
class SequentialLR final : public LRScheduler {
 public:
  /// The schedulers must drive `optimizer` and milestones.size() must be schedulers.size() - 1
  /// (ValueError otherwise, and for an empty list).
  SequentialLR(Optimizer& optimizer, std::vector<std::shared_ptr<LRScheduler>> schedulers,
               std::vector<int64_t> milestones);
  void step() override;
  void rewind(int64_t steps) override;
  StateDict state_dict() const override;
  void load_state_dict(const StateDict& dict) override;

 protected:
  std::vector<double> get_lr() const override { return last_lr_; }

 private:
  std::vector<std::shared_ptr<LRScheduler>> schedulers_;
  std::vector<int64_t> milestones_;
};

}  // namespace ember::optim
