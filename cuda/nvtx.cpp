// tensor/nvtx.h's ranges as NVTX ranges on the calling thread (NVTX3: header-only, it finds the
// profiler's injection library when one runs the process and costs a branch otherwise).
#include <nvtx3/nvToolsExt.h>

#include "tensor/nvtx.h"

namespace ember::nvtx::detail {

void push(const char* name) { nvtxRangePushA(name); }
void pop() { nvtxRangePop(); }

}  // namespace ember::nvtx::detail
