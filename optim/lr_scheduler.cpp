#include "optim/lr_scheduler.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "tensor/decimal.h"
#include "tensor/error.h"
#include "tensor/math.h"

namespace ember::optim {

// ---- LRScheduler (PyTorch torch/optim/lr_scheduler.py, LRScheduler)

LRScheduler::LRScheduler(Optimizer& optimizer) : optimizer_(optimizer) {
  for (auto& g : optimizer_.param_groups()) {
    auto it = g.options.find("initial_lr");
    if (it == g.options.end()) it = g.options.emplace("initial_lr", g.lr()).first;
    base_lrs_.push_back(it->second);
  }
}

void LRScheduler::apply(const std::vector<double>& lrs) {
  auto& groups = optimizer_.param_groups();
  if (lrs.size() != groups.size())
    throw ValueError("LRScheduler: " + std::to_string(lrs.size()) + " lrs for " + std::to_string(groups.size()) +
                     " param groups (were groups added after the scheduler was made?)");
  for (size_t g = 0; g < groups.size(); ++g) groups[g].set_lr(lrs[g]);
  last_lr_ = lrs;
}

void LRScheduler::step() {
  ++step_count_;
  ++last_epoch_;
  apply(get_lr());
}

namespace {
void check_rewind(int64_t steps, int64_t last_epoch) {
  if (steps < 0 || steps > last_epoch)
    throw ValueError("LRScheduler.rewind: cannot take back " + std::to_string(steps) + " steps at epoch " +
                     std::to_string(last_epoch));
}
}  // namespace

void LRScheduler::rewind(int64_t steps) {
  check_rewind(steps, last_epoch_);
  step_count_ -= steps;
  last_epoch_ -= steps;
  apply(get_lr());
}

void LRScheduler::step_to(int64_t epoch) {
  ++step_count_;
  last_epoch_ = epoch;
  apply(get_lr());
}

namespace {
const Tensor& entry(const StateDict& d, const std::string& key) {
  auto it = d.find(key);
  if (it == d.end() || !it->second.defined()) throw ValueError("LRScheduler.load_state_dict: missing '" + key + "'");
  return it->second;
}

// A learning rate from the dict: finite and not negative, as the optimizers take.
double rate(const StateDict& d, const std::string& key) {
  const double v = entry(d, key).item<double>();
  if (!(v >= 0 && std::isfinite(v)))
    throw ValueError("LRScheduler.load_state_dict: '" + key + "' is " + decimal_text(v) + ", not a learning rate");
  return v;
}

// A step count from the dict: a whole number from -1 (before the first step) to 2^53.
int64_t count(const StateDict& d, const std::string& key) {
  const double v = entry(d, key).item<double>();
  if (!is_exact_count(v, -1))
    throw ValueError("LRScheduler.load_state_dict: '" + key + "' is " + decimal_text(v) + ", not a step count");
  return static_cast<int64_t>(v);
}
}  // namespace

StateDict LRScheduler::state_dict() const {
  StateDict d;
  d["last_epoch"] = scalar_f64(static_cast<double>(last_epoch_));
  d["step_count"] = scalar_f64(static_cast<double>(step_count_));
  for (size_t g = 0; g < base_lrs_.size(); ++g) d["base_lrs." + std::to_string(g)] = scalar_f64(base_lrs_[g]);
  for (size_t g = 0; g < last_lr_.size(); ++g) d["last_lr." + std::to_string(g)] = scalar_f64(last_lr_[g]);
  return d;
}

void LRScheduler::load_state_dict(const StateDict& d) {
  const size_t n = base_lrs_.size();
  if (d.count("base_lrs." + std::to_string(n)))
    throw ValueError("LRScheduler.load_state_dict: the dict has more than " + std::to_string(n) + " param groups");
  std::vector<double> base(n), last(n);
  for (size_t g = 0; g < n; ++g) {
    base[g] = rate(d, "base_lrs." + std::to_string(g));
    last[g] = rate(d, "last_lr." + std::to_string(g));
  }
  last_epoch_ = count(d, "last_epoch");
  step_count_ = count(d, "step_count");
  base_lrs_ = std::move(base);
  last_lr_ = std::move(last);
}

// ---- closed forms (each scheduler's _get_closed_form_lr in PyTorch)

StepLR::StepLR(Optimizer& optimizer, int64_t step_size, double gamma)
    : LRScheduler(optimizer), step_size_(step_size), gamma_(gamma) {
  if (step_size <= 0) throw ValueError("StepLR: step_size must be positive, got " + std::to_string(step_size));
  initial_step();
}

std::vector<double> StepLR::get_lr() const {
  std::vector<double> lrs;
  for (double b : base_lrs_) lrs.push_back(b * math::pow(gamma_, static_cast<double>(last_epoch_ / step_size_)));
  return lrs;
}

MultiStepLR::MultiStepLR(Optimizer& optimizer, std::vector<int64_t> milestones, double gamma)
    : LRScheduler(optimizer), milestones_(std::move(milestones)), gamma_(gamma) {
  std::sort(milestones_.begin(), milestones_.end());
  initial_step();
}

std::vector<double> MultiStepLR::get_lr() const {
  const auto passed = std::upper_bound(milestones_.begin(), milestones_.end(), last_epoch_) - milestones_.begin();
  std::vector<double> lrs;
  for (double b : base_lrs_) lrs.push_back(b * math::pow(gamma_, static_cast<double>(passed)));
  return lrs;
}

CosineAnnealingLR::CosineAnnealingLR(Optimizer& optimizer, int64_t T_max, double eta_min)
    : LRScheduler(optimizer), T_max_(T_max), eta_min_(eta_min) {
  if (T_max <= 0) throw ValueError("CosineAnnealingLR: T_max must be positive, got " + std::to_string(T_max));
  initial_step();
}

std::vector<double> CosineAnnealingLR::get_lr() const {
  const double c = math::cos(std::numbers::pi * static_cast<double>(last_epoch_) / static_cast<double>(T_max_));
  std::vector<double> lrs;
  for (double b : base_lrs_) lrs.push_back(eta_min_ + (b - eta_min_) * (1 + c) / 2);
  return lrs;
}

LinearLR::LinearLR(Optimizer& optimizer, double start_factor, double end_factor, int64_t total_iters)
    : LRScheduler(optimizer), start_factor_(start_factor), end_factor_(end_factor), total_iters_(total_iters) {
  if (!(start_factor > 0 && start_factor <= 1))
    throw ValueError("LinearLR: start_factor must be in (0, 1], got " + std::to_string(start_factor));
  if (!(end_factor >= 0 && end_factor <= 1))
    throw ValueError("LinearLR: end_factor must be in [0, 1], got " + std::to_string(end_factor));
  if (total_iters <= 0) throw ValueError("LinearLR: total_iters must be positive, got " + std::to_string(total_iters));
  initial_step();
}

std::vector<double> LinearLR::get_lr() const {
  const double f = start_factor_ + (end_factor_ - start_factor_) *
                                       static_cast<double>(std::min(total_iters_, last_epoch_)) /
                                       static_cast<double>(total_iters_);
  std::vector<double> lrs;
  for (double b : base_lrs_) lrs.push_back(b * f);
  return lrs;
}

// ---- OneCycleLR (PyTorch's OneCycleLR.get_lr, which is a closed form of the step number)

OneCycleLR::OneCycleLR(Optimizer& optimizer, double max_lr, int64_t total_steps, OneCycleOptions o)
    : LRScheduler(optimizer), total_steps_(total_steps), o_(o) {
  if (total_steps <= 0) throw ValueError("OneCycleLR: total_steps must be positive, got " + std::to_string(total_steps));
  if (!(o.pct_start >= 0 && o.pct_start <= 1))
    throw ValueError("OneCycleLR: pct_start must be in [0, 1], got " + std::to_string(o.pct_start));
  const double ts = static_cast<double>(total_steps);
  if (o.three_phase)
    phases_ = {{o.pct_start * ts - 1, 0, 1}, {2 * o.pct_start * ts - 2, 1, 0}, {ts - 1, 0, 2}};
  else
    phases_ = {{o.pct_start * ts - 1, 0, 1}, {ts - 1, 1, 2}};
  auto& groups = optimizer_.param_groups();
  base_lrs_.clear();
  for (auto& g : groups) {
    const double initial = max_lr / o.div_factor;
    g.options["initial_lr"] = initial;
    g.set_lr(initial);
    initial_lrs_.push_back(initial);
    max_lrs_.push_back(max_lr);
    min_lrs_.push_back(initial / o.final_div_factor);
    base_lrs_.push_back(initial);
  }
  if (o.cycle_momentum) {
    const auto& d = optimizer_.defaults();
    if (d.count("beta1")) momentum_key_ = "beta1";
    else if (d.count("momentum")) momentum_key_ = "momentum";
    else throw ValueError("OneCycleLR: cycle_momentum needs an optimizer with momentum or betas");
    set_momentum(o.max_momentum);
  }
  initial_step();
}

double OneCycleLR::anneal(double start, double end, double pct) const {
  if (o_.cos_anneal) return end + (start - end) / 2.0 * (math::cos(std::numbers::pi * pct) + 1);
  return (end - start) * pct + start;
}

void OneCycleLR::set_momentum(double m) {
  for (auto& g : optimizer_.param_groups()) g.options[momentum_key_] = m;
}

std::vector<double> OneCycleLR::get_lr() const {
  const double step = static_cast<double>(last_epoch_);
  if (last_epoch_ > total_steps_)
    throw ValueError("OneCycleLR: stepped " + std::to_string(last_epoch_) + " times, total_steps is " +
                     std::to_string(total_steps_));
  // Phase momenta: max -> base -> max (three_phase: max -> base -> max -> max).
  const double moms[3][2] = {{o_.max_momentum, o_.base_momentum},
                             {o_.base_momentum, o_.max_momentum},
                             {o_.max_momentum, o_.max_momentum}};
  std::vector<double> lrs;
  double momentum = 0;
  for (size_t g = 0; g < initial_lrs_.size(); ++g) {
    const double values[3] = {initial_lrs_[g], max_lrs_[g], min_lrs_[g]};
    double start_step = 0;
    for (size_t i = 0; i < phases_.size(); ++i) {
      const Phase& ph = phases_[i];
      if (step <= ph.end_step || i + 1 == phases_.size()) {
        const double pct = (step - start_step) / (ph.end_step - start_step);
        lrs.push_back(anneal(values[ph.start], values[ph.end], pct));
        momentum = anneal(moms[i][0], moms[i][1], pct);
        break;
      }
      start_step = ph.end_step;
    }
  }
  if (!momentum_key_.empty())
    for (auto& grp : optimizer_.param_groups()) grp.options[momentum_key_] = momentum;
  return lrs;
}

// ---- SequentialLR (PyTorch's SequentialLR)

SequentialLR::SequentialLR(Optimizer& optimizer, std::vector<std::shared_ptr<LRScheduler>> schedulers,
                           std::vector<int64_t> milestones)
    : LRScheduler(optimizer), schedulers_(std::move(schedulers)), milestones_(std::move(milestones)) {
  if (schedulers_.empty()) throw ValueError("SequentialLR: needs at least one scheduler");
  if (milestones_.size() + 1 != schedulers_.size())
    throw ValueError("SequentialLR: " + std::to_string(schedulers_.size()) + " schedulers need " +
                     std::to_string(schedulers_.size() - 1) + " milestones, got " + std::to_string(milestones_.size()));
  for (size_t i = 0; i < schedulers_.size(); ++i)
    if (!schedulers_[i] || &schedulers_[i]->optimizer_ != &optimizer)
      throw ValueError("SequentialLR: scheduler " + std::to_string(i) + " drives a different optimizer");
  last_epoch_ = 0;
  // Reset the lrs, undo the children's initial steps, and take the first child's initial step again.
  auto& groups = optimizer_.param_groups();
  for (auto& g : groups) g.set_lr(g.get("initial_lr"));
  for (auto& s : schedulers_) s->last_epoch_ -= 1;
  schedulers_[0]->initial_step();
  last_lr_ = schedulers_[0]->get_last_lr();
}

void SequentialLR::step() {
  ++last_epoch_;
  ++step_count_;
  const size_t idx = static_cast<size_t>(std::upper_bound(milestones_.begin(), milestones_.end(), last_epoch_) -
                                         milestones_.begin());
  auto& s = *schedulers_[idx];
  if (idx > 0 && milestones_[idx - 1] == last_epoch_) s.step_to(0);
  else s.step();
  last_lr_ = s.get_last_lr();
}

void SequentialLR::rewind(int64_t steps) {
  check_rewind(steps, last_epoch_);
  step_count_ -= steps;
  last_epoch_ -= steps;
  // The child in charge at the epoch reached, at its own epoch (counted from its milestone).
  const size_t idx = static_cast<size_t>(std::upper_bound(milestones_.begin(), milestones_.end(), last_epoch_) -
                                         milestones_.begin());
  auto& s = *schedulers_[idx];
  s.last_epoch_ = last_epoch_ - (idx > 0 ? milestones_[idx - 1] : 0);
  s.apply(s.get_lr());
  last_lr_ = s.get_last_lr();
}

StateDict SequentialLR::state_dict() const {
  StateDict d = LRScheduler::state_dict();
  for (size_t i = 0; i < schedulers_.size(); ++i)
    for (auto& [k, v] : schedulers_[i]->state_dict()) d["schedulers." + std::to_string(i) + "." + k] = v;
  return d;
}

void SequentialLR::load_state_dict(const StateDict& d) {
  LRScheduler::load_state_dict(d);
  for (size_t i = 0; i < schedulers_.size(); ++i) {
    const std::string pre = "schedulers." + std::to_string(i) + ".";
    StateDict sub;
    for (auto it = d.lower_bound(pre); it != d.end() && it->first.compare(0, pre.size(), pre) == 0; ++it)
      sub[it->first.substr(pre.size())] = it->second;
    schedulers_[i]->load_state_dict(sub);
  }
}

}  // namespace ember::optim
