#include "autograd/accumulate_grad.h"

#include "autograd/grad_mode.h"
#include "tensor/ops.h"

namespace ember::autograd {

AccumulateGrad::AccumulateGrad(Tensor variable) : variable_(std::move(variable)) {
  mutable_output_meta().push_back({variable_.shape(), variable_.dtype(), variable_.device()});
}

std::vector<Tensor> AccumulateGrad::apply(std::vector<Tensor>&& grad_outputs) {
  Tensor g = std::move(grad_outputs[0]);
  AutogradMeta& meta = *variable_.autograd_meta();
  for (const auto& hook : meta.hooks) {
    Tensor r = checked_hook_result(g, hook(g), "backward");
    if (r.defined()) g = std::move(r);
  }
  if (!meta.grad.defined()) {
    if (GradMode::is_enabled()) {
      meta.grad = g;  // create_graph: keep the history for double backward
    } else {
      // Keep the buffer only when nobody else can see it; later in-place updates of .grad must
      // not write into a tensor the user still holds.
      const bool exclusive = g.use_count() == 1 && g.storage()->use_count() == 1 && !g.impl()->autograd;
      meta.grad = exclusive ? g : g.detach().clone();
    }
  } else if (GradMode::is_enabled() || meta.grad.requires_grad() || !meta.grad.is_contiguous()) {
    // create_graph, a .grad with history, or one whose elements may share memory (a broadcast
    // gradient kept from the first backward has stride 0): a new tensor.
    meta.grad = add(meta.grad, g);
  } else {
    // In place, as PyTorch accumulates: .grad keeps its storage, so a .grad that is a view into a
    // flat buffer (DDP's buckets) stays one.
    add_(meta.grad, g);
  }
  for (const auto& hook : meta.post_accumulate_grad_hooks) hook(variable_);
  return {};
}

}  // namespace ember::autograd
