#include "dist/data_parallel.h"

#include <array>
#include <string>

#include "optim/clip_grad.h"

namespace ember::dist {

namespace {
constexpr std::array kStrategies = {Strategy::ddp, Strategy::zero1, Strategy::zero2, Strategy::zero3};

int zero_stage(Strategy s) { return s == Strategy::ddp ? 0 : static_cast<int>(s) - static_cast<int>(Strategy::ddp); }
}  // namespace

const char* strategy_name(Strategy s) {
  switch (s) {
    case Strategy::ddp: return "ddp";
    case Strategy::zero1: return "zero1";
    case Strategy::zero2: return "zero2";
    case Strategy::zero3: return "zero3";
  }
  return "?";
}

Strategy parse_strategy(std::string_view name) {
  for (Strategy s : kStrategies)
    if (name == strategy_name(s)) return s;
  throw ValueError("data-parallel strategy '" + std::string(name) + "' is not one of ddp, zero1, zero2, zero3");
}

DataParallel::DataParallel(std::shared_ptr<nn::UnaryModule> model, std::shared_ptr<ProcessGroup> group,
                           const OptimizerFactory& make_optimizer, DataParallelOptions options)
    : strategy_(options.strategy), model_(std::move(model)), group_(std::move(group)) {
  if (!model_) throw ValueError("DataParallel: the model is null");
  if (!group_) throw ValueError("DataParallel: the process group is null");
  if (!make_optimizer) throw ValueError("DataParallel: the optimizer factory is empty");
  register_module("module", model_);
  if (strategy_ == Strategy::ddp) {
    ddp_ = std::make_shared<DistributedDataParallel>(model_, group_, options.ddp);
    std::vector<Tensor> params;
    for (const Tensor& p : model_->parameters())
      if (p.requires_grad()) params.push_back(p);
    optimizer_ = make_optimizer(std::move(params));
    if (!optimizer_) throw ValueError("DataParallel: the optimizer factory returned none");
    return;
  }
  const int stage = zero_stage(strategy_);
  if (options.zero.stage != ZeroOptions{}.stage && options.zero.stage != stage)
    throw ValueError("DataParallel: options.zero.stage is " + std::to_string(options.zero.stage) + " but the strategy is " +
                     strategy_name(strategy_) + "; leave the stage unset, the strategy sets it");
  options.zero.stage = stage;
  zero_ = std::make_unique<ZeroOptimizer>(*model_, group_, make_optimizer, options.zero);
}

std::string DataParallel::extra_repr() const {
  return std::string("strategy=") + strategy_name(strategy_) + ", world_size=" + std::to_string(group_->size());
}

Tensor DataParallel::forward(const Tensor& x) { return ddp_ ? (*ddp_)(x) : (*model_)(x); }

void DataParallel::step(const optim::StepInputs& inputs) {
  if (zero_)
    zero_->step(inputs);
  else
    optimizer_->step(inputs);
}

void DataParallel::zero_grad() {
  if (zero_)
    zero_->zero_grad();
  else
    optimizer_->zero_grad();
}

NoSync DataParallel::no_sync() { return zero_ ? zero_->partition().no_sync() : ddp_->no_sync(); }

Tensor DataParallel::clip_grad_norm_(double max_norm) {
  if (zero_) return zero_->clip_grad_norm_(max_norm);
  // DDP's gradients are the average already, equal on every rank: the local norm is the global one.
  return optim::clip_grad_norm_(model_->parameters(), max_norm);
}

std::optional<ZeroPartition::Gathered> DataParallel::gathered() {
  if (!zero_) return std::nullopt;
  return zero_->partition().gathered();
}

optim::Optimizer& DataParallel::optimizer() { return zero_ ? zero_->inner() : *optimizer_; }

}  // namespace ember::dist
