// ember's training program: one of the model zoo's networks on Fashion-MNIST, CIFAR-10, an
// ImageNet-style folder of JPEG/PNG files (`--dataset imagefolder --data DIR`: DIR/train and DIR/val) or
// WebDataset tar shards (`--dataset webdataset --data PATTERN --val-data PATTERN`), top-1 and top-5 on
// the validation images, with the Runner's MMEngine-style log, checkpoints and exact resume.
// `train --help` lists every flag.
// `--strategy ddp|zero1|zero2|zero3` trains data-parallel on every rank of a job (./ember launch -n N,
// torchrun, srun, mpirun; alone, a world of one), --batch-size images per rank; the ZeRO stages
// shard optimizer state, gradients and parameters (dist/zero_partition.h), with DeepSpeed's knobs as
// flags, and save checkpoints that resume on any number of ranks, or in one process.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <limits>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <type_traits>

#include "data/dataset.h"
#include "data/distributed_sampler.h"
#include "data/image_folder.h"
#include "data/webdataset.h"
#include "dist/init.h"
#include "dist/zero_partition.h"
#include "flags.h"
#include "nn/checkpoint.h"
#include "data/transforms.h"
#include "optim/adam.h"
#include "optim/lr_scheduler.h"
#include "optim/sgd.h"
#include "tensor/decimal.h"
#include "tensor/nvtx.h"
#include "tensor/ops.h"
#include "tensor/printable.h"
#include "tensor/storage.h"
#include "train/deepspeed_config.h"
#include "train/model_zoo.h"
#include "train/precision.h"
#include "train/runner.h"
#include "train/strategy.h"

using namespace ember;
using namespace ember_examples;  // the flags' checks (flags.h)

namespace {

struct Flags {
  std::string model = "cnn";
  std::string dataset = "fashion-mnist";
  std::string data_dir;  // "": the data set's usual place
  std::string val_data;  // --dataset webdataset: the validation shards
  int64_t num_classes = 0;  // --dataset webdataset: the classes the labels index (0: from the labels)
  int64_t epochs = 3;
  int64_t batch_size = 128;
  double lr = 0;  // 0: the optimizer's default below
  std::string optimizer = "sgd";
  double momentum = 0.9;
  double weight_decay = 5e-4;
  std::string scheduler = "cosine";
  int64_t warmup_iters = 0;
  double clip_grad = 0;
  std::string device;  // "": cuda when a GPU is present
  int threads = 0;
  int num_workers = 2;
  uint64_t seed = 0;
  std::string work_dir;  // "": work_dirs/<model>_<dataset>
  std::string resume;
  int64_t log_interval = 50;
  int64_t save_interval = 1;
  int64_t keep_checkpoints = 3;
  int64_t train_samples = 0;
  int64_t val_samples = 0;
  int64_t max_iters = 0;
  bool augment = false;
  int64_t image_size = 224;      // --dataset imagefolder, webdataset: the crops' side
  int64_t resize = 0;            // and evaluation's shorter side before the center crop (0: size * 256 / 224)
  bool skip_bad_images = false;  // replace a bad file by the next good one instead of stopping
  bool deterministic = false;
  bool no_locate_nonfinite = false;
  bool no_save_best = false;
  bool tensorboard = false;
  bool nvtx = false;
  bool compile = false;
  int64_t accumulate = 1;  // batches per optimizer step
  // --activation-checkpointing [TYPE...]: the module types whose calls are recomputed in backward
  // (none given: the model's blocks).
  bool activation_checkpointing = false;
  std::vector<std::string> checkpoint_modules;
  int64_t compile_warmup = train::CompileOptions{}.warmup_steps;
  std::string precision = "fp32";
  // --strategy, --sharding-strategy and the ZeRO knobs (DeepSpeed's zero_optimization, by its names).
  train::StrategyOptions strategy;
  double dist_timeout = 600;  // seconds: each collective's bound (PyTorch's default, 10 minutes)
  std::string deepspeed_config;      // a DeepSpeed JSON config mapped onto the flags above
  double static_loss_scale = 0;      // its fp16.loss_scale: > 0 a fixed scale (naive_fp16)
  std::optional<int64_t> ds_train_batch_size;  // its train_batch_size, checked once the ranks are known
  // Loss-scaler knobs (amp_fp16: GradScaler's; naive_fp16: DynamicLossScaler's), defaults as in
  // PyTorch and Colossal-AI / DeepSpeed (docs/reference.md#gradscaler, #master-weights and
  // #dynamic-loss-scaling).
  double init_scale = 65536.0;
  double growth_factor = 2.0;
  double backoff_factor = 0.5;
  int64_t growth_interval = 2000;
  int64_t loss_scale_window = 1000;
  int64_t hysteresis = 2;
  double min_loss_scale = 1.0;
};

// Per-channel statistics of each training set, for normalize() (the values torchvision users
// compute over the training images).
struct DatasetSpec {
  train::ImageShape shape;
  std::vector<float> mean, std;
  std::string default_dir;
};

DatasetSpec dataset_spec(const std::string& name) {
  if (name == "fashion-mnist") return {{1, 28, 10}, {0.2860f}, {0.3530f}, "/usr/share/datasets/fashion-mnist"};
  // The image data sets: the shape comes from the files (load_image_sets).
  if (name == "imagefolder" || name == "webdataset") return {{3, 0, 0}, {}, {}, ""};
  return {{3, 32, 10}, {0.4914f, 0.4822f, 0.4465f}, {0.2470f, 0.2435f, 0.2616f}, ""};  // cifar10
}

// --lr, or the optimizer's default when it is 0.
double effective_lr(const Flags& f) { return f.lr > 0 ? f.lr : f.optimizer == "sgd" ? 0.1 : 1e-3; }

std::unique_ptr<optim::Optimizer> make_optimizer(const Flags& f, std::vector<Tensor> params) {
  const double lr = effective_lr(f);
  if (f.optimizer == "sgd") {
    optim::SGDOptions o;
    o.lr = lr;
    o.momentum = f.momentum;
    o.weight_decay = f.weight_decay;
    return std::make_unique<optim::SGD>(std::move(params), o);
  }
  if (f.optimizer == "adamw") {
    optim::AdamWOptions o;
    o.lr = lr;
    o.weight_decay = f.weight_decay;
    return std::make_unique<optim::AdamW>(std::move(params), o);
  }
  optim::LAMBOptions o;
  o.lr = lr;
  o.weight_decay = f.weight_decay;
  return std::make_unique<optim::LAMB>(std::move(params), o);
}

// A value from the DeepSpeed config for `flag`: taken, unless the flag was given with another value.
// The flag's own check (its CLI11 validator) applies to it, so the file cannot set what the flag refuses.
template <class T>
void take(CLI::App& app, const char* flag, T& field, const std::optional<T>& value, const std::string& key) {
  if (!value) return;
  // As a flag's value would read (numbers in the fewest digits that read back as them).
  const auto text_of = [](const T& v) {
    if constexpr (std::is_floating_point_v<T>) {
      return decimal_text(v);
    } else {
      std::ostringstream text;
      text << std::boolalpha << v;
      return text.str();
    }
  };
  const std::string configured = text_of(*value);
  if (app.count(flag) && !(field == *value))
    throw ValueError(std::string(flag) + " " + text_of(field) + " disagrees with the DeepSpeed config's " + key + " " +
                     configured);
  CLI::Option* option = app.get_option(flag);
  for (int i = 0;; ++i) {
    CLI::Validator* check = nullptr;
    try {
      check = option->get_validator(i);
    } catch (const CLI::OptionNotFound&) {  // no more checks
      break;
    }
    std::string text = configured;
    if (const std::string problem = (*check)(text); !problem.empty())
      throw ValueError("the DeepSpeed config's " + key + " " + configured + " is refused, as " + flag + " would be: " +
                       problem);
  }
  field = *value;
}

// Maps a DeepSpeed JSON config onto the flags (train/deepspeed_config.h); returns its warnings.
std::vector<std::string> apply_deepspeed_config(CLI::App& app, Flags& f) {
  train::DeepSpeedConfig ds = train::read_deepspeed_config(f.deepspeed_config);
  if (ds.zero_stage) {
    const std::string strategy = *ds.zero_stage == 0 ? "ddp" : "zero" + std::to_string(*ds.zero_stage);
    take(app, "--strategy", f.strategy.name, std::optional(strategy), "zero_optimization.stage");
  }
  const std::string kind = train::strategy_kind(f.strategy);
  for (const auto& knob : ds.zero_knobs)
    if (!kind.starts_with("zero") || (knob.starts_with("stage3_") && kind != "zero3"))
      ds.warnings.push_back(f.deepspeed_config + ": zero_optimization." + knob + " has no effect with --strategy " + f.strategy.name);
  // The knobs the file set; flags given on the command line must agree.
  const auto knob = [&](const char* key, const char* flag, auto& field, const auto& value) {
    if (ds.zero_knobs.count(key)) take(app, flag, field, std::optional(value), std::string("zero_optimization.") + key);
  };
  knob("reduce_bucket_size", "--reduce-bucket-size", f.strategy.zero.reduce_bucket_size, ds.zero.reduce_bucket_size);
  knob("allgather_bucket_size", "--allgather-bucket-size", f.strategy.zero.allgather_bucket_size, ds.zero.allgather_bucket_size);
  knob("contiguous_gradients", "--contiguous-gradients", f.strategy.zero.contiguous_gradients, ds.zero.contiguous_gradients);
  knob("reduce_scatter", "--reduce-scatter", f.strategy.zero.reduce_scatter, ds.zero.reduce_scatter);
  knob("offload_optimizer", "--offload-optimizer", f.strategy.zero.offload_optimizer, ds.zero.offload_optimizer);
  knob("offload_param", "--offload-param", f.strategy.zero.offload_param, ds.zero.offload_param);
  knob("stage3_prefetch_bucket_size", "--stage3-prefetch-bucket-size", f.strategy.zero.stage3_prefetch_bucket_size,
       ds.zero.stage3_prefetch_bucket_size);
  knob("stage3_param_persistence_threshold", "--stage3-param-persistence-threshold",
       f.strategy.zero.stage3_param_persistence_threshold, ds.zero.stage3_param_persistence_threshold);
  if (ds.zero_knobs.count("overlap_comm")) {
    if (app.count("--overlap-comm") && f.strategy.overlap_comm != ds.zero.overlap_comm)
      throw ValueError("--overlap-comm disagrees with the DeepSpeed config's zero_optimization.overlap_comm");
    f.strategy.overlap_comm = ds.zero.overlap_comm;
  }
  if (ds.precision) {
    take(app, "--precision", f.precision, std::optional<std::string>(train::precision_name(*ds.precision)),
         *ds.precision == train::Precision::naive_fp16 ? "fp16.enabled" : "bf16.enabled");
    if (*ds.precision == train::Precision::naive_fp16) {
      take(app, "--init-scale", f.init_scale, std::optional(std::ldexp(1.0, ds.loss_scaler.initial_scale_power)),
           "fp16.initial_scale_power");
      take(app, "--loss-scale-window", f.loss_scale_window, std::optional(ds.loss_scaler.loss_scale_window),
           "fp16.loss_scale_window");
      take(app, "--hysteresis", f.hysteresis, std::optional(ds.loss_scaler.hysteresis), "fp16.hysteresis");
      take(app, "--min-loss-scale", f.min_loss_scale, std::optional(ds.loss_scaler.min_loss_scale), "fp16.min_loss_scale");
      f.static_loss_scale = ds.loss_scaler.loss_scale;
    }
  }
  take(app, "--clip-grad", f.clip_grad, ds.gradient_clipping, "gradient_clipping");
  take(app, "--batch-size", f.batch_size, ds.micro_batch_size, "train_micro_batch_size_per_gpu");
  take(app, "--accumulate", f.accumulate, ds.gradient_accumulation_steps, "gradient_accumulation_steps");
  take(app, "--optimizer", f.optimizer, ds.optimizer, "optimizer.type");
  take(app, "--lr", f.lr, ds.lr, "optimizer.params.lr");
  take(app, "--weight-decay", f.weight_decay, ds.weight_decay, "optimizer.params.weight_decay");
  take(app, "--momentum", f.momentum, ds.momentum, "optimizer.params.momentum");
  f.ds_train_batch_size = ds.train_batch_size;
  return ds.warnings;
}

// DeepSpeed's train_batch_size = micro batch x accumulation steps x ranks.
void check_deepspeed_batch(const Flags& f, int world) {
  const int64_t global = f.batch_size * f.accumulate * world;
  if (f.ds_train_batch_size && *f.ds_train_batch_size != global)
    throw ValueError(f.deepspeed_config + ": train_batch_size " + std::to_string(*f.ds_train_batch_size) +
                     " is not the batch per rank " + std::to_string(f.batch_size) + " x " + std::to_string(f.accumulate) +
                     " accumulation steps x " + std::to_string(world) + " ranks = " + std::to_string(global));
}

// Stepped once per optimizer step: an optional linear warmup from lr/1000 (MMEngine's usual
// start_factor), then cosine to 0, multistep (x0.1 at 50% and 75%), or constant.
std::shared_ptr<optim::LRScheduler> make_scheduler(const Flags& f, optim::Optimizer& opt, int64_t total_iters) {
  const int64_t warmup = std::min(f.warmup_iters, total_iters);
  const int64_t rest = std::max<int64_t>(total_iters - warmup, 1);
  std::shared_ptr<optim::LRScheduler> main;
  if (f.scheduler == "cosine") main = std::make_shared<optim::CosineAnnealingLR>(opt, rest);
  else if (f.scheduler == "multistep")
    main = std::make_shared<optim::MultiStepLR>(opt, std::vector<int64_t>{rest / 2, rest * 3 / 4});
  if (warmup == 0) return main;
  auto ramp = std::make_shared<optim::LinearLR>(opt, 1e-3, 1.0, warmup);
  if (!main) return ramp;  // constant after the warmup
  return std::make_shared<optim::SequentialLR>(opt, std::vector<std::shared_ptr<optim::LRScheduler>>{ramp, main},
                                               std::vector<int64_t>{warmup});
}

// The training or test set of fashion-mnist or cifar10, cut to its first `samples` images (0: all) as
// `flag` asks.
std::shared_ptr<data::TensorDataset> load_dataset(const std::string& name, const std::string& dir, bool train,
                                                  int64_t samples, const char* flag) {
  std::shared_ptr<data::TensorDataset> d;
  if (name == "fashion-mnist") d = std::make_shared<data::FashionMNIST>(dir, train);
  else d = std::make_shared<data::CIFAR10>(dir, train);
  if (samples > d->size())
    throw ValueError(std::string(flag) + " " + std::to_string(samples) + " is more than the " + std::to_string(d->size()) +
                     " images of " + name + "'s " + (train ? "training" : "test") + " set");
  d->truncate(samples);
  return d;
}

// --dataset imagefolder (DIR/train and DIR/val) or webdataset (--data and --val-data shard patterns):
// torchvision's ImageNet pipelines (RandomResizedCrop and flip for training, Resize and CenterCrop for
// validation), normalised with ImageNet's statistics. A WebDataset orders its own samples (shards
// shuffled per epoch, split over the ranks): its samplers replace the loaders'.
struct ImageSets {
  std::shared_ptr<const data::Dataset> train, val;
  data::Sampler train_sampler, val_sampler;  // empty for an image folder
  train::ImageShape shape;
};

ImageSets load_image_sets(const Flags& f, int rank, int world) {
  data::ImageTransformOptions t;
  t.size = f.image_size;
  t.resize = f.resize > 0 ? f.resize : f.image_size * 256 / 224;
  if (t.resize < t.size)
    throw ValueError("--resize " + std::to_string(t.resize) + " is less than --image-size " + std::to_string(t.size) +
                     ": validation resizes the shorter side to --resize, then crops --image-size from it");
  ImageSets d;
  if (f.dataset == "imagefolder") {
    data::ImageFolderOptions o{t, f.skip_bad_images};
    auto train_set = std::make_shared<data::ImageFolder>(f.data_dir + "/train", o);
    o.transform.train = false;
    auto val_set = std::make_shared<data::ImageFolder>(f.data_dir + "/val", o);
    if (val_set->classes() != train_set->classes()) {
      // Name the folders one side lacks (a few of them): that is what the user has to fix.
      const auto missing_from = [](const std::vector<std::string>& names, const std::vector<std::string>& other) {
        std::string listed;
        int shown = 0;
        for (const std::string& name : names)
          if (std::find(other.begin(), other.end(), name) == other.end() && shown++ < 5)
            listed += (listed.empty() ? "" : ", ") + printable(name, 40);
        return listed.empty() ? std::string("none") : listed + (shown > 5 ? ", ..." : "");
      };
      throw ValueError("--data " + f.data_dir + ": val/ and train/ must hold the same class folders; only in val/: " +
                       missing_from(val_set->classes(), train_set->classes()) +
                       "; only in train/: " + missing_from(train_set->classes(), val_set->classes()));
    }
    d.shape = {3, f.image_size, static_cast<int64_t>(train_set->classes().size())};
    d.train = train_set;
    d.val = val_set;
    return d;
  }
  if (f.val_data.empty()) throw ValueError("--val-data is required for webdataset: the validation shards");
  data::WebDatasetOptions o{t, f.skip_bad_images, true, rank, world, f.num_classes};
  auto train_set = std::make_shared<data::WebDataset>(f.data_dir, o);
  o.transform.train = false;
  o.shuffle_shards = false;
  auto val_set = std::make_shared<data::WebDataset>(f.val_data, o);
  if (val_set->num_classes() > train_set->num_classes())
    throw ValueError("--val-data " + f.val_data + " has label " + std::to_string(val_set->num_classes() - 1) +
                     ", beyond the " + std::to_string(train_set->num_classes()) + " classes of --data " + f.data_dir);
  d.shape = {3, f.image_size, train_set->num_classes()};
  d.train_sampler = train_set->sampler(f.seed);
  d.val_sampler = val_set->sampler(0);
  d.train = train_set;
  d.val = val_set;
  return d;
}

// Caps a thread count at the machine's cores, saying so: more threads than cores only slow a run.
int capped_threads(const char* flag, int requested) {
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  if (requested <= cores) return requested;
  std::cerr << "train: warning: " << flag << " " << requested << " is more than this machine's " << cores
            << " cores; using " << cores << "\n";
  return cores;
}

// The iterations the schedule spans: epochs x iterations per epoch (--max-iters only stops the run
// early, and a resumed run goes on along the same schedule). Beyond 2^53 iterations that is only
// legal beside --max-iters, and the schedule is cut to 2^53: constant over any run that ends.
int64_t schedule_iterations(int64_t epochs, int64_t per_epoch, int64_t max_iters) {
  int64_t total = 0;
  if (!__builtin_mul_overflow(epochs, per_epoch, &total) && total <= kMaxExactCount) return total;
  if (max_iters > 0) return kMaxExactCount;
  throw ValueError("--epochs " + std::to_string(epochs) + " x " + std::to_string(per_epoch) +
                   " iterations per epoch is more than 2^53 iterations; lower --epochs or set --max-iters");
}

train::Runner* g_runner = nullptr;
std::string g_error_prefix = "train: error: ";  // "train: rank 1: error: " in a data-parallel job
volatile std::sig_atomic_t g_stop_signal = 0;

// First Ctrl-C (or SIGTERM from a scheduler): finish the iteration, checkpoint, exit. A second one
// kills at once.
extern "C" void on_stop_signal(int sig) {
  g_stop_signal = sig;
  if (g_runner) g_runner->request_stop();
  std::signal(sig, SIG_DFL);
}

}  // namespace

// Loss scales are float32 numbers: from its smallest normal value, 2^-126, to 2^127.
constexpr double kMinScale = 0x1p-126, kMaxScale = 0x1p127;

int main(int argc, char** argv) {
  Flags f;
  CLI::App app{"Train a model of ember's zoo on Fashion-MNIST, CIFAR-10 or an ImageNet-style image folder, logging in "
               "MMEngine's format.", "train"};
  app.option_defaults()->always_capture_default();
  app.add_option("--model", f.model, "the network")->check(CLI::IsMember(train::model_names()));
  app.add_option("--dataset", f.dataset, "the data set: a built-in one, imagefolder (DIR/train and DIR/val, one "
                 "folder of .jpg/.jpeg/.png files per class, as torchvision's ImageFolder) or webdataset (tar shards "
                 "of .jpg/.jpeg/.png and .cls members: --data and --val-data are shard patterns)")
      ->check(CLI::IsMember({"fashion-mnist", "cifar10", "imagefolder", "webdataset"}));
  app.add_option("--val-data", f.val_data, "webdataset: the validation shards, a path or a brace pattern "
                 "('val-{000000..000006}.tar')");
  app.add_option("--num-classes", f.num_classes, "webdataset: the classes the .cls labels index (0: the largest training "
                 "label + 1, at most 100000)")->check(whole_in<int64_t>(0, int64_t(1) << 31));
  app.add_option("--data", f.data_dir,
                 "data directory (default: /usr/share/datasets/fashion-mnist for fashion-mnist; required for the others)")
      ->check(non_empty_path());
  app.add_option("--image-size", f.image_size, "imagefolder, webdataset: the side of the training crops and "
                 "validation center crops")->check(whole_in<int64_t>(8, 4096));
  app.add_option("--resize", f.resize, "imagefolder, webdataset: validation resizes the shorter side to this before "
                 "the center crop (0: image-size * 256 / 224)")->check(whole_in<int64_t>(0, 8192));
  app.add_flag("--skip-bad-images", f.skip_bad_images, "imagefolder, webdataset: replace a corrupt, truncated or "
               "non-image file (or an unlabelled sample) by the next good one and count it in the log (bad_images) "
               "instead of stopping");
  app.add_option("--epochs", f.epochs, "epochs to train")->check(whole_in<int64_t>(1));
  app.add_option("--accumulate", f.accumulate,
                 "gradient accumulation: batches per optimizer step, each loss divided by it (MMEngine's "
                 "accumulative_counts); iterations, --log-interval, --max-iters and the schedule count steps")
      ->check(whole_in<int64_t>(1, int64_t(1) << 20));
  app.add_option("--batch-size", f.batch_size, "images per iteration (per rank with --strategy ddp or zero*)")->check(whole_in<int64_t>(1));
  app.add_option("--lr", f.lr, "base learning rate (0: 0.1 for sgd, 1e-3 for adamw and lamb)")->check(at_least(0));
  app.add_option("--optimizer", f.optimizer, "optimizer")->check(CLI::IsMember({"sgd", "adamw", "lamb"}));
  app.add_option("--momentum", f.momentum, "SGD momentum")->check(number_in(0.0, 1.0));
  app.add_option("--weight-decay", f.weight_decay, "weight decay (decoupled for adamw)")->check(at_least(0));
  app.add_option("--scheduler", f.scheduler, "learning-rate schedule over all iterations, stepped per iteration")
      ->check(CLI::IsMember({"cosine", "multistep", "constant"}));
  app.add_option("--warmup-iters", f.warmup_iters, "linear warmup iterations before the schedule")->check(whole_in<int64_t>(0));
  app.add_option("--clip-grad", f.clip_grad, "clip the gradients' total 2-norm to this (0: no clipping)")->check(at_least(0));
  app.add_option("--device", f.device, "cpu or cuda (default: cuda when a GPU is present, else cpu)")
      ->check(CLI::IsMember({"cpu", "cuda"}));
  app.add_option("--threads", f.threads, "CPU compute threads (0: one per core)")->check(whole_in<int>(0));
  app.add_option("--num-workers", f.num_workers, "background threads preparing batches (0: none)")->check(whole_in<int>(0));
  app.add_option("--seed", f.seed, "seed of the initialisation, shuffling and augmentation")->check(whole_in<uint64_t>(0));
  app.add_option("--work-dir", f.work_dir, "where logs and checkpoints go (default: work_dirs/<model>_<dataset>)")
      ->check(non_empty_path());
  app.add_option("--resume", f.resume, "resume from PATH, or without a value from <work-dir>/last_checkpoint")
      ->expected(0, 1)->type_name("[PATH]");
  app.add_option("--log-interval", f.log_interval, "iterations between log lines")->check(whole_in<int64_t>(1));
  app.add_option("--save-interval", f.save_interval,
                 "epochs between epoch_N checkpoints (0: none; the best epoch's is kept apart, see --no-save-best)")
      ->check(whole_in<int64_t>(0));
  app.add_flag("--no-save-best", f.no_save_best, "do not keep best_accuracy_top1.safetensors (the best validation epoch's checkpoint)");
  app.add_option("--keep-checkpoints", f.keep_checkpoints, "epoch checkpoints kept (0: all)")->check(whole_in<int64_t>(0));
  app.add_option("--train-samples", f.train_samples, "use the first N training images (0: all)")->check(whole_in<int64_t>(0));
  app.add_option("--val-samples", f.val_samples, "use the first N test images (0: all)")->check(whole_in<int64_t>(0));
  app.add_option("--max-iters", f.max_iters, "stop after N iterations in all, with a checkpoint (0: run every epoch)")
      ->check(whole_in<int64_t>(0));
  app.add_flag("--augment", f.augment, "random crop (padding 4) and horizontal flip of the training images");
  app.add_flag("--deterministic", f.deterministic,
               "deterministic mode: CPU results bit for bit the same on any run, thread count and x86-64 CPU; "
               "CUDA only with deterministic algorithms");
  app.add_flag("--no-locate-nonfinite", f.no_locate_nonfinite,
               "log only the step, not the module and op, that first made a NaN or inf (saves a few percent)");
  app.add_flag("--nvtx", f.nvtx,
               "profiler ranges (as EMBER_NVTX=1): each module's forward by its path, each backward op by its module, "
               "the optimizer step, the scaler, each collective; nsys shows them, ncu --nvtx-include filters by them");
  app.add_flag("--compile", f.compile,
               "capture each training step after warm-up and replay it (CUDA graphs; MMEngine's compile=True): one "
               "launch per step; turns off --locate-nonfinite's module search");
  // Read after parsing: an option bound to a variable and given no value counts as not given here.
  CLI::Option* checkpointing = app.add_option("--activation-checkpointing",
                 "recompute the activations of these module types in backward instead of keeping them (MMEngine's "
                 "activation_checkpointing list, e.g. Bottleneck or Block); alone: the model's blocks (ResNet's "
                 "BasicBlock/Bottleneck, ViT's Block)")
      ->type_name("TYPE")->type_size(1)->expected(0, CLI::detail::expected_max_vector_size)->allow_extra_args();
  app.add_option("--compile-warmup", f.compile_warmup, "eager steps per batch shape before --compile captures it")
      ->check(whole_in<int64_t>(1));
  app.add_flag("--tensorboard", f.tensorboard,
               "also write the log's scalars as TensorBoard event files in <work-dir>/tensorboard/ (train/loss, "
               "val/accuracy/top1, ...)");
  app.add_option("--precision", f.precision, "fp32, tf32 (GPU), amp_fp16/amp_bf16 (autocast), naive_fp16/naive_bf16 "
                                             "(half model + fp32 masters), pure_bf16")
      ->check(CLI::IsMember(train::precision_names()));
  app.add_option("--strategy", f.strategy.name,
                 "none: one process; ddp: data parallel over the job's ranks (DistributedDataParallel, every rank "
                 "its share of each epoch); zero1, zero2, zero3: data parallel with ZeRO's stages (optimizer state, "
                 "+ gradients, + parameters sharded over the ranks); fsdp: FSDP's names for them (--sharding-strategy), "
                 "its units chosen by size (--wrap-min-num-params, 1e7 unless --wrap-module-types)")
      ->check(CLI::IsMember(train::strategy_names()));
  app.add_option("--sharding-strategy", f.strategy.sharding_strategy,
                 "fsdp: FULL_SHARD (zero3: parameters, gradients and optimizer state sharded), SHARD_GRAD_OP (zero2: "
                 "parameters whole), NO_SHARD (ddp)")
      ->check(CLI::IsMember({"FULL_SHARD", "SHARD_GRAD_OP", "NO_SHARD"}));
  app.add_option("--wrap-min-num-params", f.strategy.zero.min_num_params,
                 "zero3, fsdp: FSDP's size_based_auto_wrap_policy: from the leaves up, a module whose subtree holds this "
                 "many parameter elements not yet in a unit becomes a unit (gathered for its forward and backward)")
      ->check(whole_in<int64_t>(1, int64_t(1) << 40));
  app.add_option("--wrap-module-types", f.strategy.zero.wrap_module_types,
                 "zero3, fsdp: every module of these types (Block, Bottleneck, ...) is a unit of its subtree");
  app.add_option("--dist-timeout", f.dist_timeout, "ddp, zero: seconds before a collective that gets no answer fails")
      ->check(number_in(0.1, 86400.0));
  const auto elements = whole_in<int64_t>(1, int64_t(1) << 40);
  app.add_option("--reduce-bucket-size", f.strategy.zero.reduce_bucket_size, "zero: elements per gradient reduction")->check(elements);
  app.add_option("--allgather-bucket-size", f.strategy.zero.allgather_bucket_size, "zero: elements per parameter all-gather")
      ->check(elements);
  app.add_option("--overlap-comm", f.strategy.overlap_comm,
                 "zero: reduce gradients on a communication thread while backward runs (default: true at stage 3 only)")
      ->check(boolean_value());
  app.add_option("--contiguous-gradients", f.strategy.zero.contiguous_gradients,
                 "zero: copy each gradient into its unit's buffer as it arrives")
      ->check(boolean_value());
  app.add_option("--reduce-scatter", f.strategy.zero.reduce_scatter, "zero: reduce-scatter gradients (false: all-reduce)")
      ->check(boolean_value());
  app.add_flag("--offload-optimizer", f.strategy.zero.offload_optimizer,
               "zero: keep the optimizer state and float32 masters in host memory and step there (a GPU run)");
  app.add_flag("--offload-param", f.strategy.zero.offload_param,
               "zero3: keep this rank's parameter shards and their gradients in host memory, copied to the device "
               "for each use (needs --offload-optimizer)");
  app.add_option("--stage3-prefetch-bucket-size", f.strategy.zero.stage3_prefetch_bucket_size,
                 "zero3: parameter elements gathered ahead of use")->check(elements);
  app.add_option("--stage3-param-persistence-threshold", f.strategy.zero.stage3_param_persistence_threshold,
                 "zero3: modules with at most this many parameter elements keep them whole")
      ->check(whole_in<int64_t>(0, int64_t(1) << 40));
  app.add_option("--init-scale", f.init_scale, "amp_fp16: GradScaler's first scale; naive_fp16: rounded down to a power of 2")
      ->check(number_in(kMinScale, kMaxScale));
  app.add_option("--growth-factor", f.growth_factor, "amp_fp16: scale growth factor (> 1)")->check(number_in(1.0 + 1e-9, 1e9));
  app.add_option("--backoff-factor", f.backoff_factor, "amp_fp16: scale backoff factor, in (0, 1)")
      ->check(number_in(1e-9, 1.0 - 1e-9));
  app.add_option("--growth-interval", f.growth_interval, "amp_fp16: clean steps before the scale grows")->check(whole_in<int64_t>(1));
  app.add_option("--loss-scale-window", f.loss_scale_window, "naive_fp16: clean steps before the scale grows")
      ->check(whole_in<int64_t>(1));
  app.add_option("--hysteresis", f.hysteresis, "naive_fp16: overflows tolerated before the scale backs off")
      ->check(whole_in<int64_t>(1));
  app.add_option("--min-loss-scale", f.min_loss_scale, "naive_fp16: the scale's floor")->check(number_in(kMinScale, kMaxScale));
  app.add_option("--deepspeed-config", f.deepspeed_config,
                 "a DeepSpeed JSON config: its zero_optimization, fp16/bf16, gradient_clipping, micro batch and "
                 "optimizer settings become the flags above (a flag given too must agree)")
      ->check(CLI::ExistingFile);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "train: error: %s (see --help)\n", printable(e.what(), 400).c_str());  // it quotes the flag's value
    return 2;
  }

  try {
    std::vector<std::string> warnings;
    if (!f.deepspeed_config.empty()) warnings = apply_deepspeed_config(app, f);
    if (f.nvtx) nvtx::set_enabled(true);
    const bool has_gpu = backend::cuda_device_count() > 0;
    if (f.device.empty()) f.device = has_gpu ? "cuda" : "cpu";
    if (f.device == "cuda" && !has_gpu)
      throw DeviceError("--device cuda: no CUDA device is available (no GPU is visible, or ember was built without CUDA)");
    if (app.count("--sharding-strategy") && f.strategy.name != "fsdp")
      throw ValueError("--sharding-strategy applies to --strategy fsdp, not " + f.strategy.name);
    // FSDP's defaults leave alone what the flags set.
    if (app.count("--wrap-min-num-params")) f.strategy.zero_knobs_set.insert("min_num_params");
    if (app.count("--stage3-param-persistence-threshold")) f.strategy.zero_knobs_set.insert("stage3_param_persistence_threshold");
    const std::string kind = train::strategy_kind(f.strategy), strategy_shown = train::strategy_display_name(f.strategy);
    for (const char* knob : {"--reduce-bucket-size", "--allgather-bucket-size", "--overlap-comm", "--contiguous-gradients",
                             "--reduce-scatter", "--offload-optimizer", "--offload-param", "--stage3-prefetch-bucket-size",
                             "--stage3-param-persistence-threshold", "--wrap-min-num-params", "--wrap-module-types"}) {
      const std::string name = knob;
      const bool stage3_only = name.starts_with("--stage3") || name.starts_with("--wrap") || name == "--offload-param";
      if (app.count(knob) && (!kind.starts_with("zero") || (stage3_only && kind != "zero3")))
        throw ValueError(std::string(knob) + " applies to --strategy " +
                         (stage3_only ? "zero3 (or fsdp FULL_SHARD)" : "zero1, zero2, zero3 or fsdp") + ", not " +
                         strategy_shown);
    }
    f.activation_checkpointing = checkpointing->count() > 0;
    for (const std::string& type : checkpointing->results())
      if (!type.empty()) f.checkpoint_modules.push_back(type);
    if (f.activation_checkpointing && f.compile)
      throw ValueError("--activation-checkpointing with --compile: a captured step cannot replay the random numbers "
                       "of a recompute; use one of them");
    Device device = Device::parse(f.device);
    std::shared_ptr<dist::ProcessGroup> group;  // --strategy ddp, zero*
    if (kind != "none") {
      dist::InitOptions io;
      io.backend = device.is_cuda() ? "nccl" : "gloo";
      io.timeout = std::chrono::milliseconds(static_cast<int64_t>(f.dist_timeout * 1000));
      const dist::Environment env = dist::process_environment();
      if (!env.count("WORLD_SIZE") && !env.count("OMPI_COMM_WORLD_SIZE") && !env.count("SLURM_NTASKS")) {
        // A rank without a world size is a launch gone wrong: each rank would train alone as rank 0.
        for (const char* rank_variable : {"RANK", "OMPI_COMM_WORLD_RANK", "SLURM_PROCID"})
          if (env.count(rank_variable))
            throw ValueError(std::string(rank_variable) + "=" + env.at(rank_variable) +
                             " is set but no world size is (WORLD_SIZE, OMPI_COMM_WORLD_SIZE or SLURM_NTASKS): start "
                             "the ranks with a launcher (torchrun, ./ember launch, mpirun, srun), or unset it to train alone");
        io.rank = 0;  // started alone: a world of one (its store on a free port of this machine)
        io.world_size = 1;
      }
      group = dist::init_process_group(io);
      device = group->device();  // cuda:LOCAL_RANK for NCCL
    }
    const int rank = group ? group->rank() : 0, world = group ? group->size() : 1;
    if (group) g_error_prefix = "train: rank " + std::to_string(rank) + ": error: ";
    if (rank == 0)
      for (const auto& w : warnings) std::cerr << "train: warning: " << w << "\n";
    if (!f.deepspeed_config.empty()) check_deepspeed_batch(f, world);
    // --threads, or else OpenMP's own count (OMP_NUM_THREADS), at most one per core.
    set_num_threads(f.threads > 0 ? capped_threads("--threads", f.threads) : capped_threads("OMP_NUM_THREADS", get_num_threads()));
    f.num_workers = capped_threads("--num-workers", f.num_workers);
    set_deterministic(f.deterministic);  // before the model: its initialisation draws numbers
    const bool image_files = f.dataset == "imagefolder" || f.dataset == "webdataset";
    const DatasetSpec spec = dataset_spec(f.dataset);
    if (f.data_dir.empty()) f.data_dir = spec.default_dir;
    if (f.data_dir.empty()) throw ValueError("--data is required for " + f.dataset);
    if (f.work_dir.empty()) f.work_dir = "work_dirs/" + f.model + "_" + f.dataset;
    for (const char* flag : {"--train-samples", "--val-samples", "--augment"})
      if (image_files && app.count(flag))
        throw ValueError(std::string(flag) + " applies to fashion-mnist and cifar10; " + f.dataset +
                         " reads every file and augments with RandomResizedCrop and flips");
    for (const char* flag : {"--image-size", "--resize", "--skip-bad-images"})
      if (!image_files && app.count(flag)) throw ValueError(std::string(flag) + " applies to --dataset imagefolder or webdataset");
    for (const char* flag : {"--val-data", "--num-classes"})
      if (f.dataset != "webdataset" && app.count(flag)) throw ValueError(std::string(flag) + " applies to --dataset webdataset");

    std::shared_ptr<const data::Dataset> train_set, val_set;
    train::ImageShape shape = spec.shape;
    ImageSets images;
    if (image_files) {
      images = load_image_sets(f, rank, world);
      train_set = images.train;
      val_set = images.val;
      shape = images.shape;
    } else {
      train_set = load_dataset(f.dataset, f.data_dir, true, f.train_samples, "--train-samples");
      val_set = load_dataset(f.dataset, f.data_dir, false, f.val_samples, "--val-samples");
    }

    data::DataLoaderOptions loader;
    loader.batch_size = f.batch_size;
    loader.seed = f.seed;
    loader.num_workers = f.num_workers;
    loader.pin_memory = device.is_cuda();
    data::DataLoaderOptions val_loader = loader;
    loader.shuffle = true;
    if (!image_files) {  // image files are cropped, flipped and normalised as they are decoded
      loader.transform = [&spec, augment = f.augment](data::Batch& b, Generator& gen) {
        Tensor x = b.images;
        if (augment) x = data::random_horizontal_flip(data::random_crop(x, spec.shape.size, 4, gen), 0.5, gen);
        b.images = data::normalize(x, spec.mean, spec.std);
      };
      val_loader.transform = [&spec](data::Batch& b, Generator&) {
        b.images = data::normalize(b.images, spec.mean, spec.std);
      };
    }
    if (images.train_sampler) {  // a WebDataset: its shard order, split over the ranks
      loader.sampler = images.train_sampler;
      val_loader.sampler = images.val_sampler;
    } else if (group) {  // each rank its share of every epoch: the same shuffle everywhere, cut in world parts
      loader.sampler = data::distributed_sampler({rank, world, true, f.seed, false});
      val_loader.sampler = data::distributed_sampler({rank, world, false, 0, false});
    }
    auto train_loader = std::make_shared<data::DataLoader>(train_set, loader);
    // Flags that leave an epoch without a step, named with the counts they met.
    const std::string train_images = std::to_string(train_set->size()) + " training images" +
                               (world > 1 ? " over " + std::to_string(world) + " ranks" : std::string()) +
                               (app.count("--train-samples") ? " (--train-samples)" : std::string(" (") + f.dataset + ")");
    if (train_loader->size() == 0)
      throw ValueError("--data " + f.data_dir + ": rank " + std::to_string(rank) + " of " + std::to_string(world) +
                       " gets no training batch from the " + train_images +
                       (f.dataset == "webdataset" ? "; the ranks divide the shards, so give each rank one at least" : ""));
    if (f.accumulate > train_loader->size())
      throw ValueError("--accumulate " + std::to_string(f.accumulate) + " is more than the " +
                       std::to_string(train_loader->size()) + " batches of --batch-size " + std::to_string(f.batch_size) +
                       " that the " + train_images + " give a rank per epoch");
    if (val_set->size() == 0)  // found now, not after a whole epoch of training
      throw ValueError((f.val_data.empty() ? "--data " + f.data_dir : "--val-data " + f.val_data) +
                       ": the validation set (" + f.dataset + ") holds no image to score each epoch on");
    auto val = std::make_shared<data::DataLoader>(val_set, val_loader);

    manual_seed(f.seed);
    auto model = train::make_model(f.model, shape);
    std::string checkpointed;  // for the header line
    if (f.activation_checkpointing) {
      const std::vector<std::string> types =
          f.checkpoint_modules.empty() ? nn::default_checkpoint_modules(*model) : f.checkpoint_modules;
      const int64_t n = nn::apply_activation_checkpointing(*model, types);
      for (const std::string& t : types) checkpointed += (checkpointed.empty() ? "" : "/") + t;
      checkpointed = "; activation checkpointing of " + std::to_string(n) + " " + checkpointed + " modules";
    }
    model->to(device);  // before the optimizer sees the parameters
    train::PrecisionOptions po;
    po.precision = train::parse_precision(f.precision);
    if (po.precision == train::Precision::tf32 && !device.is_cuda())
      throw ValueError("--precision tf32 changes only GPU kernels: use it with --device cuda");
    po.grad_scaler = {f.init_scale, f.growth_factor, f.backoff_factor, f.growth_interval, true};
    po.loss_scaler.initial_scale_power = static_cast<int>(std::floor(std::log2(f.init_scale)));
    po.loss_scaler.loss_scale_window = f.loss_scale_window;
    po.loss_scaler.hysteresis = f.hysteresis;
    po.loss_scaler.min_loss_scale = f.min_loss_scale;
    po.loss_scaler.loss_scale = f.static_loss_scale;
    const std::shared_ptr<train::Strategy> strategy = train::make_strategy(f.strategy, group);
    po.strategy = strategy;
    auto precision = std::make_shared<train::TrainingPrecision>(
        po, *model, [&f](std::vector<Tensor> params) { return make_optimizer(f, std::move(params)); });
    auto scheduler = make_scheduler(f, precision->optimizer(), schedule_iterations(f.epochs, train_loader->size() / f.accumulate, f.max_iters));

    train::RunnerOptions ro;
    ro.epochs = f.epochs;
    ro.log_interval = f.log_interval;
    ro.save_interval = f.save_interval;
    ro.save_best = !f.no_save_best;
    ro.keep_checkpoints = f.keep_checkpoints;
    ro.clip_grad_norm = f.clip_grad;
    ro.accumulate = f.accumulate;
    ro.locate_nonfinite = !f.no_locate_nonfinite;
    ro.work_dir = f.work_dir;
    ro.tensorboard = f.tensorboard;
    ro.compile = f.compile;
    ro.compile_options.warmup_steps = f.compile_warmup;
    if (app.count("--resume")) ro.resume = f.resume;
    ro.max_iters = f.max_iters;
    ro.device = device;
    ro.group = group;
    ro.info = {{"model", f.model},         {"dataset", f.dataset},     {"optimizer", f.optimizer},
               {"scheduler", f.scheduler}, {"precision", f.precision},
               {"deterministic", f.deterministic ? "true" : "false"}, {"strategy", strategy_shown},
               {"lr", decimal_text(effective_lr(f))}, {"weight_decay", decimal_text(f.weight_decay)},
               {"warmup_iters", std::to_string(f.warmup_iters)}};
    if (f.optimizer == "sgd") ro.info["momentum"] = decimal_text(f.momentum);
    train::Runner runner(strategy->wrap(model), precision, scheduler, train_loader, val, ro);  // checks the work dir first
    if (rank == 0)
      std::cout << "train: " << f.model << " (" << model->num_parameters() << " parameters) on " << f.dataset << " ("
              << train_set->size() << " train / " << val_set->size() << " val images), " << f.optimizer << " lr "
              << effective_lr(f) << ", " << f.epochs << " epochs of "
              << train_loader->size() / f.accumulate << " iterations"
              << (f.accumulate > 1 ? " (steps of " + std::to_string(f.accumulate) + " batches)" : std::string())
              << " on " << device.str() << " in " << f.precision << ", "
              << get_num_threads() << " threads" << (f.deterministic ? ", deterministic" : "") << ", CPU GEMM "
              << cpu_gemm_name() << checkpointed << "; work dir " << f.work_dir
              << (group ? "; " + strategy_shown + (strategy_shown == kind ? "" : " (" + kind + ")") + " on " + std::to_string(world) + " ranks (" + group->backend_name() + "), global batch " +
                              std::to_string(f.batch_size * f.accumulate * world)
                        : std::string())
              << std::endl;

    g_runner = &runner;
    std::signal(SIGINT, on_stop_signal);
    std::signal(SIGTERM, on_stop_signal);
    const train::RunSummary s = runner.run();
    g_runner = nullptr;

    double seconds = 0, data_seconds = 0;
    for (const auto& e : s.epochs) {
      seconds += e.seconds;
      data_seconds += e.data_seconds;
    }
    if (!s.epochs.empty() && rank == 0) {
      // Stopped before any validation: no accuracy to name.
      char best[48] = "no validation yet";
      if (std::isfinite(s.best_top1)) std::snprintf(best, sizeof best, "best accuracy/top1 %.4f", s.best_top1);
      std::printf("train: %s after %lld iterations; %s; %.2f s per epoch, data_time %.1f%% of it%s\n",
                  s.stopped_early ? "stopped" : "done", static_cast<long long>(s.iterations), best,
                  seconds / double(s.epochs.size()), seconds > 0 ? 100.0 * data_seconds / seconds : 0.0,
                  s.skipped_steps ? (", " + std::to_string(s.skipped_steps) + " steps skipped").c_str() : "");
    }
    return g_stop_signal ? 128 + g_stop_signal : 0;  // the shell's code for a signalled program
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s%s\n", g_error_prefix.c_str(), e.what());
    return 1;
  }
}
