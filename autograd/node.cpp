#include "autograd/node.h"

#include <atomic>

#include "autograd/accumulate_grad.h"
#include "tensor/nvtx.h"

namespace ember::autograd {

namespace {
std::atomic<uint64_t> sequence_counter{0};
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

}  // namespace ember::autograd
