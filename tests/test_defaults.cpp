// The defaults of every optimizer, scheduler, layer, scaler, data-parallel and data option against
// the value PyTorch (or, where PyTorch has none, the library ember follows) documents, one row
// each: what a user who leaves an option out expects. The sources: the PyTorch 2.x reference pages of
// each class (torch.optim.*, torch.optim.lr_scheduler.*, torch.nn.*, torch.amp.GradScaler,
// torch.nn.parallel.DistributedDataParallel, torch.utils.data.*), apex.optimizers.FusedLAMB and
// DeepSpeed's ZeRO and fp16 configuration pages.
#include <string>
#include <utility>

#include "data/dataloader.h"
#include "data/distributed_sampler.h"
#include "dist/distributed_data_parallel.h"
#include "dist/zero_partition.h"
#include "nn/layers/attention.h"
#include "nn/layers/conv.h"
#include "nn/layers/linear.h"
#include "nn/layers/normalization.h"
#include "optim/adam.h"
#include "optim/amp/grad_scaler.h"
#include "optim/amp/loss_scaler.h"
#include "optim/lr_scheduler.h"
#include "optim/sgd.h"
#include "tests/helpers.h"

using namespace ember;

namespace {

struct Row {
  Row(std::string what, double ember, double documented) : what(std::move(what)), ember(ember), documented(documented) {}
  Row(std::string what, bool ember, bool documented) : Row(std::move(what), ember ? 1.0 : 0.0, documented ? 1.0 : 0.0) {}
  std::string what;
  double ember, documented;
};

void check_rows(const std::vector<Row>& rows) {
  for (const Row& r : rows) CHECK_MESSAGE(r.ember == r.documented, r.what, ": ember ", r.ember, ", documented ", r.documented);
}

// The lr of a one-parameter SGD (lr 1) after `steps` steps of the scheduler `make` builds on it.
template <class F>
double lr_after(int steps, F make) {
  optim::SGD opt({ones({1}).requires_grad_()}, {.lr = 1.0});
  auto schedule = make(opt);
  for (int i = 0; i < steps; ++i) schedule.step();
  return opt.param_groups()[0].get("lr");
}

}  // namespace

TEST_SUITE("cpu") {

TEST_CASE("defaults: optimizers and schedulers") {
  const optim::SGDOptions sgd;
  const optim::AdamOptions adam;
  const optim::AdamWOptions adamw;
  const optim::LAMBOptions lamb;
  const optim::OneCycleOptions one_cycle;
  check_rows({
      {"SGD lr", sgd.lr, 1e-3},
      {"SGD momentum", sgd.momentum, 0},
      {"SGD dampening", sgd.dampening, 0},
      {"SGD weight_decay", sgd.weight_decay, 0},
      {"SGD nesterov", sgd.nesterov, false},
      {"Adam lr", adam.lr, 1e-3},
      {"Adam beta1", adam.beta1, 0.9},
      {"Adam beta2", adam.beta2, 0.999},
      {"Adam eps", adam.eps, 1e-8},
      {"Adam weight_decay", adam.weight_decay, 0},
      {"Adam amsgrad", adam.amsgrad, false},
      {"AdamW lr", adamw.lr, 1e-3},
      {"AdamW beta1", adamw.beta1, 0.9},
      {"AdamW beta2", adamw.beta2, 0.999},
      {"AdamW eps", adamw.eps, 1e-8},
      {"AdamW weight_decay", adamw.weight_decay, 1e-2},
      {"AdamW amsgrad", adamw.amsgrad, false},
      {"LAMB (apex FusedLAMB) lr", lamb.lr, 1e-3},
      {"LAMB beta1", lamb.beta1, 0.9},
      {"LAMB beta2", lamb.beta2, 0.999},
      {"LAMB eps", lamb.eps, 1e-6},
      {"LAMB weight_decay", lamb.weight_decay, 1e-2},
      {"OneCycleLR pct_start", one_cycle.pct_start, 0.3},
      {"OneCycleLR anneal_strategy cos", one_cycle.cos_anneal, true},
      {"OneCycleLR cycle_momentum", one_cycle.cycle_momentum, true},
      {"OneCycleLR base_momentum", one_cycle.base_momentum, 0.85},
      {"OneCycleLR max_momentum", one_cycle.max_momentum, 0.95},
      {"OneCycleLR div_factor", one_cycle.div_factor, 25},
      {"OneCycleLR final_div_factor", one_cycle.final_div_factor, 1e4},
      {"OneCycleLR three_phase", one_cycle.three_phase, false},
      // Schedulers' defaults, seen in what they do to an lr of 1.
      {"StepLR gamma", lr_after(1, [](auto& o) { return optim::StepLR(o, 1); }), 0.1},
      {"MultiStepLR gamma", lr_after(1, [](auto& o) { return optim::MultiStepLR(o, {1}); }), 0.1},
      {"CosineAnnealingLR eta_min", lr_after(4, [](auto& o) { return optim::CosineAnnealingLR(o, 4); }), 0},
      {"LinearLR start_factor", lr_after(0, [](auto& o) { return optim::LinearLR(o); }), 1.0 / 3},
      {"LinearLR end_factor after total_iters 5", lr_after(5, [](auto& o) { return optim::LinearLR(o); }), 1.0},
      {"LinearLR not there after 4", lr_after(4, [](auto& o) { return optim::LinearLR(o); }) < 1.0, true},
  });
  // What a user who writes only the lr gets: AdamW keeps its own decay.
  optim::AdamW opt({ones({2}).requires_grad_()}, {.lr = 3e-4});
  CHECK(opt.param_groups()[0].get("weight_decay") == 1e-2);
}

TEST_CASE("defaults: layers") {
  const nn::Linear linear(2, 3);
  const nn::Conv2d conv(2, 3, 3);
  const nn::BatchNorm2d bn(4);
  const nn::LayerNorm ln(4);
  const nn::Dropout dropout;
  const nn::GELU gelu;
  const nn::Flatten flatten;
  const nn::MaxPool2d max_pool(3);
  const nn::AvgPool2d avg_pool(3);
  const nn::MultiheadAttention attention(8, 2);
  check_rows({
      {"Linear bias", linear.bias.defined(), true},
      {"Conv2d stride", static_cast<double>(conv.stride), 1},
      {"Conv2d padding", static_cast<double>(conv.padding), 0},
      {"Conv2d dilation", static_cast<double>(conv.dilation), 1},
      {"Conv2d groups", static_cast<double>(conv.groups), 1},
      {"Conv2d bias", conv.bias.defined(), true},
      {"BatchNorm2d eps", bn.eps, 1e-5},
      {"BatchNorm2d momentum", bn.momentum, 0.1},
      {"BatchNorm2d affine", bn.weight.defined() && bn.bias.defined(), true},
      {"BatchNorm2d track_running_stats", bn.running_mean.defined(), true},
      {"LayerNorm eps", ln.eps, 1e-5},
      {"LayerNorm elementwise_affine", ln.weight.defined() && ln.bias.defined(), true},
      {"Dropout p", dropout.p, 0.5},
      {"GELU approximate none", gelu.tanh_approximation, false},
      {"Flatten start_dim", static_cast<double>(flatten.start_dim), 1},
      {"Flatten end_dim", static_cast<double>(flatten.end_dim), -1},
      {"MaxPool2d stride = kernel_size", static_cast<double>(max_pool.stride), 3},
      {"MaxPool2d padding", static_cast<double>(max_pool.padding), 0},
      {"AvgPool2d stride = kernel_size", static_cast<double>(avg_pool.stride), 3},
      {"AvgPool2d padding", static_cast<double>(avg_pool.padding), 0},
      {"MultiheadAttention bias", attention.in_proj_bias.defined(), true},
  });
}

TEST_CASE("defaults: loss scalers, data parallelism and data") {
  const amp::GradScalerOptions scaler;
  const amp::DynamicLossScalerOptions dynamic;
  const dist::DDPOptions ddp;
  const dist::ZeroOptions zero;
  const data::DataLoaderOptions loader;
  const data::DistributedSamplerOptions sampler;
  check_rows({
      {"GradScaler init_scale", scaler.init_scale, 65536},
      {"GradScaler growth_factor", scaler.growth_factor, 2},
      {"GradScaler backoff_factor", scaler.backoff_factor, 0.5},
      {"GradScaler growth_interval", static_cast<double>(scaler.growth_interval), 2000},
      {"GradScaler enabled", scaler.enabled, true},
      {"DeepSpeed fp16 loss_scale (0: dynamic)", dynamic.loss_scale, 0},
      {"DeepSpeed fp16 initial_scale_power", static_cast<double>(dynamic.initial_scale_power), 16},
      {"DeepSpeed fp16 loss_scale_window", static_cast<double>(dynamic.loss_scale_window), 1000},
      {"DeepSpeed fp16 hysteresis", static_cast<double>(dynamic.hysteresis), 2},
      {"DeepSpeed fp16 consecutive_hysteresis", dynamic.consecutive_hysteresis, false},
      {"DeepSpeed fp16 min_loss_scale", dynamic.min_loss_scale, 1},
      {"DDP bucket_cap_mb", ddp.bucket_cap_mb, 25},
      {"DDP first bucket (1 MiB)", ddp.first_bucket_mb, 1},
      {"DDP find_unused_parameters", ddp.find_unused_parameters, false},
      {"DDP broadcast_buffers", ddp.broadcast_buffers, true},
      {"ZeRO reduce_bucket_size", static_cast<double>(zero.reduce_bucket_size), 5e8},
      {"ZeRO allgather_bucket_size", static_cast<double>(zero.allgather_bucket_size), 5e8},
      {"ZeRO overlap_comm", zero.overlap_comm, false},
      {"ZeRO contiguous_gradients", zero.contiguous_gradients, true},
      {"ZeRO reduce_scatter", zero.reduce_scatter, true},
      {"ZeRO stage3_prefetch_bucket_size", static_cast<double>(zero.stage3_prefetch_bucket_size), 5e7},
      {"ZeRO stage3_param_persistence_threshold", static_cast<double>(zero.stage3_param_persistence_threshold), 1e5},
      {"DataLoader batch_size", static_cast<double>(loader.batch_size), 1},
      {"DataLoader shuffle", loader.shuffle, false},
      {"DataLoader drop_last", loader.drop_last, false},
      {"DataLoader num_workers", static_cast<double>(loader.num_workers), 0},
      {"DataLoader prefetch_factor", static_cast<double>(loader.prefetch_factor), 2},
      {"DataLoader pin_memory", loader.pin_memory, false},
      {"DistributedSampler shuffle", sampler.shuffle, true},
      {"DistributedSampler seed", static_cast<double>(sampler.seed), 0},
      {"DistributedSampler drop_last", sampler.drop_last, false},
  });
}

}  // TEST_SUITE("cpu")
