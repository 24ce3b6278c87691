// Kernels of Binary<Op>: arithmetic ops keep the dtype, comparisons write bool.
#include "cuda/loops.cuh"
#include "tensor/convert.h"

namespace ember::cuda {

namespace {

template <class T, class Op>
struct BinaryFn {
  using Operands = OperandList<std::conditional_t<BinaryTraits<Op>::kind == BinaryKind::Compare, bool, T>, T, T>;
  __device__ void operator()(char* const* p) const {
    using C = compute_t<T>;
    const C x = static_cast<C>(at<T>(p[1])), y = static_cast<C>(at<T>(p[2]));
    if constexpr (BinaryTraits<Op>::kind == BinaryKind::Compare)
      at<bool>(p[0]) = Op{}(x, y);
    else
      at<T>(p[0]) = convert<T>(Op{}(x, y));
  }
};

}  // namespace

template <class Op>
void launch_binary(DType dtype, const Strided<3>& a, cudaStream_t stream) {
  visit(dtype, [&]<class T>() {
    if constexpr (BinaryTraits<Op>::kind == BinaryKind::Compare || !std::is_same_v<T, bool>)
      launch_elementwise(a, BinaryFn<T, Op>{}, stream);
    else
      unsupported("binary op", dtype);
  });
}

#define EMBER_INSTANTIATE(F, ...) template void launch_binary<ew::F>(DType, const Strided<3>&, cudaStream_t);
EMBER_BINARY_OPS(EMBER_INSTANTIATE)
#undef EMBER_INSTANTIATE

}  // namespace ember::cuda
