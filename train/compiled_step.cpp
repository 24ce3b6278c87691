#include "train/compiled_step.h"

#include <bit>
#include <string>

#include "autograd/grad_mode.h"
#include "tensor/error.h"
#include "tensor/ops.h"

namespace ember::train {

// A captured step: its graph, the input buffers it reads the batch from, the outputs it writes,
// and per generator the {seed, offset} its random ops read and the blocks a replay draws.
struct CompiledStep::Graph {
  std::vector<Tensor> inputs, outputs;
  std::vector<Tensor> philox_bases;  // two int64 each, on the step's device
  std::vector<uint64_t> philox_blocks;
  std::vector<double> hyperparameters;  // as fixed_hyperparameters() was at capture
  std::unique_ptr<DeviceGraph> graph;
};

namespace {

// The device of the batch: ValueError when it is empty, holds an undefined tensor or spans devices.
Device device_of(const std::vector<Tensor>& batch) {
  if (batch.empty()) throw ValueError("CompiledStep: the batch holds no tensors");
  for (size_t i = 0; i < batch.size(); ++i) {
    if (!batch[i].defined()) throw ValueError("CompiledStep: batch tensor " + std::to_string(i) + " is undefined");
    if (!(batch[i].device() == batch[0].device()))
      throw ValueError("CompiledStep: batch tensor " + std::to_string(i) + " is on " + batch[i].device().str() +
                       ", tensor 0 on " + batch[0].device().str());
  }
  return batch[0].device();
}

// What selects a graph: each tensor's dtype and shape.
std::vector<int64_t> shape_key(const std::vector<Tensor>& batch) {
  std::vector<int64_t> key;
  for (const Tensor& t : batch) {
    key.push_back(static_cast<int64_t>(t.dtype()));
    key.push_back(t.dim());
    key.insert(key.end(), t.shape().begin(), t.shape().end());
  }
  return key;
}

// Opens a capture on each generator, with its base; closes them all on destruction (returning
// what each drew) unless taken.
class GeneratorCaptures {
 public:
  GeneratorCaptures(const std::vector<Generator*>& generators, const std::vector<Tensor>& bases, Device device)
      : generators_(generators) {
    for (; opened_ < generators_.size(); ++opened_)
      generators_[opened_]->begin_capture(static_cast<const uint64_t*>(bases[opened_].raw_data()), device);
  }
  ~GeneratorCaptures() {
    for (size_t i = 0; i < opened_; ++i) generators_[i]->end_capture();
  }
  GeneratorCaptures(const GeneratorCaptures&) = delete;
  GeneratorCaptures& operator=(const GeneratorCaptures&) = delete;
  // Closes the captures; the blocks each drew.
  std::vector<uint64_t> close() {
    std::vector<uint64_t> drawn;
    for (size_t i = 0; i < opened_; ++i) drawn.push_back(generators_[i]->end_capture());
    opened_ = 0;
    return drawn;
  }

 private:
  const std::vector<Generator*>& generators_;
  size_t opened_ = 0;
};

}  // namespace

CompiledStep::CompiledStep(StepFunction step, std::vector<optim::Optimizer*> optimizers,
                           std::vector<Generator*> generators, CompileOptions options)
    : step_(std::move(step)), optimizers_(std::move(optimizers)), generators_(std::move(generators)),
      options_(options) {
  if (!step_) throw ValueError("CompiledStep: the step function is empty");
  if (options_.warmup_steps < 1)
    throw ValueError("CompiledStep: warmup_steps must be at least 1 (they choose the library plans), got " +
                     std::to_string(options_.warmup_steps));
  if (options_.max_graphs < 0)
    throw ValueError("CompiledStep: max_graphs must be at least 0, got " + std::to_string(options_.max_graphs));
  for (size_t i = 0; i < optimizers_.size(); ++i)
    if (optimizers_[i] == nullptr) throw ValueError("CompiledStep: optimizer " + std::to_string(i) + " is null");
  if (generators_.empty()) generators_.push_back(&default_generator());
  for (size_t i = 0; i < generators_.size(); ++i)
    if (generators_[i] == nullptr) throw ValueError("CompiledStep: generator " + std::to_string(i) + " is null");
}

CompiledStep::~CompiledStep() = default;

std::vector<double> CompiledStep::fixed_hyperparameters() const {
  std::vector<double> values;
  for (const optim::Optimizer* o : optimizers_) {
    const std::vector<double> v = o->launch_hyperparameters();
    values.insert(values.end(), v.begin(), v.end());
  }
  return values;
}

std::vector<Tensor> CompiledStep::operator()(const std::vector<Tensor>& batch) {
  const Device device = device_of(batch);
  ShapeEntry& entry = shapes_[shape_key(batch)];
  if (entry.graph && entry.graph->hyperparameters != fixed_hyperparameters()) {
    entry.graph.reset();  // its kernels carry the old values: capture again
    --graphs_;
  }
  if (!entry.graph && (entry.eager_runs < options_.warmup_steps || graphs_ >= options_.max_graphs)) {
    ++entry.eager_runs;
    ++stats_.eager;
    return step_(batch);
  }
  try {
    if (!entry.graph) capture(entry, batch, device);
    return replay(*entry.graph, batch);
  } catch (...) {
    // On a GPU the tensors a failed capture made point at graph memory that no graph backs (on the
    // CPU the body fails in its replay instead): the gradients its backward left are dropped, the
    // next backward makes them again, so that a caller who goes on eagerly never reads them.
    for (optim::Optimizer* o : optimizers_) o->zero_grad(/*set_to_none=*/true);
    throw;
  }
}

void CompiledStep::capture(ShapeEntry& entry, const std::vector<Tensor>& batch, Device device) {
  auto g = std::make_unique<Graph>();
  {
    NoGradGuard no_grad;
    for (const Tensor& t : batch) g->inputs.push_back(empty(t.shape(), TensorOptions(t.dtype()).with_device(device)));
    for (size_t i = 0; i < generators_.size(); ++i)
      g->philox_bases.push_back(zeros({2}, TensorOptions(DType::i64).with_device(device)));
  }
  for (optim::Optimizer* o : optimizers_) o->stage_hyperparameters();  // the tensors the kernels will read
  Graph* raw = g.get();
  GeneratorCaptures captures(generators_, g->philox_bases, device);
  g->graph = std::make_unique<DeviceGraph>(device, [this, raw] { raw->outputs = step_(raw->inputs); });
  g->philox_blocks = captures.close();  // on the CPU nothing ran yet: the first replay counts them
  g->hyperparameters = fixed_hyperparameters();
  entry.graph = std::move(g);
  ++graphs_;
  ++stats_.captures;
}

std::vector<Tensor> CompiledStep::replay(Graph& g, const std::vector<Tensor>& batch) {
  const Device device = g.graph->device();
  {
    NoGradGuard no_grad;
    for (size_t i = 0; i < batch.size(); ++i) copy_(g.inputs[i], batch[i]);
    for (size_t i = 0; i < generators_.size(); ++i) {  // where this step's draws start, as eagerly
      const GeneratorState s = generators_[i]->state();
      Tensor seed = select(g.philox_bases[i], 0, 0), offset = select(g.philox_bases[i], 0, 1);
      fill_(seed, std::bit_cast<int64_t>(s.seed));
      fill_(offset, std::bit_cast<int64_t>(s.offset));
    }
  }
  for (optim::Optimizer* o : optimizers_) o->stage_hyperparameters();
  std::vector<uint64_t> drawn;
  {
    GeneratorCaptures captures(generators_, g.philox_bases, device);  // read by host code the CPU runs again
    g.graph->replay();
    drawn = captures.close();
  }
  for (size_t i = 0; i < generators_.size(); ++i)
    generators_[i]->reserve(device.is_cpu() ? drawn[i] : g.philox_blocks[i]);
  ++stats_.replays;
  return g.outputs;
}

}  // namespace ember::train
