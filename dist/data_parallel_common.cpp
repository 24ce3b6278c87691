#include "dist/data_parallel_common.h"

#include <map>
#include <string>

#include "autograd/accumulate_grad.h"
#include "autograd/grad_mode.h"
#include "autograd/node.h"
#include "tensor/ops.h"

namespace ember::dist {

void broadcast_coalesced(ProcessGroup& group, const std::vector<Tensor>& tensors) {
  autograd::NoGradGuard no_grad;
  std::map<std::pair<DType, std::string>, std::vector<Tensor>> groups;
  for (const Tensor& t : tensors) groups[{t.dtype(), t.device().str()}].push_back(t.detach());
  for (auto& [key, members] : groups) {
    int64_t total = 0;
    for (const Tensor& t : members) total += t.numel();
    Tensor flat = empty({total}, TensorOptions(key.first).with_device(members.front().device()));
    int64_t at = 0;
    for (const Tensor& t : members) {
      Tensor slot = flat.narrow(0, at, t.numel());
      copy_(slot, t.reshape({t.numel()}));
      at += t.numel();
    }
    group.broadcast(flat, 0);
    at = 0;
    for (Tensor t : members) {
      copy_(t, flat.narrow(0, at, t.numel()).view(t.shape()));
      at += t.numel();
    }
  }
}

std::unordered_set<const TensorImpl*> leaves_reached(const Tensor& output) {
  std::unordered_set<const TensorImpl*> reached;
  std::unordered_set<const autograd::Node*> seen;
  std::vector<const autograd::Node*> stack;
  if (output.grad_fn()) stack.push_back(output.grad_fn().get());
  else if (output.requires_grad()) reached.insert(output.impl());
  while (!stack.empty()) {
    const autograd::Node* node = stack.back();
    stack.pop_back();
    if (!seen.insert(node).second) continue;
    if (const auto* leaf = dynamic_cast<const autograd::AccumulateGrad*>(node)) reached.insert(leaf->variable().impl());
    for (const autograd::Edge& e : node->next_edges())
      if (e.valid()) stack.push_back(e.fn.get());
  }
  return reached;
}

}  // namespace ember::dist
