/// @file
/// The NCCL backend: a ProcessGroup for CUDA tensors of one GPU per rank, over the NCCL of the CUDA
/// toolkit (or the nvidia-nccl wheel), rendezvousing through an ember Store. Built only where CUDA
/// and NCCL were found (Meson option `nccl`).
///
/// How it runs (as PyTorch's ProcessGroupNCCL):
/// - Every operation is queued on the group's own CUDA stream, after the work the calling thread had
///   queued on its current stream when it issued the operation (an event orders the two), and
///   returns at once. Staging copies (non-contiguous tensors, 16-bit sums widened to f32) run on the
///   group's stream too.
/// - Work::wait() blocks the host until the operation finished on the GPU (PyTorch's blocking wait)
///   and raises its failure; is_completed() asks without blocking. The tensors stay referenced until
///   then, so memory an operation still reads or writes is never reused.
/// - Fail fast: the communicator is non-blocking, so forming it and every operation are bounded by
///   the group's timeout (or the call's). A timeout, or an error NCCL reports
///   (ncclCommGetAsyncError), aborts the communicator (ncclCommAbort) and raises DistributedError
///   naming the rank, the operation and the peers that did not answer; the group is then broken.
/// - NCCL has no tags: transfers between two ranks match in the order they were posted, whatever
///   their tag. A send and a receive that wait for each other belong in one batch_isend_irecv.
/// - All-reduce and reduce-scatter of 16-bit floats sum in f32 and round once, as with Gloo;
///   all_gather, broadcast and transfers move the bytes as they are.
#pragma once

#include <memory>

#include "dist/process_group.h"

namespace ember::dist {

/// The NCCL backend's settings.
struct NcclOptions {
  int device = 0;                          ///< the CUDA device of this rank's tensors
  milliseconds timeout = kDefaultTimeout;  ///< forming the communicator and each operation, unless a call overrides it
  bool debug = false;                      ///< check every collective's signature through the store
};

/// Whether this ember was built with NCCL (otherwise make_nccl_process_group raises).
bool has_nccl();

/// Forms the communicator of the size ranks (each calls it with its rank and a store reaching the
/// same keys). Raises NotImplementedError when ember was built without NCCL, DeviceError when the
/// device does not exist, DistributedError naming the ranks that did not join within the timeout.
std::shared_ptr<ProcessGroup> make_nccl_process_group(std::shared_ptr<Store> store, int rank, int size,
                                                      const NcclOptions& options = {});

}  // namespace ember::dist
