// eval_cuda of the loss-scaling primitives: the gradients are packed by dtype into TensorLists here,
// kernels in cuda/amp.cu. Scalars stay in device memory: nothing here waits for the device.
#include "cuda/amp.h"
#include "cuda/context.h"
#include "optim/amp/primitives.h"

namespace ember {

void AmpUnscale::eval_cuda(const std::vector<Tensor>& in, std::vector<Tensor>& out) {
  cuda::DeviceGuard guard(out[0].device());
  std::map<DType, std::vector<cuda::ListEntry>> entries;
  for (size_t i = 1; i < out.size(); ++i) {
    cuda::ListEntry e;
    e.data[0] = out[i].raw_data();
    e.numel = out[i].numel();
    entries[out[i].dtype()].push_back(e);
  }
  const auto* inv_scale = static_cast<const float*>(in[0].raw_data());
  auto* found_inf = static_cast<float*>(out[0].raw_data());
  const cudaStream_t stream = cuda::current_stream();
  cuda::for_each_list(entries, [&](DType dtype, const cuda::TensorList& list) {
    cuda::launch_amp_unscale(dtype, list, inv_scale, found_inf, stream);
  });
}

void FirstNonFinite::eval_cuda(const std::vector<Tensor>& in, std::vector<Tensor>& out) {
  cuda::DeviceGuard guard(out[0].device());
  std::map<DType, std::vector<cuda::ListEntry>> entries;
  for (const Tensor& x : in) {
    cuda::ListEntry e;
    e.data[0] = x.raw_data();
    e.numel = x.numel();
    entries[x.dtype()].push_back(e);
  }
  auto* first = static_cast<int32_t*>(out[0].raw_data());
  const cudaStream_t stream = cuda::current_stream();
  cuda::for_each_list(entries, [&](DType dtype, const cuda::TensorList& list) {
    cuda::launch_first_nonfinite(dtype, list, slot_, first, stream);
  });
}

void MasterCopyBack::eval_cuda(const std::vector<Tensor>& in, std::vector<Tensor>& out) {
  cuda::DeviceGuard guard(in[0].device());
  std::map<DType, std::vector<cuda::ListEntry>> entries;
  int64_t first = 0;
  for (size_t t = 0; t < out.size(); ++t) {
    cuda::ListEntry e;
    e.data[0] = in[t + 1].raw_data();
    e.data[1] = out[t].raw_data();
    e.numel = out[t].numel();
    e.first_element = first;
    first += e.numel;
    entries[out[t].dtype()].push_back(e);
  }
  const auto* found_inf = static_cast<const float*>(in[0].raw_data());
  const cudaStream_t stream = cuda::current_stream();
  cuda::for_each_list(entries, [&](DType dtype, const cuda::TensorList& list) {
    cuda::launch_master_copy_back(dtype, list, found_inf, rule_, stream);
  });
}

void GradScaleUpdate::eval_cuda(const std::vector<Tensor>& in, std::vector<Tensor>& out) {
  cuda::DeviceGuard guard(out[0].device());
  cuda::launch_grad_scale_update(static_cast<float*>(out[0].raw_data()), static_cast<int32_t*>(out[1].raw_data()),
                                 static_cast<const float*>(in[0].raw_data()), rule_, cuda::current_stream());
}

void LossScaleUpdate::eval_cuda(const std::vector<Tensor>& in, std::vector<Tensor>& out) {
  cuda::DeviceGuard guard(out[0].device());
  cuda::launch_loss_scale_update(static_cast<float*>(out[0].raw_data()),
                                 static_cast<amp::LossScalerCounters*>(out[1].raw_data()),
                                 static_cast<const float*>(in[0].raw_data()), rule_, cuda::current_stream());
}

}  // namespace ember
