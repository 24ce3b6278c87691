// The op idiom (docs/design.md#one-op-defined-once). A primitive is one type holding an op's
// parameters, with
//   infer()     output shapes/dtypes and argument checks,
//   eval_cpu()  defined in cpu/, eval_cuda() defined in cuda/ (link-time backend choice),
//   vjp()       its backward, written with public ops so double backward comes for free.
// When grad mode records, the same object becomes the autograd node: run() moves it to the heap,
// wires its edges and saves what kSaves asks for.
#pragma once

#include <optional>
#include <vector>

#include "autograd/grad_mode.h"
#include "autograd/node.h"
#include "autograd/saved_tensor.h"
#include "tensor/capture.h"

namespace ember {

// What every primitive class declares besides its parameters (MLX's DEFINE_* habit): the
// kernels of both backends, defined in cpu/ and cuda/ (cuda/absent.cpp without CUDA), and the
// vjp, defined beside the op's front end in tensor/.
#define EMBER_PRIMITIVE_KERNELS                                             \
  void eval_cpu(const std::vector<Tensor>& in, std::vector<Tensor>& out); \
  void eval_cuda(const std::vector<Tensor>& in, std::vector<Tensor>& out)
#define EMBER_PRIMITIVE_VJP                                                                               \
  std::vector<Tensor> vjp(const std::vector<Tensor>& cotangents, const std::vector<Tensor>& inputs, \
                          const std::vector<Tensor>& outputs) override

struct OutputSpec {
  Shape shape;
  DType dtype;
  Strides strides{};  // a dense layout for the output (tensor/layout.h); empty: row-major
};

enum SaveMask : int { kSaveNone = 0, kSaveInputs = 1, kSaveOutputs = 2 };

class Primitive : public autograd::Node {
 public:
  static constexpr bool kDifferentiable = true;  // a primitive may shadow these four
  static constexpr int kSaves = kSaveNone;
  static constexpr unsigned kSavedInputMask = ~0u;  // with kSaveInputs: bit i saves input i
  // Whether an in-place form may write a self whose elements share memory (an expanded tensor):
  // only when every element gets the same value (Fill), as PyTorch allows fill_ there.
  static constexpr bool kWritesOverlappingSelf = false;

  // Gradients of the inputs (undefined where an input needs none). `inputs`/`outputs` hold the
  // saved tensors (undefined when not saved); cotangents are never undefined.
  virtual std::vector<Tensor> vjp(const std::vector<Tensor>& cotangents, const std::vector<Tensor>& inputs,
                                  const std::vector<Tensor>& outputs);
  std::vector<Tensor> apply(std::vector<Tensor>&& grad_outputs) final;
  void release_saved() final;

  bool input_needs_grad(size_t i) const { return next_edges()[i].valid(); }
  const autograd::TensorMeta& input_meta(size_t i) const { return input_meta_[i]; }

  // Used by run(): wires edges to the inputs and saves them or the outputs per `saves`.
  void record_inputs(const std::vector<Tensor>& inputs, int saves, unsigned saved_input_mask = ~0u);
  void record_outputs(const std::vector<Tensor>& outputs, int saves);

 private:
  std::vector<autograd::TensorMeta> input_meta_;
  std::vector<autograd::SavedTensor> saved_inputs_;
  std::vector<autograd::SavedTensor> saved_outputs_;
};

namespace detail {
Device common_device(const char* op, const std::vector<Tensor>& inputs);
bool any_requires_grad(const std::vector<Tensor>& inputs);
// A fresh output as `spec` describes it, on `device`.
Tensor empty_output(const OutputSpec& spec, Device device);
void check_nan_outputs(const char* op, const std::vector<Tensor>& outputs);
// Refuses in-place writes that autograd cannot follow (leaves requiring grad, views of them).
void check_inplace_allowed(const char* op, const Tensor& self);
// Refuses writing in place into a tensor whose elements share memory (a dim of stride 0): each
// element's result would land on the others.
void check_no_self_overlap(const char* op, const Tensor& self);
// The inputs of an in-place op with those that partly share inputs[0]'s memory replaced by copies:
// they are read whole before the write, as NumPy does (t[1:] = t[:-1]). The same view as self
// stays: each element reads its own value before writing it. Nothing (no copy of the list) when no
// input overlaps, as for almost every in-place op.
std::optional<std::vector<Tensor>> apart_from_self(const std::vector<Tensor>& inputs);
// The "before" value of an in-place op on `self`, carrying self's current history: an alias, or
// a copy when the op's vjp needs the old values (PyTorch's original_self).
Tensor value_before_write(const Tensor& self, bool keep_values);

template <class P>
void dispatch(P& p, Device device, const std::vector<Tensor>& in, std::vector<Tensor>& out) {
  const capture::RunningOp running(p.name());  // named by a captured step's refusal
  if (device.is_cpu())
    p.eval_cpu(in, out);
  else
    p.eval_cuda(in, out);
  if (autograd::AnomalyMode::is_enabled()) check_nan_outputs(p.name(), out);
}
}  // namespace detail

// Runs primitive `prim` out of place and records it for backward when grad mode asks.
template <class P>
std::vector<Tensor> run(P prim, const std::vector<Tensor>& inputs) {
  const Device device = detail::common_device(prim.name(), inputs);
  const std::vector<OutputSpec> specs = prim.infer(inputs);
  std::vector<Tensor> outputs;
  outputs.reserve(specs.size());
  for (const auto& s : specs) outputs.push_back(detail::empty_output(s, device));

  const bool record =
      P::kDifferentiable && autograd::GradMode::is_enabled() && detail::any_requires_grad(inputs);
  if (!record) {
    detail::dispatch(prim, device, inputs, outputs);
    return outputs;
  }
  auto node = std::make_shared<P>(std::move(prim));
  node->record_inputs(inputs, P::kSaves, P::kSavedInputMask);
  detail::dispatch(*node, device, inputs, outputs);
  node->record_outputs(outputs, P::kSaves);
  return outputs;
}

template <class P>
Tensor run1(P prim, const std::vector<Tensor>& inputs) {
  return run(std::move(prim), inputs)[0];
}

// Runs `prim` writing its single output into inputs[0] (the in-place form), bumping its version.
template <class P>
void run_inplace(P prim, const std::vector<Tensor>& given) {
  if constexpr (!P::kWritesOverlappingSelf) detail::check_no_self_overlap(prim.name(), given[0]);
  const std::optional<std::vector<Tensor>> separated = detail::apart_from_self(given);
  const std::vector<Tensor>& inputs = separated ? *separated : given;
  const Tensor& self = inputs[0];
  const Device device = detail::common_device(prim.name(), inputs);
  const std::vector<OutputSpec> specs = prim.infer(inputs);
  if (!(specs[0].shape == self.shape()))
    throw ShapeError(std::string(prim.name()) + "_: output with shape " + to_string(self.shape()) +
                     " doesn't match the broadcast shape " + to_string(specs[0].shape));
  if (specs[0].dtype != self.dtype())
    throw DTypeError(std::string(prim.name()) + "_: result type " + dtype_name(specs[0].dtype) +
                     " can't be written into a " + dtype_name(self.dtype()) + " tensor");
  std::vector<Tensor> outputs{self};
  const bool record =
      P::kDifferentiable && autograd::GradMode::is_enabled() && detail::any_requires_grad(inputs);
  if (!record) {
    detail::dispatch(prim, device, inputs, outputs);
    self.storage()->bump_version();
    return;
  }
  detail::check_inplace_allowed(prim.name(), self);
  std::vector<Tensor> before = inputs;
  before[0] = detail::value_before_write(self, (P::kSaves & kSaveInputs) && (P::kSavedInputMask & 1u));
  auto node = std::make_shared<P>(std::move(prim));
  node->record_inputs(before, P::kSaves, P::kSavedInputMask);
  detail::dispatch(*node, device, before, outputs);
  self.storage()->bump_version();
  node->record_outputs(outputs, P::kSaves);
}

// Runs a primitive that reads `inputs` and writes `updated` in place (its outputs): optimizer steps
// and loss scaling. Outside autograd; the versions of what it wrote are bumped.
template <class P>
void run_update(P& prim, const std::vector<Tensor>& inputs, std::vector<Tensor>& updated) {
  static_assert(!P::kDifferentiable, "an in-place update is not recorded for backward");
  std::vector<Tensor> all = inputs;
  all.insert(all.end(), updated.begin(), updated.end());
  detail::dispatch(prim, detail::common_device(prim.name(), all), inputs, updated);
  for (const Tensor& t : updated) t.storage()->bump_version();
}

// Runs a view primitive: P::make_view(input) returns a tensor sharing input's storage.
template <class P>
Tensor run_view(P prim, const Tensor& input) {
  Tensor out = prim.make_view(input);
  out.impl()->is_view = true;
  if (autograd::GradMode::is_enabled() && input.requires_grad()) {
    auto node = std::make_shared<P>(std::move(prim));
    node->record_inputs({input}, kSaveNone);
    node->record_outputs({out}, kSaveNone);
  }
  return out;
}

}  // namespace ember
