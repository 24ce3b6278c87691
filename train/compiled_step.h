/// @file
/// "Compile" for a training step (MMEngine's cfg compile=True, PyTorch's CUDA graphs): after a few
/// eager warm-up steps per input shape, the whole step (forward, backward, gradient norm and
/// clipping, the scaler's unscale and overflow check, the optimizer step) is captured once into a
/// DeviceGraph (tensor/device_graph.h) and later steps copy their batch into the graph's input
/// buffers and replay it: one launch instead of hundreds, with the same results bit for bit.
///
/// The step function must queue the same work every call, differing only in the batch's values:
/// what it reads on the host (an item(), a branch on a device value) raises CaptureError when it is
/// captured. Between calls, learning rates may change (each replay reads them from device memory)
/// and random ops draw new numbers (their Philox offsets advance as eagerly); a change of another
/// hyperparameter captures the step again. On the CPU, which has no graphs, each replay runs the
/// function again under the same rules.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <vector>

#include "optim/optimizer.h"
#include "tensor/device_graph.h"
#include "tensor/random.h"

namespace ember::train {

/// How a CompiledStep captures.
struct CompileOptions {
  /// Eager steps of each input shape before it is captured: they create the optimizer state and
  /// choose the cuBLASLt and cuDNN plans, which a capture cannot search for (ValueError below 1).
  int64_t warmup_steps = 3;
  /// Input shapes that get a graph; steps of further shapes run eagerly (ValueError below 0).
  int64_t max_graphs = 4;
};

/// One training step: takes the batch, returns the tensors its caller reads afterwards (the loss,
/// the skipped flag). Called with the graph's own input buffers when it is captured.
using StepFunction = std::function<std::vector<Tensor>(const std::vector<Tensor>& batch)>;

/// A training step run eagerly for warm-up, then replayed from a graph per input shape (see the
/// file's description).
class CompiledStep {
 public:
  /// `optimizers`: those the step runs (their learning rates are staged before each replay);
  /// `generators`: those its random ops draw from (default_generator() when empty). Each must outlive
  /// the CompiledStep.
  CompiledStep(StepFunction step, std::vector<optim::Optimizer*> optimizers, std::vector<Generator*> generators = {},
               CompileOptions options = {});
  ~CompiledStep();
  CompiledStep(const CompiledStep&) = delete;
  CompiledStep& operator=(const CompiledStep&) = delete;

  /// Runs one step on `batch` (tensors on one device, any layout). Returns the step's outputs; after
  /// a replay they are the graph's own tensors, which the next replay of the same shape overwrites
  /// (clone what must outlive it). CaptureError, naming the op, when the step cannot be captured;
  /// ValueError for an empty batch or one spread over devices.
  std::vector<Tensor> operator()(const std::vector<Tensor>& batch);

  /// What the calls so far did.
  struct Stats {
    int64_t eager = 0;     ///< steps run eagerly (warm-up, shapes past max_graphs)
    int64_t captures = 0;  ///< graphs captured (a shape's first, or again after a hyperparameter changed)
    int64_t replays = 0;   ///< steps replayed from a graph
  };
  const Stats& stats() const { return stats_; }  ///< The counts so far.

 private:
  struct Graph;
  // The graph of one input shape (or of none yet).
  struct ShapeEntry {
    int64_t eager_runs = 0;
    std::unique_ptr<Graph> graph;
  };

  void capture(ShapeEntry& entry, const std::vector<Tensor>& batch, Device device);
  std::vector<Tensor> replay(Graph& graph, const std::vector<Tensor>& batch);
  // Every optimizer's launch_hyperparameters(), in order: a change means capturing again.
  std::vector<double> fixed_hyperparameters() const;

  StepFunction step_;
  std::vector<optim::Optimizer*> optimizers_;
  std::vector<Generator*> generators_;
  CompileOptions options_;
  std::map<std::vector<int64_t>, ShapeEntry> shapes_;
  int64_t graphs_ = 0;
  Stats stats_;
};

}  // namespace ember::train
