// What the data-parallel wrappers (DistributedDataParallel, ZeroPartition) share besides their
// Reducer (dist/reducer.h): starting every rank from rank 0's state.
#pragma once

#include <vector>

#include "dist/process_group.h"

namespace ember::dist {

// Broadcasts tensors from rank 0 in place, with one collective per dtype and device: each group is
// packed into one flat buffer, broadcast, and unpacked.
void broadcast_coalesced(ProcessGroup& group, const std::vector<Tensor>& tensors);

}  // namespace ember::dist
