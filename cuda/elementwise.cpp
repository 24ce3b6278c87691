// eval_cuda of the elementwise primitives: operands packed here, kernels in cuda/unary.cu,
// cuda/binary.cu and cuda/copy.cu.
#include "cuda/host.h"
#include "tensor/coalesce.h"
#include "tensor/primitives/elementwise.h"

namespace ember {

namespace cuda {

static_assert(kMaxDims == ember::kMaxDims, "cuda/kernels.h and tensor/shape.h disagree on the rank limit");

template <int N>
Strided<N> make_strided(const Tensor& out, const std::array<const Tensor*, N - 1>& inputs) {
  Strided<N> a{};
  const Shape& shape = out.shape();
  std::array<Strides, N> strides;  // bytes
  for (int k = 0; k < N; ++k) {
    const Tensor& t = k == 0 ? out : *inputs[k - 1];
    a.data[k] = static_cast<char*>(t.raw_data());
    strides[k] = broadcast_strides(t.shape(), t.strides(), shape);
    for (auto& x : strides[k]) x *= dtype_size(t.dtype());
  }
  a.numel = out.numel();
  const CoalescedDims<N> c = coalesce<N>(shape, strides);
  const int nd = c.nd;
  for (int d = 0; d < nd; ++d) {
    a.sizes[d] = c.sizes[d];
    for (int k = 0; k < N; ++k) a.strides[k][d] = c.strides[k][d];
  }
  a.nd = nd;
  return a;
}

template Strided<1> make_strided<1>(const Tensor&, const std::array<const Tensor*, 0>&);
template Strided<2> make_strided<2>(const Tensor&, const std::array<const Tensor*, 1>&);
template Strided<3> make_strided<3>(const Tensor&, const std::array<const Tensor*, 2>&);
template Strided<4> make_strided<4>(const Tensor&, const std::array<const Tensor*, 3>&);

void convert_into(const Tensor& dst, const Tensor& src) {
  launch_convert(dst.dtype(), src.dtype(), make_strided<2>(dst, {&src}), current_stream());
}

}  // namespace cuda

namespace {
[[noreturn]] void unsupported(const char* op, DType dt) {
  throw DTypeError(std::string(op) + ": not supported for dtype " + dtype_name(dt));
}
}  // namespace

template <class Op>
void Unary<Op>::eval_cuda(const std::vector<Tensor>& in, std::vector<Tensor>& out) {
  const DType dt = in[0].dtype();
  const bool ok = UnaryTraits<Op>::kind == UnaryKind::Floating ? is_floating(dt) : dt != DType::boolean;
  if (!ok) unsupported(name(), dt);
  cuda::DeviceGuard guard(out[0].device());
  cuda::launch_unary(op_, dt, cuda::make_strided<2>(out[0], {&in[0]}), cuda::current_stream());
}

template <class Op>
void Binary<Op>::eval_cuda(const std::vector<Tensor>& in, std::vector<Tensor>& out) {
  const DType dt = in[0].dtype();
  if (BinaryTraits<Op>::kind == BinaryKind::Arith && dt == DType::boolean) unsupported(name(), dt);
  if (BinaryTraits<Op>::kind == BinaryKind::Floating && !is_floating(dt)) unsupported(name(), dt);
  cuda::DeviceGuard guard(out[0].device());
  cuda::launch_binary<Op>(dt, in[1].dtype(), cuda::make_strided<3>(out[0], {&in[0], &in[1]}), cuda::current_stream());
}

void Where::eval_cuda(const std::vector<Tensor>& in, std::vector<Tensor>& out) {
  cuda::DeviceGuard guard(out[0].device());
  cuda::launch_where(out[0].dtype(), cuda::make_strided<4>(out[0], {&in[0], &in[1], &in[2]}), cuda::current_stream());
}

void Cast::eval_cuda(const std::vector<Tensor>& in, std::vector<Tensor>& out) {
  cuda::DeviceGuard guard(out[0].device());
  cuda::convert_into(out[0], in[0]);
}

void CopyInto::eval_cuda(const std::vector<Tensor>& in, std::vector<Tensor>& out) {
  cuda::DeviceGuard guard(out[0].device());
  cuda::convert_into(out[0], in[1]);
}

void Fill::eval_cuda(const std::vector<Tensor>&, std::vector<Tensor>& out) {
  cuda::DeviceGuard guard(out[0].device());
  cuda::launch_fill(out[0].dtype(), value_.is_floating(), value_.to_double(), value_.is_floating() ? 0 : value_.to_int(),
                    cuda::make_strided<1>(out[0], {}), cuda::current_stream());
}

#define EMBER_INSTANTIATE_UNARY(F, ...) template void Unary<ew::F>::eval_cuda(const std::vector<Tensor>&, std::vector<Tensor>&);
EMBER_UNARY_OPS(EMBER_INSTANTIATE_UNARY)
#undef EMBER_INSTANTIATE_UNARY
#define EMBER_INSTANTIATE_BINARY(F, ...) template void Binary<ew::F>::eval_cuda(const std::vector<Tensor>&, std::vector<Tensor>&);
EMBER_BINARY_OPS(EMBER_INSTANTIATE_BINARY)
#undef EMBER_INSTANTIATE_BINARY

}  // namespace ember
