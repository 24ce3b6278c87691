#include "train/strategy.h"

#include <algorithm>

#include "dist/data_parallel.h"
#include "tensor/error.h"
#include "train/precision.h"
#include "train/sharded_state.h"

namespace ember::train {

namespace {

// FSDP's size-based auto-wrap threshold, the value MMEngine's FSDP strategy passes
// (size_based_auto_wrap_policy(min_num_params=1e7)).
constexpr int64_t kFsdpMinNumParams = 10'000'000;

class NoStrategy final : public Strategy {
 public:
  NoStrategy() : Strategy("none", nullptr) {}
  std::string kind() const override { return "none"; }
};

class DdpStrategy final : public Strategy {
 public:
  DdpStrategy(std::string name, std::shared_ptr<dist::ProcessGroup> group, dist::DDPOptions options)
      : Strategy(std::move(name), std::move(group)), options_(options) {}
  // A wrapper built outside a strategy (strategy_of).
  explicit DdpStrategy(std::shared_ptr<dist::DistributedDataParallel> ddp)
      : Strategy("ddp", nullptr), ddp_(std::move(ddp)) {}

  std::string kind() const override { return "ddp"; }

  std::shared_ptr<nn::UnaryModule> wrap(std::shared_ptr<nn::UnaryModule> model) override {
    if (ddp_) throw StateError("Strategy ddp: wrap() was called already; a strategy trains one model");
    if (&module() != model.get())
      throw ValueError("Strategy ddp: wrap() takes the model the precision mode prepared (" + module().name() +
                       "), got another " + model->name());
    ddp_ = std::make_shared<dist::DistributedDataParallel>(std::move(model), process_group(), options_);
    return ddp_;
  }
  std::optional<dist::NoSync> no_sync() override {
    if (!ddp_) throw StateError("Strategy ddp: no_sync() before wrap(): the model is not wrapped yet");
    return ddp_->no_sync();
  }
  dist::DistributedDataParallel* ddp() const override { return ddp_.get(); }

 private:
  dist::DDPOptions options_;
  std::shared_ptr<dist::DistributedDataParallel> ddp_;
};

class ZeroStrategy final : public Strategy {
 public:
  ZeroStrategy(std::string name, std::shared_ptr<dist::ProcessGroup> group, dist::ZeroOptions options)
      : Strategy(std::move(name), std::move(group)), options_(std::move(options)) {
    dist::check_zero_options(options_);
  }

  std::string kind() const override { return "zero" + std::to_string(options_.stage); }
  std::optional<dist::NoSync> no_sync() override { return partition_->no_sync(); }
  dist::ZeroPartition* zero_partition() const override { return partition_.get(); }

  Tensor agree_on_overflow(const Tensor& found_inf) override {
    const Tensor agreed = found_inf.to(process_group()->device());  // offloaded: from the host
    partition_->agree_on_overflow(agreed);
    return agreed;
  }
  Tensor total_norm(const Tensor& local_norm) override { return partition_->total_norm(local_norm); }
  void after_step() override { partition_->gather_updated_parameters(); }
  void zero_grad() override { partition_->zero_grad(); }

  void add_state(Checkpoint& c, const TrainingPrecision& precision) const override {
    add_sharded_state(c, precision, module());
  }
  void restore_state(const Checkpoint& c, TrainingPrecision& precision) const override {
    restore_sharded_state(c, precision, module());
  }
  bool every_rank_writes() const override { return true; }
  void save(const std::string& path, const Checkpoint& c) const override { save_checkpoint(path, c, *process_group()); }

 protected:
  std::vector<Tensor> stepped_tensors(nn::Module& model) override {
    partition_ = std::make_unique<dist::ZeroPartition>(model, process_group(), options_);
    return partition_->pieces();
  }

 private:
  dist::ZeroOptions options_;
  std::unique_ptr<dist::ZeroPartition> partition_;
};

}  // namespace

const std::vector<std::string>& strategy_names() {
  static const std::vector<std::string> names = {"none", "ddp", "zero1", "zero2", "zero3", "fsdp"};
  return names;
}

std::vector<Tensor> Strategy::prepare(nn::Module& model) {
  if (module_) throw StateError("Strategy " + name_ + ": prepare() was called already; a strategy trains one model");
  std::vector<Tensor> stepped = stepped_tensors(model);
  module_ = &model;
  return stepped;
}

std::vector<Tensor> Strategy::stepped_tensors(nn::Module& model) { return model.parameters(); }

nn::Module& Strategy::module() const {
  if (!module_) throw StateError("Strategy " + name_ + ": no model yet (the precision mode prepares it)");
  return *module_;
}

void Strategy::add_state(Checkpoint& c, const TrainingPrecision& precision) const {
  c.model = module().state_dict();
  c.optimizer = precision.optimizer().state_dict();
  c.precision = precision.state_dict();
}

void Strategy::restore_state(const Checkpoint& c, TrainingPrecision& precision) const {
  module().load_state_dict(c.model);
  precision.optimizer().load_state_dict(c.optimizer);
  precision.load_state_dict(c.precision);
}

std::string strategy_kind(const StrategyOptions& options) {
  const auto& names = strategy_names();
  if (std::find(names.begin(), names.end(), options.name) == names.end()) {
    std::string all;
    for (const auto& n : names) all += (all.empty() ? "" : ", ") + n;
    throw ValueError("unknown strategy \"" + options.name + "\" (expected one of " + all + ")");
  }
  if (options.name != "fsdp") return options.name;
  const std::string& s = options.sharding_strategy;  // FSDP's spellings of ZeRO's stages
  if (s == "FULL_SHARD") return "zero3";
  if (s == "SHARD_GRAD_OP") return "zero2";
  if (s == "NO_SHARD") return "ddp";
  throw ValueError("unknown FSDP sharding strategy \"" + s + "\" (expected FULL_SHARD, SHARD_GRAD_OP or NO_SHARD)");
}

std::string strategy_display_name(const StrategyOptions& options) {
  return options.name == "fsdp" ? "fsdp " + options.sharding_strategy : options.name;
}

std::shared_ptr<Strategy> make_strategy(StrategyOptions options, std::shared_ptr<dist::ProcessGroup> group) {
  const std::string kind = strategy_kind(options), shown = strategy_display_name(options);
  if (kind == "none") return std::make_shared<NoStrategy>();
  if (!group) throw ValueError("strategy " + shown + " trains over a process group, and none was given");
  if (options.name == "fsdp") {  // FSDP's defaults, where the user set nothing
    const auto unset = [&](const char* knob) { return !options.zero_knobs_set.count(knob); };
    if (kind == "zero3") {
      if (unset("stage3_param_persistence_threshold")) options.zero.stage3_param_persistence_threshold = 0;
      if (unset("min_num_params") && options.zero.wrap_module_types.empty()) options.zero.min_num_params = kFsdpMinNumParams;
    }
  }
  if (kind == "ddp") return std::make_shared<DdpStrategy>(shown, std::move(group), options.ddp);
  options.zero.stage = kind.back() - '0';
  options.zero.overlap_comm = options.overlap_comm.value_or(options.zero.stage == 3);
  return std::make_shared<ZeroStrategy>(shown, std::move(group), std::move(options.zero));
}

std::shared_ptr<Strategy> make_zero_strategy(std::shared_ptr<dist::ProcessGroup> group, dist::ZeroOptions options) {
  if (!group) throw ValueError("ZeRO needs a process group, and none was given");
  const std::string name = "zero" + std::to_string(options.stage);
  return std::make_shared<ZeroStrategy>(name, std::move(group), std::move(options));
}

std::shared_ptr<Strategy> strategy_of(const std::shared_ptr<nn::UnaryModule>& model, const TrainingPrecision& precision) {
  const std::shared_ptr<Strategy>& own = precision.strategy();
  if (own->kind() == "ddp") {
    if (own->ddp() != model.get())
      throw ValueError("the precision mode's strategy is " + own->name() +
                       ", but the model trained is not its wrapper: train strategy->wrap(model)");
    return own;
  }
  if (own->kind() != "none") return own;
  if (auto ddp = std::dynamic_pointer_cast<dist::DistributedDataParallel>(model)) {
    auto adopted = std::make_shared<DdpStrategy>(ddp);
    adopted->prepare(*ddp->module());
    return adopted;
  }
  auto none = std::make_shared<NoStrategy>();
  none->prepare(*model);
  return none;
}

}  // namespace ember::train
