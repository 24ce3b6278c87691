// Kernels of Binary<Op>: arithmetic ops keep the dtype, comparisons write bool; a 16-bit operand may
// come with an f32 scalar (Binary::infer), read as a broadcast operand of its own type.
#include "cuda/loops.cuh"
#include "tensor/convert.h"

namespace ember::cuda {

namespace {

// Operands of types A and B: one dtype T, or a 16-bit T with an f32 scalar on either side.
template <class A, class B, class Op>
struct BinaryFn {
  using T = std::conditional_t<std::is_same_v<A, float>, B, A>;
  using Operands = OperandList<std::conditional_t<BinaryTraits<Op>::kind == BinaryKind::Compare, bool, T>, A, B>;
  __device__ void operator()(char* const* p) const {
    using C = compute_t<T>;
    const C x = static_cast<C>(at<A>(p[1])), y = static_cast<C>(at<B>(p[2]));
    if constexpr (BinaryTraits<Op>::kind == BinaryKind::Compare)
      at<bool>(p[0]) = Op{}(x, y);
    else
      at<T>(p[0]) = convert<T>(Op{}(x, y));
  }
};

}  // namespace

template <class Op>
void launch_binary(DType a, DType b, const Strided<3>& s, cudaStream_t stream) {
  if (a != b) {
    visit(a == DType::f32 ? b : a, [&]<class T>() {
      if constexpr (!is_reduced_float_v<T>)
        unsupported("binary op with a float32 scalar", a == DType::f32 ? b : a);
      else if (a == DType::f32)
        launch_elementwise(s, BinaryFn<float, T, Op>{}, stream);
      else
        launch_elementwise(s, BinaryFn<T, float, Op>{}, stream);
    });
    return;
  }
  visit(a, [&]<class T>() {
    constexpr BinaryKind kind = BinaryTraits<Op>::kind;
    if constexpr (kind == BinaryKind::Compare || (kind == BinaryKind::Floating ? is_float_type_v<T> : !std::is_same_v<T, bool>))
      launch_elementwise(s, BinaryFn<T, T, Op>{}, stream);
    else
      unsupported("binary op", a);
  });
}

#define EMBER_INSTANTIATE(F, ...) template void launch_binary<ew::F>(DType, DType, const Strided<3>&, cudaStream_t);
EMBER_BINARY_OPS(EMBER_INSTANTIATE)
#undef EMBER_INSTANTIATE

}  // namespace ember::cuda
