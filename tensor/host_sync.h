/// @file
/// A debug counter of the points where the host waits for tensor values, so that tests can assert
/// that a training step queues its work without stalling on the device.
#pragma once

#include <cstdint>
#include <vector>

#include "tensor/tensor.h"

namespace ember {

/// How many times the host has waited for the device since the process started: every blocking
/// copy to or from a GPU and every stream synchronisation the CUDA backend makes. Reading a CPU
/// tensor's values (item(), to_vector()) counts too, because on a GPU the same call would wait: a
/// test on the CPU then checks the same code path a GPU run takes.
int64_t host_sync_count();

/// Called where such a wait happens; `what` names it ("cuda::synchronize"). Inside a captured step
/// (tensor/capture.h) it raises CaptureError instead, naming `what` and the running primitive.
void count_host_sync(const char* what);

namespace detail {
// The values of a tensor a CPU kernel reads (it is on the CPU already: nothing waits, nothing is
// counted), converted to T.
template <class T>
std::vector<T> cpu_values(const Tensor& t);
}  // namespace detail

}  // namespace ember
