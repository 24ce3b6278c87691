// Reducer: the bookkeeping of gradient reduction during a backward that DistributedDataParallel and
// ZeroPartition share (PyTorch's c10d calls its own the Reducer). Parameters are grouped into
// buckets (DDP's buckets, ZeRO's units) whose reductions launch in a fixed order, the same on every
// rank:
// - each parameter's gradient is marked ready once per backward (its post-accumulate-grad hook,
//   or at forward for parameters the graph does not reach, with find_unused_parameters);
// - a bucket launches once all its parameters are ready and every bucket before it has launched,
//   whatever order the gradients arrive in;
// - the first gradient of a backward queues the owner's end-of-backward callback, which calls
//   finish(): every reduction waited for, the parameters that got no gradient named, and the
//   state made ready for the next backward.
// What a launch does (an all-reduce of a bucket, a reduce-scatter of a unit) is the owner's.
#pragma once

#include <cstddef>
#include <exception>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "dist/comm_thread.h"
#include "tensor/tensor.h"

namespace ember::dist {

class Reducer {
 public:
  // `params`: the parameters with their dotted names; `bucket_of[i]`: parameter i's bucket, buckets
  // numbered in launch order. `filled(b)` (may be empty) runs when bucket b's last gradient is in,
  // `launch(b)` when its turn comes; launch posts the reduction on comm().
  Reducer(std::vector<std::pair<std::string, Tensor>> params, std::vector<size_t> bucket_of,
          std::function<void(size_t)> launch, std::function<void(size_t)> filled = {});

  CommThread& comm() { return comm_; }  // where reductions (and ZeRO's gathers) run, in order
  bool& sync() { return sync_; }        // false under no_sync(): the flag dist::NoSync turns off

  // A gradient arrived: the first of a backward queues `at_end` as an autograd callback.
  void begin(const std::function<void()>& at_end);
  bool in_backward() const { return started_; }
  // Parameter i's gradient is complete in this backward (once; later calls do nothing).
  void mark_ready(size_t i);
  // find_unused_parameters: every parameter the graph of `output` does not reach is ready now.
  void mark_unused(const Tensor& output);
  // Before a forward that will be differentiated: no parameter ready, no bucket launched. A backward
  // that failed midway left reductions in flight: they finish here (its failure was raised already).
  void prepare();

  // What a backward's reductions came to.
  struct Outcome {
    std::exception_ptr failure;  // the first a reduction raised
    std::string unready;         // the parameters that got no gradient, comma-separated
    // Rethrows the failure, or raises ValueError naming the unready parameters, `who` first
    // ("DistributedDataParallel: rank 0") and `buckets` what was never reduced ("buckets").
    void raise(const std::string& who, const char* buckets) const;
  };
  // The end of a backward: waits for every posted reduction, notes which parameters got no gradient
  // and makes the state ready for the next backward (even one without a forward: retain_graph).
  Outcome finish();

 private:
  void reset();

  std::vector<std::pair<std::string, Tensor>> params_;
  std::vector<size_t> bucket_of_;
  std::function<void(size_t)> launch_, filled_;
  std::vector<size_t> bucket_size_;  // parameters per bucket
  std::vector<size_t> pending_;      // per bucket: gradients yet to come in this backward
  std::vector<bool> ready_;
  size_t next_launch_ = 0;
  bool started_ = false;  // the end-of-backward callback is queued
  bool sync_ = true;
  CommThread comm_;  // last: its thread ends, finishing the posted jobs, before the rest goes
};

}  // namespace ember::dist
