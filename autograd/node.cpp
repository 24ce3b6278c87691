#include "autograd/node.h"

#include <atomic>
#include <vector>

#include "autograd/accumulate_grad.h"
#include "tensor/nvtx.h"

namespace ember::autograd {

namespace {
std::atomic<uint64_t> sequence_counter{0};
}

Node::~Node() {
  // Take the next nodes this one owns alone; each, before it dies, gives up its own the same way, so
  // no destructor runs inside another (PyTorch frees its graphs so too).
  std::vector<std::shared_ptr<Node>> pending;
  const auto take_owned = [&pending](std::vector<Edge>& edges) {
    for (Edge& e : edges)
      if (e.fn && e.fn.use_count() == 1) pending.push_back(std::move(e.fn));
  };
  take_owned(next_edges_);
  while (!pending.empty()) {
    std::shared_ptr<Node> next = std::move(pending.back());
    pending.pop_back();
    take_owned(next->next_edges_);
  }
}

Node::Node() : sequence_nr_(sequence_counter.fetch_add(1, std::memory_order_relaxed)) {
  if (nvtx::enabled()) module_scope_ = nvtx::current_module();
}

uint64_t next_sequence_nr() { return sequence_counter.load(std::memory_order_relaxed); }

Edge gradient_edge(const Tensor& t) {
  if (!t.defined()) return {};
  if (t.grad_fn()) return {t.grad_fn(), t.output_nr()};
  if (!t.requires_grad()) return {};
  AutogradMeta& meta = t.ensure_autograd_meta();
  auto acc = meta.grad_accumulator.lock();
  if (!acc) {
    acc = std::make_shared<AccumulateGrad>(t);
    meta.grad_accumulator = acc;
  }
  return {acc, 0};
}

Tensor checked_hook_result(const Tensor& grad, Tensor result, const char* where) {
  if (!result.defined()) return result;
  if (!(result.shape() == grad.shape()) || result.dtype() != grad.dtype() || result.device() != grad.device())
    throw AutogradError(std::string(where) + ": a hook returned a gradient of shape " + to_string(result.shape()) + ", " +
                        dtype_name(result.dtype()) + " on " + result.device().str() + " for one of shape " +
                        to_string(grad.shape()) + ", " + dtype_name(grad.dtype()) + " on " + grad.device().str() +
                        "; a hook may change the values only");
  return result;
}

void conform_input_gradients(const Node& node, std::vector<Tensor>& grads, const std::vector<TensorMeta>& input_meta) {
  if (grads.size() != input_meta.size())
    throw AutogradError(std::string("backward of ") + node.name() + " returned " + std::to_string(grads.size()) +
                        " gradients for " + std::to_string(input_meta.size()) + " inputs");
  for (size_t i = 0; i < grads.size(); ++i) {
    if (!grads[i].defined() || !node.next_edges()[i].valid()) {
      grads[i] = Tensor();
      continue;
    }
    const TensorMeta& m = input_meta[i];
    if (!(grads[i].shape() == m.shape))
      throw AutogradError(std::string("backward of ") + node.name() + ": gradient " + std::to_string(i) +
                          " has shape " + to_string(grads[i].shape()) + ", input has " + to_string(m.shape));
    if (grads[i].dtype() != m.dtype) grads[i] = grads[i].to(m.dtype);
  }
}

}  // namespace ember::autograd
