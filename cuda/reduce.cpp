// eval_cuda of the reductions, softmax and the cumulative sum: the input is seen as (outer, len, inner)
// by the layout of tensor/reduction_layout.h, then cuda/reduce.cu folds (or scans) len.
#include "tensor/reduction_layout.h"
#include "cuda/host.h"
#include "tensor/primitives/linalg.h"
#include "tensor/primitives/reduce.h"
#include "tensor/primitives/scan.h"

namespace ember {

namespace {
// reduction_layout only permutes and copies with public ops, so it serves CUDA tensors too.
void reduce(cuda::ReduceKind kind, const Tensor& x, const Shape& dims, const Tensor& out) {
  cuda::DeviceGuard guard(out.device());
  const ReductionLayout l = reduction_layout(x, dims);
  const cuda::ReducePlan plan = cuda::plan_reduce(l.outer, l.len, l.inner);
  // The splits' partials, freed in stream order after the kernels.
  const size_t bytes = cuda::reduce_workspace_bytes(plan, l.outer, l.inner);
  const Tensor workspace =
      bytes ? Tensor::empty({static_cast<int64_t>(bytes)}, TensorOptions(DType::u8).with_device(out.device())) : Tensor();
  cuda::launch_reduce(kind, x.dtype(), out.dtype(), l.data.raw_data(), out.raw_data(), l.outer, l.len, l.inner, plan,
                      bytes ? workspace.raw_data() : nullptr, cuda::current_stream());
}

void expect_dtype(const char* op, const Tensor& out, DType expected) {
  if (out.dtype() != expected)
    throw DTypeError(std::string(op) + " on CUDA: output dtype " + dtype_name(out.dtype()) + ", kernel writes " +
                     dtype_name(expected));
}
}  // namespace

void Sum::eval_cuda(const std::vector<Tensor>& in, std::vector<Tensor>& out) {
  expect_dtype(name(), out[0], dtype_.value_or(is_floating(in[0].dtype()) ? in[0].dtype() : DType::i64));
  reduce(cuda::ReduceKind::sum, in[0], dims_, out[0]);
}

void Prod::eval_cuda(const std::vector<Tensor>& in, std::vector<Tensor>& out) {
  expect_dtype(name(), out[0], dtype_.value_or(is_floating(in[0].dtype()) ? in[0].dtype() : DType::i64));
  reduce(cuda::ReduceKind::prod, in[0], dims_, out[0]);
}

void Extremum::eval_cuda(const std::vector<Tensor>& in, std::vector<Tensor>& out) {
  expect_dtype(name(), out[0], in[0].dtype());
  reduce(is_max_ ? cuda::ReduceKind::max : cuda::ReduceKind::min, in[0], dims_, out[0]);
}

void ArgExtremum::eval_cuda(const std::vector<Tensor>& in, std::vector<Tensor>& out) {
  expect_dtype(name(), out[0], DType::i64);
  const Shape dims = in[0].dim() == 0 ? Shape{} : Shape{dim_};
  reduce(is_max_ ? cuda::ReduceKind::argmax : cuda::ReduceKind::argmin, in[0], dims, out[0]);
}

void Softmax::eval_cuda(const std::vector<Tensor>& in, std::vector<Tensor>& out) {
  cuda::DeviceGuard guard(out[0].device());
  const ReductionLayout l = dim_layout(in[0], dim_);  // out has the same (contiguous) layout
  cuda::launch_softmax(in[0].dtype(), log_, l.data.raw_data(), out[0].raw_data(), l.outer, l.len, l.inner,
                       cuda::current_stream());
}

void CumulativeSum::eval_cuda(const std::vector<Tensor>& in, std::vector<Tensor>& out) {
  cuda::DeviceGuard guard(out[0].device());
  const ReductionLayout l = dim_layout(in[0], dim_);  // out has the same (contiguous) layout
  cuda::launch_cumsum(in[0].dtype(), reverse_, l.data.raw_data(), out[0].raw_data(), l.outer, l.len, l.inner,
                      cuda::current_stream());
}

}  // namespace ember
