#include "train/nonfinite.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "autograd/grad_mode.h"
#include "autograd/node.h"
#include "optim/clip_grad.h"

namespace ember::train {

namespace {
constexpr int32_t kNone = std::numeric_limits<int32_t>::max();
constexpr double kStepStride = 2147483648.0;  // 2^31: above every check number
// Tensors checked this lately are not read again (a block's input feeds its downsample path too).
constexpr size_t kRecent = 4;
}  // namespace

NonFiniteLocator::NonFiniteLocator(nn::Module& model) {
  const auto modules = model.named_modules();
  for (size_t i = 0; i < modules.size(); ++i) {
    const auto& [name, module] = modules[i];
    module_names_.push_back(i == 0 ? "<model>" : name);
    const auto index = static_cast<int32_t>(i);
    const bool leaf = module->named_children().empty();
    hooks_.push_back(module->register_forward_pre_hook(
        [this, index, leaf](nn::Module&, const Tensor& input) { enter(index, leaf, input); }));
    hooks_.push_back(module->register_forward_hook(
        [this, index, leaf](nn::Module&, const Tensor&, const Tensor& output) { leave(index, leaf || index == 0, output); }));
  }
}

NonFiniteLocator::~NonFiniteLocator() {
  for (nn::HookHandle& h : hooks_) h.remove();
}

void NonFiniteLocator::begin_step(Device device) {
  first_ = full({2}, kNone, TensorOptions(DType::i32).with_device(device));
  calls_.clear();
  open_.clear();
  recent_.clear();
  labels_ = {};
  active_ = true;
}

void NonFiniteLocator::enter(int32_t module, bool leaf, const Tensor& input) {
  if (!active_) return;
  open_.push_back(calls_.size());
  calls_.push_back({autograd::next_sequence_nr(), std::numeric_limits<uint64_t>::max(), module});
  if (leaf) check(input, kInput);
}

void NonFiniteLocator::leave(int32_t module, bool checks_output, const Tensor& output) {
  if (!active_ || open_.empty()) return;  // (a call that began before the step)
  calls_[open_.back()].end = autograd::next_sequence_nr();
  open_.pop_back();
  if (checks_output) check(output, module);
}

void NonFiniteLocator::check(const Tensor& t, int32_t owner) {
  if (!active_ || !t.defined() || !t.is_floating_point()) return;
  if (std::any_of(recent_.begin(), recent_.end(), [&](const Tensor& r) { return r.is_same(t); })) return;
  if (recent_.size() == kRecent) recent_.erase(recent_.begin());
  recent_.push_back(t);
  const auto slot = static_cast<int32_t>(labels_.forward.size());
  const auto& fn = t.grad_fn();
  labels_.forward.push_back(fn ? label(module_at(fn->sequence_nr()), fn->name()) : label(owner, nullptr));
  optim::mark_first_nonfinite(select(first_, 0, 0), slot, {t});
}

autograd::BackwardObserver NonFiniteLocator::backward_observer() {
  return [this](const autograd::Node& node, const std::vector<Tensor>& grads) {
    if (!active_ || std::none_of(grads.begin(), grads.end(), [](const Tensor& g) { return g.defined(); })) return;
    const auto slot = static_cast<int32_t>(labels_.backward.size());
    labels_.backward.push_back(label(module_at(node.sequence_nr()), node.name()));
    optim::mark_first_nonfinite(select(first_, 0, 1), slot, grads);
  };
}

NonFiniteStep NonFiniteLocator::end_step() {
  active_ = false;
  recent_.clear();
  if (!previous_ || !(*previous_ == labels_)) previous_ = std::make_shared<const NonFiniteLabels>(std::move(labels_));
  labels_ = {};
  return {first_, previous_};
}

int32_t NonFiniteLocator::module_at(uint64_t seq) const {
  // Calls nest: the innermost holding seq is the latest to begin at or before it that ended after it.
  auto it = std::upper_bound(calls_.begin(), calls_.end(), seq, [](uint64_t s, const Call& c) { return s < c.begin; });
  while (it != calls_.begin()) {
    --it;
    if (seq < it->end) return it->module;
  }
  return kAfterModel;
}

const std::string* NonFiniteLocator::label(int32_t module, const char* op) {
  auto key = std::make_pair(module, std::string(op ? op : ""));
  const auto it = label_of_.find(key);
  if (it != label_of_.end()) return it->second;
  std::string text = module == kAfterModel ? "<loss>" : module == kInput ? "<input>" : module_names_[size_t(module)];
  if (op) text += std::string(" (") + op + ")";
  const std::string* stored = &label_texts_.emplace_back(std::move(text));
  label_of_.emplace(std::move(key), stored);
  return stored;
}

NonFiniteWindow::NonFiniteWindow(Device device)
    : codes_(full({2}, std::numeric_limits<double>::infinity(), TensorOptions(DType::f64).with_device(device))) {}

void NonFiniteWindow::add(const NonFiniteStep& step, const Tensor& loss, const Tensor& skipped, int64_t iteration) {
  NoGradGuard no_grad;
  const double k = static_cast<double>(steps_.size());
  steps_.emplace_back(iteration, step.labels);
  const Tensor first = step.first.defined() ? step.first.to(DType::f64) : full_like(codes_, kNone);
  // 1 when the step was skipped or its loss is not finite.
  const Tensor bad = where(optim::is_finite(loss), skipped, ones_like(skipped));
  codes_ = minimum(codes_, masked_fill(ember::add(first, k * kStepStride), eq(bad, 0.0), std::numeric_limits<double>::infinity()));
}

std::optional<NonFiniteReport> NonFiniteWindow::report(const double* codes) const {
  if (restored_) return restored_;
  if (!std::isfinite(codes[0])) return std::nullopt;
  const double k = std::floor(codes[0] / kStepStride);
  const auto& [iteration, labels] = steps_[static_cast<size_t>(k)];
  const auto forward = static_cast<int32_t>(codes[0] - k * kStepStride);
  const auto backward = static_cast<int32_t>(codes[1] - k * kStepStride);
  if (!labels) return NonFiniteReport{iteration, "not checked"};
  if (forward != kNone) return NonFiniteReport{iteration, "forward " + *labels->forward[size_t(forward)]};
  if (backward != kNone) return NonFiniteReport{iteration, "backward " + *labels->backward[size_t(backward)]};
  return NonFiniteReport{iteration, "not located"};
}

}  // namespace ember::train
