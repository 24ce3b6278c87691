#include "autograd/accumulate_grad.h"

#include "autograd/grad_mode.h"
#include "tensor/layout.h"
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
      // .grad is laid out as its variable (PyTorch's layout contract for gradients): a broadcast
      // gradient (stride 0) or a transposed one becomes a dense copy, which the optimizers' and the
      // scaler's multi-tensor kernels need.
      const bool channels_last = is_channels_last(variable_);
      if (channels_last ? !is_channels_last(g) : !g.is_contiguous())
        g = channels_last ? to_channels_last(g) : g.contiguous();
      // Keep the buffer only when nobody else can see it; later in-place updates of .grad must
      // not write into a tensor the user still holds.
      const bool exclusive = g.use_count() == 1 && g.storage()->use_count() == 1 && !g.impl()->autograd;
      meta.grad = exclusive ? g : g.detach().clone();
    }
  } else if (GradMode::is_enabled() || meta.grad.requires_grad() || !meta.grad.is_contiguous()) {
    // create_graph, a .grad with history, or one not laid out densely in row-major order (a
    // channels-last one, or a broadcast tensor the user assigned to .grad): a new tensor.
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
