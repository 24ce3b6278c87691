// eval_cuda of the optimizer step primitives and of the total norm: the tensors are packed by dtype
// into TensorLists here, kernels in cuda/optim.cu. found_inf, grad_scale and lr are passed as device
// pointers, so nothing here reads a device value: a step makes no host synchronisation.
#include <array>
#include <climits>
#include <map>

#include "cuda/context.h"
#include "cuda/optim.h"
#include "optim/primitives/steps.h"
#include "optim/primitives/total_norm.h"

namespace ember {

namespace {

using cuda::for_each_list;
using cuda::ListEntry;
using cuda::TensorList;

// The entries of a step, by dtype: operands {p, grad, state operands 1 .. n_state}, and the step
// count at operand `step_operand` (-1: none).
std::map<DType, std::vector<ListEntry>> step_entries(const StepLayout& l, const std::vector<Tensor>& in,
                                                     const std::vector<Tensor>& out, int n_state, int step_operand) {
  std::map<DType, std::vector<ListEntry>> entries;
  for (int64_t i = 0; i < l.n; ++i) {
    const Tensor& p = l.operand(out, 0, i);
    ListEntry e;
    e.data[0] = p.raw_data();
    e.data[1] = l.grad(in, i).raw_data();
    for (int k = 1; k <= n_state; ++k) e.data[static_cast<size_t>(k + 1)] = l.operand(out, k, i).raw_data();
    if (step_operand >= 0) e.step = static_cast<double*>(l.operand(out, step_operand, i).raw_data());
    e.numel = p.numel();
    entries[p.dtype()].push_back(e);
  }
  return entries;
}

cuda::StepScalars scalars(const StepLayout& l, const std::vector<Tensor>& in) {
  const Tensor* f = l.found_inf(in);
  const Tensor* s = l.grad_scale(in);
  return {f ? static_cast<const float*>(f->raw_data()) : nullptr, s ? static_cast<const float*>(s->raw_data()) : nullptr,
          static_cast<const double*>(l.scheduled(in).raw_data())};
}

}  // namespace

void SGDStep::eval_cuda(const std::vector<Tensor>& in, std::vector<Tensor>& out) {
  cuda::DeviceGuard guard(out[0].device());
  const cudaStream_t stream = cuda::current_stream();
  const cuda::StepScalars s = scalars(l_, in);
  const bool momentum = h_.momentum != 0;
  for_each_list(step_entries(l_, in, out, momentum ? 1 : 0, momentum ? 2 : -1), [&](DType dtype, const TensorList& list) {
    cuda::launch_sgd_step(dtype, list, h_, s, stream);
    if (momentum) cuda::launch_advance_steps(list, s.found_inf, stream);
  });
}

void AdamStep::eval_cuda(const std::vector<Tensor>& in, std::vector<Tensor>& out) {
  cuda::DeviceGuard guard(out[0].device());
  const cudaStream_t stream = cuda::current_stream();
  const cuda::StepScalars s = scalars(l_, in);
  const int n_state = h_.amsgrad ? 3 : 2;
  for_each_list(step_entries(l_, in, out, n_state, n_state + 1), [&](DType dtype, const TensorList& list) {
    cuda::launch_adam_step(dtype, list, h_, s, stream);
    cuda::launch_advance_steps(list, s.found_inf, stream);
  });
}

void LAMBStep::eval_cuda(const std::vector<Tensor>& in, std::vector<Tensor>& out) {
  const Device device = out[0].device();
  cuda::DeviceGuard guard(device);
  const cudaStream_t stream = cuda::current_stream();
  const cuda::StepScalars s = scalars(l_, in);
  for_each_list(step_entries(l_, in, out, 2, 3), [&](DType dtype, const TensorList& list) {
    // Freed in stream order: the pool reuses it only after these kernels.
    const Tensor scratch = Tensor::empty({2 * int64_t{list.chunks()} + list.count}, TensorOptions(DType::f64).with_device(device));
    cuda::launch_lamb_step(dtype, list, h_, s, static_cast<double*>(scratch.raw_data()), stream);
    cuda::launch_advance_steps(list, s.found_inf, stream);
  });
}

void TotalNorm::eval_cuda(const std::vector<Tensor>& in, std::vector<Tensor>& out) {
  const Device device = out[0].device();
  cuda::DeviceGuard guard(device);
  const cudaStream_t stream = cuda::current_stream();
  std::map<DType, std::vector<ListEntry>> entries;
  int64_t chunks = 0;
  for (const Tensor& x : in) {
    ListEntry e;
    e.data[0] = x.raw_data();
    e.numel = x.numel();
    entries[x.dtype()].push_back(e);
    chunks += (e.numel + optim::kStepChunk - 1) / optim::kStepChunk;
  }
  // One partial per chunk of every list, then one combination of them all in order.
  const Tensor partials = Tensor::empty({chunks}, TensorOptions(DType::f64).with_device(device));
  int64_t first = 0;
  for_each_list(entries, [&](DType dtype, const TensorList& list) {
    cuda::launch_norm_partials(dtype, list, norm_type_, static_cast<double*>(partials.raw_data()) + first, stream);
    first += list.chunks();
  });
  cuda::launch_norm_finish(out[0].dtype(), static_cast<const double*>(partials.raw_data()), chunks, norm_type_,
                           out[0].raw_data(), stream);
}

}  // namespace ember
