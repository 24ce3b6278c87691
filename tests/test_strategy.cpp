// train/strategy.h: strategies by name (FSDP's sharding strategies resolved to stages, with FSDP's
// defaults where nothing was set), what each one wraps and steps, and the misuse it refuses by name.
// One in-process Gloo rank: the training numbers of each strategy are test_ddp's and test_zero's.
#include <chrono>
#include <memory>

#include "dist/gloo_process_group.h"
#include "dist/tcp_store.h"
#include "nn/layers/linear.h"
#include "optim/sgd.h"
#include "tests/helpers.h"
#include "train/precision.h"
#include "train/strategy.h"

using namespace ember;
using namespace ember::train;
using namespace ember_test;

namespace {

std::shared_ptr<dist::ProcessGroup> group_of_one() {
  auto store = std::make_shared<dist::TCPStore>("127.0.0.1", 0, dist::TCPStoreOptions{true, std::chrono::milliseconds(5000)});
  dist::GlooOptions gloo;
  gloo.master_addr = "127.0.0.1";
  return dist::make_gloo_process_group(store, 0, 1, gloo);
}

StrategyOptions named(const std::string& name, const std::string& sharding = "FULL_SHARD") {
  StrategyOptions o;
  o.name = name;
  o.sharding_strategy = sharding;
  return o;
}

std::unique_ptr<optim::Optimizer> sgd(std::vector<Tensor> params) {
  return std::make_unique<optim::SGD>(std::move(params), optim::SGDOptions{.lr = 0.1});
}

// A precision mode in fp32 under `strategy`, over `model`.
std::shared_ptr<TrainingPrecision> fp32_under(std::shared_ptr<Strategy> strategy, nn::Module& model) {
  PrecisionOptions po;
  po.strategy = std::move(strategy);
  return std::make_shared<TrainingPrecision>(po, model, sgd);
}

}  // namespace

TEST_SUITE("cpu") {

TEST_CASE("Strategies by name: FSDP's sharding strategies are ZeRO's stages and DDP; unknown names are named") {
  CHECK(strategy_kind(named("none")) == "none");
  CHECK(strategy_kind(named("zero2")) == "zero2");
  CHECK(strategy_kind(named("fsdp")) == "zero3");
  CHECK(strategy_kind(named("fsdp", "SHARD_GRAD_OP")) == "zero2");
  CHECK(strategy_kind(named("fsdp", "NO_SHARD")) == "ddp");
  CHECK(strategy_display_name(named("fsdp", "SHARD_GRAD_OP")) == "fsdp SHARD_GRAD_OP");
  CHECK(strategy_display_name(named("zero1")) == "zero1");
  expect_error<ValueError>("unknown name", [] { (void)strategy_kind(named("zero4")); },
                           {"unknown strategy \"zero4\"", "none, ddp, zero1, zero2, zero3, fsdp"});
  expect_error<ValueError>("unknown sharding", [] { (void)strategy_kind(named("fsdp", "HYBRID_SHARD")); },
                           {"\"HYBRID_SHARD\"", "FULL_SHARD, SHARD_GRAD_OP or NO_SHARD"});
  expect_error<ValueError>("no group", [] { (void)make_strategy(named("ddp"), nullptr); },
                           {"strategy ddp trains over a process group"});
  const auto none = make_strategy(named("none"), nullptr);
  CHECK(none->kind() == "none");
  CHECK(none->process_group() == nullptr);
}

TEST_CASE("make_strategy: FSDP's defaults where the user set nothing, DeepSpeed's overlap default, knobs checked" *
          doctest::skip(!dist::has_gloo())) {
  const auto group = group_of_one();
  const auto zero_options_of = [&](StrategyOptions o) {
    auto model = std::make_shared<nn::Linear>(4, 3);
    auto strategy = make_strategy(std::move(o), group);
    (void)fp32_under(strategy, *model);
    REQUIRE(strategy->zero_partition() != nullptr);
    return strategy->zero_partition()->options();
  };
  dist::ZeroOptions z = zero_options_of(named("fsdp"));
  CHECK(z.stage == 3);
  CHECK(z.stage3_param_persistence_threshold == 0);
  CHECK(z.min_num_params == 10'000'000);
  CHECK(z.overlap_comm);  // on at stage 3
  // What the user set stays: a size threshold, a persistence threshold, wrapped module types.
  StrategyOptions set = named("fsdp");
  set.zero.min_num_params = 5;
  set.zero.stage3_param_persistence_threshold = 7;
  set.zero_knobs_set = {"min_num_params", "stage3_param_persistence_threshold"};
  z = zero_options_of(set);
  CHECK(z.min_num_params == 5);
  CHECK(z.stage3_param_persistence_threshold == 7);
  StrategyOptions typed = named("fsdp");
  typed.zero.wrap_module_types = {"Linear"};
  CHECK(zero_options_of(typed).min_num_params == 0);
  // zero<N>: the stage from the name, DeepSpeed's defaults otherwise.
  z = zero_options_of(named("zero2"));
  CHECK(z.stage == 2);
  CHECK_FALSE(z.overlap_comm);
  CHECK(z.stage3_param_persistence_threshold == dist::ZeroOptions{}.stage3_param_persistence_threshold);
  StrategyOptions bad = named("zero1");
  bad.zero.reduce_bucket_size = 0;
  expect_error<ValueError>("a bad knob", [&] { (void)make_strategy(bad, group); }, {"reduce_bucket_size must be >= 1, got 0"});
}

TEST_CASE("A strategy trains one model: DDP's wrapper, the Runner's view of it, and misuse named" *
          doctest::skip(!dist::has_gloo())) {
  const auto group = group_of_one();
  auto model = std::make_shared<nn::Linear>(4, 3);
  const auto ddp = make_strategy(named("fsdp", "NO_SHARD"), group);
  CHECK(ddp->name() == "fsdp NO_SHARD");
  CHECK(ddp->kind() == "ddp");
  const auto precision = fp32_under(ddp, *model);
  CHECK(precision->strategy() == ddp);
  CHECK(precision->zero() == nullptr);
  CHECK(&ddp->module() == model.get());
  expect_error<StateError>("no_sync before wrap", [&] { (void)ddp->no_sync(); }, {"before wrap()"});
  expect_error<ValueError>("the Runner given the bare model", [&] { (void)strategy_of(model, *precision); },
                           {"strategy is fsdp NO_SHARD", "not its wrapper"});
  auto other = std::make_shared<nn::Linear>(4, 3);
  expect_error<ValueError>("wrapping another model", [&] { (void)ddp->wrap(other); }, {"takes the model the precision mode prepared"});
  const auto wrapped = ddp->wrap(model);
  CHECK(ddp->ddp() == wrapped.get());
  CHECK(strategy_of(wrapped, *precision) == ddp);
  CHECK(ddp->no_sync().has_value());
  expect_error<StateError>("wrapping twice", [&] { (void)ddp->wrap(model); }, {"wrap() was called already"});
  expect_error<StateError>("a second precision mode", [&] { (void)fp32_under(ddp, *model); },
                           {"prepare() was called already", "a strategy trains one model"});
  // A DDP built outside a strategy is adopted: its module is what checkpoints hold.
  auto bare = std::make_shared<nn::Linear>(4, 3);
  const auto plain = fp32_under(nullptr, *bare);
  CHECK(plain->strategy()->kind() == "none");
  auto outside = std::make_shared<dist::DistributedDataParallel>(bare, group);
  const auto adopted = strategy_of(outside, *plain);
  CHECK(adopted->kind() == "ddp");
  CHECK(&adopted->module() == bare.get());
  CHECK(adopted->no_sync().has_value());
  // Both ways to ask for ZeRO at once are refused.
  PrecisionOptions both;
  both.strategy = make_strategy(named("zero1"), group);
  both.zero_group = group;
  expect_error<ValueError>("strategy and zero_group", [&] { TrainingPrecision(both, *bare, sgd); },
                           {"strategy and zero_group both set"});
}

}  // TEST_SUITE
