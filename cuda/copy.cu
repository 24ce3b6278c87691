// Kernels of where, dtype conversion (cast, copy_) and fill.
#include "cuda/loops.cuh"
#include "tensor/convert.h"

namespace ember::cuda {

namespace {

template <class T>
struct WhereFn {
  using Operands = OperandList<T, bool, T, T>;
  // Both values read, then one chosen: choosing between the pointers would, on the vector path where
  // they point into a register array, move that array to local memory.
  __device__ void operator()(char* const* p) const {
    const T a = at<T>(p[2]), b = at<T>(p[3]);
    at<T>(p[0]) = at<bool>(p[1]) ? a : b;
  }
};

template <class O, class I>
struct ConvertFn {
  using Operands = OperandList<O, I>;
  __device__ void operator()(char* const* p) const { at<O>(p[0]) = convert<O>(at<I>(p[1])); }
};

template <class T>
struct FillFn {
  using Operands = OperandList<T>;
  T value;
  __device__ void operator()(char* const* p) const { at<T>(p[0]) = value; }
};

}  // namespace

void launch_where(DType dtype, const Strided<4>& a, cudaStream_t stream) {
  visit(dtype, [&]<class T>() { launch_elementwise(a, WhereFn<T>{}, stream); });
}

void launch_convert(DType out, DType in, const Strided<2>& a, cudaStream_t stream) {
  visit(out, [&]<class O>() {
    visit(in, [&]<class I>() { launch_elementwise(a, ConvertFn<O, I>{}, stream); });
  });
}

void launch_fill(DType dtype, bool is_floating, double dvalue, int64_t ivalue, const Strided<1>& a,
                 cudaStream_t stream) {
  visit(dtype, [&]<class T>() {
    const T v = is_floating ? convert<T>(dvalue) : convert<T>(ivalue);
    launch_elementwise(a, FillFn<T>{v}, stream);
  });
}

}  // namespace ember::cuda
