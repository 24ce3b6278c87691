// 07_amp_modes: the training precision modes side by side, each training the same SmallCNN from the
// same initial weights on the same batches, with the loss, the time per step and what each mode
// keeps in which dtype. The modes (train/precision.h):
//   fp32        everything in float32
//   tf32        float32, with TF32 tensor cores for matmul and conv (GPU only: on the CPU it is fp32)
//   amp_fp16    float32 weights; autocast runs matmul and conv in float16; GradScaler scales the loss
//               so that small gradients survive float16, unscales them, skips a step that overflowed
//   amp_bf16    the same in bfloat16, whose float32-sized exponent needs no loss scaling
//   naive_fp16  the model stored in float16 (batch norm kept in float32), float32 master weights
//               that the optimizer steps and copies back, and a dynamic loss scale
//   naive_bf16  the same in bfloat16, without loss scaling
//   pure_bf16   the model and the optimizer state in bfloat16: no masters, no scaling
// On the CPU the 16-bit modes store 16 bits but compute in float32, so they save memory, not time;
// on a GPU (--device cuda) they run on tensor cores. The program checks that every mode learns, stays
// near fp32's loss, and stores the dtypes it promises.
//
// Read next: train/precision.cpp (TrainingPrecision: the casts, the autocast region and
// backward_and_step), tensor/autocast.cpp (which ops autocast runs in 16 bits: PyTorch's table),
// optim/amp/grad_scaler.h (GradScaler), optim/amp/loss_scaler.h (DynamicLossScaler),
// optim/amp/master_weights.h (MasterWeightOptimizer), train/runner.cpp (Runner::train_iteration).
//
//   ninja -C build examples/07_amp_modes && build/examples/07_amp_modes
//   build/examples/07_amp_modes --modes amp_bf16 pure_bf16 --steps 200
#include <CLI/CLI.hpp>

#include <cmath>
#include <cstdio>

#include "fit.h"
#include "nn/loss.h"
#include "nn/models/mlp.h"
#include "optim/sgd.h"
#include "train/precision.h"

using namespace ember;
using namespace ember_examples;

namespace {

struct ModeResult {
  std::string mode;
  FitReport report;
  DType conv_dtype, batch_norm_dtype;
  double loss_scale;
  int64_t skipped_steps;
};

// The dtypes a mode keeps the convolution's and batch norm's weights in.
std::pair<DType, DType> promised_dtypes(train::Precision p) {
  switch (p) {
    case train::Precision::naive_fp16: return {DType::f16, DType::f32};
    case train::Precision::naive_bf16: return {DType::bf16, DType::f32};
    case train::Precision::pure_bf16: return {DType::bf16, DType::bf16};
    default: return {DType::f32, DType::f32};
  }
}

ModeResult train_in_mode(const std::string& mode, const ImageData& data, const FitOptions& fit_options) {
  std::printf("\n== %s\n", mode.c_str());
  const Device device = Device::parse(fit_options.device);
  manual_seed(fit_options.seed);  // every mode starts from the same weights
  auto model = std::make_shared<nn::SmallCNN>(data.shape.classes, data.shape.channels, data.shape.size);
  model->to(device);
  // Casts the model as the mode asks and builds the optimizer over what it steps (the float32
  // masters in the naive modes).
  train::PrecisionOptions options;
  options.precision = train::parse_precision(mode);
  train::TrainingPrecision precision(options, *model, [&](std::vector<Tensor> p) {
    return std::make_unique<optim::SGD>(std::move(p), optim::SGDOptions{.lr = fit_options.lr, .momentum = 0.9});
  });
  Tensor skipped = zeros({}, TensorOptions().with_device(device));  // summed on the device: no wait per step
  const FitReport report = fit(*model, data, fit_options, [&](const Tensor& images, const Tensor& labels) {
    precision.zero_grad();
    Tensor loss;
    {
      const auto autocast = precision.autocast(device);  // null outside the amp modes
      // float32 logits for the loss: a 16-bit loss would overflow once scaled.
      loss = cross_entropy((*model)(images).to(DType::f32), labels);
    }
    // backward of the scaled loss, unscale, overflow check, step (skipped on overflow), scale update.
    skipped = skipped + precision.backward_and_step(loss, 0.0).skipped;
    return loss;
  }, precision.input_dtype());
  return {mode, report, model->conv1->weight.dtype(), model->bn1->weight.dtype(),
          precision.loss_scale().item<double>(), skipped.item<int64_t>()};
}

}  // namespace

int main(int argc, char** argv) {
  FitOptions fit_options{.steps = 40, .batch_size = 32, .lr = 0.02};
  std::vector<std::string> modes;
  CLI::App app{"Step 7 of the example ladder: the precision modes side by side on one model and one data set.",
               "07_amp_modes"};
  add_fit_options(app, fit_options);
  const FashionMnistFlag data_flag(app);
  app.add_option("--modes", modes, "the modes to compare, fp32 first (default: all; on the CPU all but tf32)")
      ->check(CLI::IsMember(train::precision_names()));
  CLI11_PARSE(app, argc, argv);
  if (modes.empty())
    for (const auto& m : train::precision_names())
      if (m != "tf32" || fit_options.device != "cpu") modes.push_back(m);
  std::erase(modes, "fp32");
  modes.insert(modes.begin(), "fp32");  // the reference the others are compared with

  return run_checked("07_amp_modes", [&](Checks& checks) {
    const ImageData data = data_flag.load(8192, 1000, fit_options.seed);
    std::vector<ModeResult> results;
    for (const auto& mode : modes) results.push_back(train_in_mode(mode, data, fit_options));

    std::printf("\n%-11s %-8s %-8s %11s %10s %9s %8s %11s %8s\n", "mode", "conv", "bn", "first loss", "last loss",
                "accuracy", "ms/step", "loss scale", "skipped");
    for (const auto& r : results)
      std::printf("%-11s %-8s %-8s %11.4f %10.4f %8.1f%% %8.1f %11g %8lld\n", r.mode.c_str(), dtype_name(r.conv_dtype),
                  dtype_name(r.batch_norm_dtype), r.report.first_loss, r.report.last_loss,
                  100 * r.report.test_accuracy, r.report.ms_per_step, r.loss_scale,
                  static_cast<long long>(r.skipped_steps));
    std::printf("\n");
    const double reference = results.front().report.last_loss;
    for (const auto& r : results) {
      const auto [conv, bn] = promised_dtypes(train::parse_precision(r.mode));
      checks.expect(r.conv_dtype == conv && r.batch_norm_dtype == bn,
                    r.mode + " keeps conv weights in " + dtype_name(conv) + " and batch norm in " + dtype_name(bn));
      checks.expect(loss_went_down(r.report), r.mode + ": the loss went down by 10% or more");
      if (r.mode == "fp32") continue;
      char what[160];
      std::snprintf(what, sizeof what, "%s ends within 0.25 of fp32's loss (%.4f vs %.4f)", r.mode.c_str(),
                    r.report.last_loss, reference);
      checks.expect(std::fabs(r.report.last_loss - reference) <= 0.25, what);
    }
  });
}
