// Multi-tensor launches (the design of PyTorch's multi_tensor_apply, written anew): up to
// TensorList::kMaxTensors tensors of one dtype per launch, their pointers passed by value as a kernel
// argument, one block per kChunk elements. Host side; the device side is cuda/multi_tensor.cuh.
#pragma once

#include <array>
#include <climits>
#include <cstdint>
#include <map>
#include <vector>

#include "optim/step_math.h"
#include "tensor/dtype.h"

namespace ember::cuda {

// Elements per block of a multi-tensor kernel: the CPU kernels' chunk, so sums split alike.
inline constexpr int64_t kChunk = optim::kStepChunk;

// The tensors of one launch, passed by value as a kernel argument (under the 4 KiB every CUDA
// version accepts), so that a launch needs no host-to-device copy of its table. Block b works on
// chunk b - first_chunk[t] of tensor t, where first_chunk[t] <= b < first_chunk[t + 1].
struct TensorList {
  static constexpr int kMaxTensors = 40;
  static constexpr int kMaxOperands = 5;  // Adam with amsgrad: p, grad, exp_avg, exp_avg_sq, max_exp_avg_sq
  void* data[kMaxTensors][kMaxOperands];
  double* step[kMaxTensors];  // the step counts (0-dim f64), null where the optimizer keeps none
  int64_t numel[kMaxTensors];
  int64_t first_element[kMaxTensors];  // the tensor's offset among all of the call's (random streams)
  int32_t first_chunk[kMaxTensors + 1];
  int count;
  int32_t chunks() const { return first_chunk[count]; }
};
static_assert(sizeof(TensorList) + 256 < 4096, "TensorList must fit in a kernel's parameters");

// One tensor of a list: its operands' data (null where absent), its step count, its size.
struct ListEntry {
  std::array<void*, TensorList::kMaxOperands> data{};
  double* step = nullptr;
  int64_t numel = 0;
  int64_t first_element = 0;
};

// Calls launch(dtype, list) for lists covering `entries`, each holding tensors of one dtype.
template <class F>
void for_each_list(const std::map<DType, std::vector<ListEntry>>& entries, F&& launch) {
  for (const auto& [dtype, list_entries] : entries) {
    TensorList l{};
    for (const ListEntry& e : list_entries) {
      const int64_t chunks = (e.numel + kChunk - 1) / kChunk;
      if (l.count == TensorList::kMaxTensors || int64_t{l.chunks()} + chunks > INT32_MAX) {
        launch(dtype, l);
        l = TensorList{};
      }
      const int t = l.count++;
      for (int k = 0; k < TensorList::kMaxOperands; ++k) l.data[t][k] = e.data[static_cast<size_t>(k)];
      l.step[t] = e.step;
      l.numel[t] = e.numel;
      l.first_element[t] = e.first_element;
      l.first_chunk[t + 1] = static_cast<int32_t>(l.first_chunk[t] + chunks);
    }
    if (l.count > 0) launch(dtype, l);
  }
}

}  // namespace ember::cuda
