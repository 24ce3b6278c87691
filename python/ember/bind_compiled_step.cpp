// Whole-step capture for Python (train/compiled_step.h): ember.compile_step's C++ half. The step is a
// Python function; while a step is captured it runs once, with the graph's input buffers, and its
// ops are recorded, so that a replay launches the whole step without running Python at all.
#include "python/ember/bind_train.h"
#include "train/compiled_step.h"

namespace ember::python {

void bind_compiled_step(nb::module_& m) {
  using train::CompiledStep;
  nb::class_<CompiledStep>(m, "_CompiledStep", doc::train_CompiledStep)
      .def(
          "__init__",
          [](CompiledStep* self, nb::callable step, std::vector<optim::Optimizer*> optimizers,
             std::vector<Generator*> generators, int64_t warmup_steps, int64_t max_graphs) {
            // Called on the thread that calls the CompiledStep, which holds the GIL (operator() keeps it).
            auto run = [step = std::move(step)](const std::vector<Tensor>& batch) {
              return nb::cast<std::vector<Tensor>>(step(batch));
            };
            new (self) CompiledStep(run, std::move(optimizers), std::move(generators),
                                    train::CompileOptions{.warmup_steps = warmup_steps, .max_graphs = max_graphs});
          },
          "step"_a, "optimizers"_a, "generators"_a, "warmup_steps"_a, "max_graphs"_a,
          doc::train_CompiledStep_CompiledStep)
      .def("__call__", &CompiledStep::operator(), "batch"_a,
           "Runs one step on batch: eagerly in warm-up, then captured once per input shape and replayed. "
           "After a replay the outputs are the graph's own tensors, which the next replay of the same "
           "shape overwrites. CaptureError, naming the op, when the step cannot be captured.")
      .def(
          "stats",
          [](const CompiledStep& s) {
            nb::dict d;
            d["eager"] = s.stats().eager;
            d["captures"] = s.stats().captures;
            d["replays"] = s.stats().replays;
            return d;
          },
          doc::train_CompiledStep_stats);
}

}  // namespace ember::python
