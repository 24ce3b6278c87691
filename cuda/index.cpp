// eval_cuda of cat and the indexing primitives: the walks of cuda/kernels.h are set up here,
// kernels in cuda/index.cu.
#include "autograd/grad_mode.h"
#include "cuda/host.h"
#include "tensor/ops.h"
#include "tensor/primitives/index.h"

namespace ember {

namespace {

// A walk over `shape`. Rank 0 becomes rank 1 of size 1 (every stride 0), so dim 0 always exists.
cuda::IndexWalk make_walk(cuda::KernelOp op, int dim, const Shape& shape, const Tensor& direct, const Tensor& indexed,
                          const Tensor& index, bool index_is_1d) {
  if (direct.dim() != shape.size() || indexed.dim() != shape.size() || (!index_is_1d && index.dim() != shape.size()))
    throw ShapeError("CUDA indexing kernel: operands of ranks " + std::to_string(direct.dim()) + ", " +
                     std::to_string(indexed.dim()) + " and index " + std::to_string(index.dim()) +
                     " for a walk of rank " + std::to_string(shape.size()));
  cuda::IndexWalk w;
  w.op = op;
  w.dim = dim;
  w.numel = numel(shape);
  w.errors = cuda::kernel_error_slot();
  if (shape.size() == 0) {
    w.nd = 1;
    w.sizes[0] = 1;
    w.direct_strides[0] = w.indexed_strides[0] = w.index_strides[0] = 0;
    w.bound = 1;
    return w;
  }
  w.nd = shape.size();
  for (int d = 0; d < w.nd; ++d) {
    w.sizes[d] = shape[d];
    w.direct_strides[d] = direct.stride(d);
    w.indexed_strides[d] = indexed.stride(d);
    w.index_strides[d] = index_is_1d ? (d == dim && index.dim() == 1 ? index.stride(0) : 0) : index.stride(d);
  }
  w.bound = indexed.size(dim);
  return w;
}

}  // namespace

void Cat::eval_cuda(const std::vector<Tensor>& in, std::vector<Tensor>& out) {
  NoGradGuard no_grad;
  cuda::DeviceGuard guard(out[0].device());
  int64_t offset = 0;
  for (const Tensor& t : in) {
    if (t.dim() != out[0].dim()) continue;  // an empty 1-D tensor, which cat skips
    const int64_t len = t.size(dim_);
    if (len == 0) continue;
    cuda::convert_into(narrow(out[0], dim_, offset, len), t);
    offset += len;
  }
}

void IndexSelect::eval_cuda(const std::vector<Tensor>& in, std::vector<Tensor>& out) {
  cuda::DeviceGuard guard(out[0].device());
  const Tensor &x = in[0], &index = in[1];
  const cuda::IndexWalk w = make_walk(cuda::kIndexSelect, dim_, out[0].shape(), out[0], x, index, true);
  cuda::launch_index_gather(x.dtype(), index.dtype(), out[0].raw_data(), x.raw_data(), index.raw_data(), w,
                            cuda::current_stream());
}

void IndexAdd::eval_cuda(const std::vector<Tensor>& in, std::vector<Tensor>& out) {
  cuda::DeviceGuard guard(out[0].device());
  const Tensor &self = in[0], &index = in[1], &src = in[2];
  cuda::convert_into(out[0], self);
  const cuda::IndexWalk w = make_walk(cuda::kIndexAdd, dim_, src.shape(), src, out[0], index, true);
  cuda::launch_index_scatter_add(out[0].dtype(), index.dtype(), src.raw_data(), out[0].raw_data(), index.raw_data(),
                                 w, is_deterministic(), cuda::current_stream());
}

void Gather::eval_cuda(const std::vector<Tensor>& in, std::vector<Tensor>& out) {
  cuda::DeviceGuard guard(out[0].device());
  const Tensor &x = in[0], &index = in[1];
  const cuda::IndexWalk w = make_walk(cuda::kGather, dim_, index.shape(), out[0], x, index, false);
  cuda::launch_index_gather(x.dtype(), index.dtype(), out[0].raw_data(), x.raw_data(), index.raw_data(), w,
                            cuda::current_stream());
}

void ScatterAdd::eval_cuda(const std::vector<Tensor>& in, std::vector<Tensor>& out) {
  cuda::DeviceGuard guard(out[0].device());
  const Tensor &self = in[0], &index = in[1], &src = in[2];
  cuda::convert_into(out[0], self);
  const cuda::IndexWalk w = make_walk(cuda::kScatterAdd, dim_, index.shape(), src, out[0], index, false);
  cuda::launch_index_scatter_add(out[0].dtype(), index.dtype(), src.raw_data(), out[0].raw_data(), index.raw_data(),
                                 w, is_deterministic(), cuda::current_stream());
}

}  // namespace ember
