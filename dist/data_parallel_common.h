// What the data-parallel wrappers (DistributedDataParallel, ZeroPartition) share: starting every
// rank from rank 0's state, and finding the parameters a forward pass did not use.
#pragma once

#include <unordered_set>
#include <vector>

#include "dist/process_group.h"

namespace ember::dist {

// Broadcasts tensors from rank 0 in place, with one collective per dtype and device: each group is
// packed into one flat buffer, broadcast, and unpacked.
void broadcast_coalesced(ProcessGroup& group, const std::vector<Tensor>& tensors);

// The leaves (parameters) whose gradient backward from `output` would reach: a walk of its graph.
std::unordered_set<const TensorImpl*> leaves_reached(const Tensor& output);

}  // namespace ember::dist
