#include "dist/data_parallel_common.h"

#include <map>
#include <string>

#include "autograd/grad_mode.h"
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

}  // namespace ember::dist
