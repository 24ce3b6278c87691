// The stand-in for the NCCL backend in a build without CUDA or NCCL: CUDA process groups raise.
#include "dist/nccl_process_group.h"

namespace ember::dist {

bool has_nccl() { return false; }

std::shared_ptr<ProcessGroup> make_nccl_process_group(std::shared_ptr<Store>, int, int, const NcclOptions&) {
  throw NotImplementedError(
      "dist: this ember was built without NCCL, which process groups of CUDA tensors need: build with the CUDA "
      "toolkit's NCCL (nccl.h and libnccl.so beside cuBLAS) or the nvidia-nccl wheel (-Dnccl-root); meson "
      "option -Dnccl=enabled makes its absence an error");
}

}  // namespace ember::dist
