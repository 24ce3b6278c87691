// eval_cuda of SortRows: the whole rows sorted on the device (cuda/sort.cu), then the first k
// columns of each row copied out when k is smaller.
#include <limits>

#include "cuda/context.h"
#include "cuda/error.h"
#include "cuda/sort.h"
#include "tensor/ops.h"
#include "tensor/primitives/sort.h"

namespace ember {

void SortRows::eval_cuda(const std::vector<Tensor>& in, std::vector<Tensor>& out) {
  const int64_t rows = in[0].size(0), n = in[0].size(1);
  if (rows == 0 || k_ == 0) return;
  if (rows * n > std::numeric_limits<int>::max())
    throw NotImplementedError("sort: " + std::to_string(rows * n) + " elements on a GPU; CUB's segmented sort takes up to " +
                              std::to_string(std::numeric_limits<int>::max()));
  cuda::DeviceGuard guard(out[0].device());
  const TensorOptions bytes_on_device = TensorOptions(DType::u8).with_device(out[0].device());
  const size_t workspace_bytes = cuda::sort_rows_workspace_bytes(rows, n);
  const Tensor workspace = Tensor::empty({static_cast<int64_t>(workspace_bytes)}, bytes_on_device);
  const Tensor whole = k_ == n ? out[0] : Tensor::empty({rows, n}, TensorOptions(DType::i64).with_device(out[0].device()));
  const cudaStream_t stream = cuda::current_stream();
  cuda::launch_sort_rows(in[0].dtype(), in[0].raw_data(), rows, n, descending_, whole.data<int64_t>(),
                         workspace.raw_data(), workspace_bytes, stream);
  if (k_ < n)
    EMBER_CUDA_CHECK(cudaMemcpy2DAsync(out[0].raw_data(), k_ * sizeof(int64_t), whole.raw_data(), n * sizeof(int64_t),
                                       k_ * sizeof(int64_t), rows, cudaMemcpyDeviceToDevice, stream));
}

}  // namespace ember
