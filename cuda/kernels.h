// The launchers of ember's CUDA kernels: plain arguments in (pointers, sizes, strides, dtypes),
// one kernel launch and its check out. Host logic (shapes, broadcasting, dtype rules) stays in the
// eval_cuda definitions of cuda/*.cpp; the kernels live in cuda/*.cu, each template instantiated
// once there. Every launcher runs on the given stream of the current device.
#pragma once

#include <cstdint>

#include <cuda_runtime_api.h>

#include "cuda/context.h"
#include "cuda/launch_config.h"
#include "tensor/dtype.h"
#include "tensor/elementwise_ops.h"
#include "tensor/philox.h"

namespace ember::cuda {

inline constexpr int kMaxDims = 16;  // = ember::kMaxDims (checked in cuda/elementwise.cpp)

// N operands walked together over one (coalesced) shape: operand 0 is the output.
template <int N>
struct Strided {
  char* data[N];
  int64_t strides[N][kMaxDims];  // bytes
  int64_t sizes[kMaxDims];
  int nd = 0;
  int64_t numel = 0;
};

// ---- elementwise (cuda/unary.cu, cuda/binary.cu, cuda/copy.cu)
template <class Op>
void launch_unary(const Op& op, DType dtype, const Strided<2>& a, cudaStream_t stream);
// Operands {out, a, b} of dtypes a and b: one dtype, or f16/bf16 with a 0-dim f32 scalar (stride 0).
template <class Op>
void launch_binary(DType a, DType b, const Strided<3>& s, cudaStream_t stream);
// out = condition ? a : b; operands {out, condition (bool), a, b}, a and b of `dtype`.
void launch_where(DType dtype, const Strided<4>& a, cudaStream_t stream);
// out = convert(in) for any dtype pair; operands {out, in}.
void launch_convert(DType out, DType in, const Strided<2>& a, cudaStream_t stream);
// Every element of operand 0 = the value (taken as a double or an integer, converted to dtype).
void launch_fill(DType dtype, bool is_floating, double dvalue, int64_t ivalue, const Strided<1>& a,
                 cudaStream_t stream);

// ---- random (cuda/random.cu): the Philox mapping of cpu/random.cpp. kind: 0 uniform, 1 normal,
// 2 integer in [low, high).
void launch_random(DType dtype, int kind, philox::Counter counter, int64_t low, int64_t high, void* out, int64_t n,
                   cudaStream_t stream);

// ---- reductions (cuda/reduce.cu) over the (outer, len, inner) layout of tensor/reduction_layout.h: output
// (o, i), stored at o * inner + i, folds x[(o * len + r) * inner + i] for r < len.
enum class ReduceKind { sum, prod, max, min, argmax, argmin };
// x of `dtype`, y of `out`: sum/prod write the input dtype or a wider float (floats) or i64
// (integers, bool); max/min the input dtype; argmax/argmin i64 (first occurrence, NaN counts as the
// extreme).
// launch_reduce's cut of len for the current device (cuda/launch_config.h).
ReducePlan plan_reduce(int64_t outer, int64_t len, int64_t inner);
// The largest accumulator of a partial: an index beside a double (argmax of f64).
constexpr size_t kReducePartialBytes = 16;
// Bytes of device workspace launch_reduce needs for `plan` (none for one split).
inline size_t reduce_workspace_bytes(const ReducePlan& plan, int64_t outer, int64_t inner) {
  return plan.splits > 1 ? static_cast<size_t>(plan.splits * outer * inner) * kReducePartialBytes : 0;
}
void launch_reduce(ReduceKind kind, DType dtype, DType out, const void* x, void* y, int64_t outer, int64_t len,
                   int64_t inner, const ReducePlan& plan, void* workspace, cudaStream_t stream);
// softmax / log_softmax along len, computed max-shifted in float (double for f64); y has x's layout.
void launch_softmax(DType dtype, bool log, const void* x, void* y, int64_t outer, int64_t len, int64_t inner,
                    cudaStream_t stream);
// The inclusive cumulative sum along len (reverse: from the end), in float for f32 and the 16-bit
// types, double for f64, int64 (wrapping) for integers; y has x's layout.
void launch_cumsum(DType dtype, bool reverse, const void* x, void* y, int64_t outer, int64_t len, int64_t inner,
                   cudaStream_t stream);

// ---- indexing (cuda/index.cu). One walk over `sizes`: `direct` is addressed with its strides,
// `indexed` with its strides except along `dim`, where index[...] (read with index strides, zero
// where a 1-D index does not vary) chooses the position. Indices outside [0, bound) are skipped and
// reported through `errors` (raised as IndexError at the next synchronisation).
struct IndexWalk {
  int nd = 0;
  int dim = 0;
  int64_t sizes[kMaxDims];
  int64_t direct_strides[kMaxDims];   // elements
  int64_t indexed_strides[kMaxDims];  // elements
  int64_t index_strides[kMaxDims];    // elements
  int64_t bound = 0;
  int64_t numel = 0;
  KernelOp op = kGather;
  KernelErrorSlot* errors = nullptr;
};
// direct = indexed[index]: gather and index_select.
void launch_index_gather(DType dtype, DType index_dtype, void* direct, const void* indexed, const void* index,
                         const IndexWalk& w, cudaStream_t stream);
// indexed[index] += direct: scatter_add and index_add. With atomics; floating types with `in_order`
// (deterministic mode) without, each output's additions in the order of dim. u8 and bool raise
// NotImplementedError.
void launch_index_scatter_add(DType dtype, DType index_dtype, const void* direct, void* indexed, const void* index,
                              const IndexWalk& w, bool in_order, cudaStream_t stream);

}  // namespace ember::cuda
