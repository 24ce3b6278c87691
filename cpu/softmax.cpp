// CPU kernel of softmax / log_softmax: the max along the dim comes from the amax kernel; then
// threads take blocks of adjacent columns (cpu::ColumnBlocks) and make two passes, the sum of
// exp(x - max) and the output. Math is in float for the 16-bit types; sums accumulate in double.
#include <cmath>
#include <type_traits>

#include "autograd/grad_mode.h"
#include "cpu/parallel.h"
#include "cpu/reduce.h"
#include "cpu/simd_math.h"
#include "tensor/convert.h"
#include "tensor/math.h"
#include "tensor/ops.h"
#include "tensor/primitives/linalg.h"

namespace ember {

namespace {

// Softmaxes `lanes` adjacent columns of `len` elements `stride` apart, from x into y (same
// layout), given their maxima. kLanes, when nonzero, fixes the lane count at compile time: for
// rows (1) the running sum then stays in a register.
template <int64_t kLanes, class T>
void softmax_block(const T* x, const T* max, T* y, int64_t len, int64_t stride, int64_t lanes, bool log) {
  using C = compute_t<T>;
  const int64_t n = kLanes ? kLanes : lanes;
  C shift[cpu::kColumnBlock];
  double total[cpu::kColumnBlock];
  C scale[cpu::kColumnBlock];  // 1 / total for softmax, log(total) for log_softmax

  // f32 and f64 softmax keep each exp in y for the last pass; 16-bit types recompute it rather
  // than round it twice. A NaN max makes the whole softmax NaN, as in PyTorch.
  const bool keep_exp = std::is_same_v<T, C> && !log;
  for (int64_t k = 0; k < n; ++k) {
    shift[k] = static_cast<C>(max[k]);
    total[k] = 0;
  }
  for (int64_t r = 0; r < len; ++r)
    for (int64_t k = 0; k < n; ++k) {
      const C e = math::exp(static_cast<C>(x[r * stride + k]) - shift[k]);
      total[k] += e;
      if (keep_exp) y[r * stride + k] = convert<T>(e);
    }
  if (log) {
    for (int64_t k = 0; k < n; ++k) scale[k] = static_cast<C>(math::log(total[k]));
    for (int64_t r = 0; r < len; ++r)
      for (int64_t k = 0; k < n; ++k)
        y[r * stride + k] = convert<T>(static_cast<C>(x[r * stride + k]) - shift[k] - scale[k]);
  } else {
    for (int64_t k = 0; k < n; ++k) scale[k] = static_cast<C>(1.0 / total[k]);
    for (int64_t r = 0; r < len; ++r)
      for (int64_t k = 0; k < n; ++k) {
        T& out = y[r * stride + k];
        const C e = keep_exp ? static_cast<C>(out) : math::exp(static_cast<C>(x[r * stride + k]) - shift[k]);
        out = convert<T>(e * scale[k]);
      }
  }
}

// One f32 row of len elements with the vector kernels: its max, the exps and their sum in one pass,
// then the scaling (softmax) or the shift by log(sum) (log_softmax), with softmax_block's roundings.
// The max skips NaNs, but a NaN makes the sum, so the whole row, NaN all the same.
void softmax_row(const cpu::simd::Kernels& k, const float* x, float* y, int64_t len, bool log) {
  const float max = k.max(x, len);
  const double total = k.exp_sum(x, max, log ? nullptr : y, len);
  if (log) {
    const auto scale = static_cast<float>(std::log(total));
    for (int64_t i = 0; i < len; ++i) y[i] = x[i] - max - scale;
  } else {
    const auto scale = static_cast<float>(1.0 / total);
    for (int64_t i = 0; i < len; ++i) y[i] *= scale;
  }
}

}  // namespace

void Softmax::eval_cpu(const std::vector<Tensor>& in, std::vector<Tensor>& out) {
  const ReductionLayout l = dim_layout(in[0], dim_);
  if (l.outer * l.len * l.inner == 0) return;
  const cpu::ColumnBlocks blocks(l);
  const cpu::simd::Kernels* simd = cpu::simd::active_kernels();
  const bool vector_rows = simd != nullptr && l.inner == 1 && in[0].dtype() == DType::f32;
  Tensor max;  // (outer, inner) in the layout's output order
  if (!vector_rows) {
    NoGradGuard no_grad;
    max = amax(l.data, {dim_});
  }
  visit_floating(in[0].dtype(), name(), [&]<class T>() {
    const T* x = l.data.data<T>();
    const T* m = vector_rows ? nullptr : max.data<T>();
    T* y = out[0].data<T>();  // the same element order as x
    cpu::parallel_for(blocks.count, l.len * blocks.width, [&](int64_t begin, int64_t end) {
      for (int64_t b = begin; b < end; ++b) {
        const int64_t first = blocks.first_element(b), first_max = blocks.first_output(b);
        if constexpr (std::is_same_v<T, float>) {
          if (vector_rows) {
            softmax_row(*simd, x + first, y + first, l.len, log_);
            continue;
          }
        }
        if (l.inner == 1) softmax_block<1>(x + first, m + first_max, y + first, l.len, 1, 1, log_);
        else softmax_block<0>(x + first, m + first_max, y + first, l.len, l.inner, blocks.lanes(b), log_);
      }
    });
  });
}

}  // namespace ember
