// Kernels of Unary<Op>: the functors of tensor/elementwise_ops.h in float (f16/bf16) or their own type.
#include "cuda/loops.cuh"
#include "tensor/convert.h"

namespace ember::cuda {

namespace {

template <class T, class Op>
struct UnaryFn {
  using Operands = OperandList<T, T>;
  Op op;
  __device__ void operator()(char* const* p) const {
    using C = compute_t<T>;
    at<T>(p[0]) = convert<T>(op(static_cast<C>(at<T>(p[1]))));
  }
};

}  // namespace

template <class Op>
void launch_unary(const Op& op, DType dtype, const Strided<2>& a, cudaStream_t stream) {
  visit(dtype, [&]<class T>() {
    constexpr bool ok = UnaryTraits<Op>::kind == UnaryKind::Floating ? is_float_type_v<T> : !std::is_same_v<T, bool>;
    if constexpr (ok)
      launch_elementwise(a, UnaryFn<T, Op>{op}, stream);
    else
      unsupported("unary op", dtype);
  });
}

#define EMBER_INSTANTIATE(F, ...) template void launch_unary<ew::F>(const ew::F&, DType, const Strided<2>&, cudaStream_t);
EMBER_UNARY_OPS(EMBER_INSTANTIATE)
#undef EMBER_INSTANTIATE

}  // namespace ember::cuda
