// CPU kernel of the cumulative sum over the (outer, len, inner) layout of dim_layout: threads take
// blocks of adjacent columns (cpu::ColumnBlocks), or of a few rows when inner == 1, and walk len
// once, keeping a running sum per column or row. Sums accumulate in double for f32 and f64 (as
// PyTorch's CPU kernel), in float for the 16-bit types, and in int64 for integers, wrapping on overflow.
#include <algorithm>
#include <type_traits>

#include "cpu/parallel.h"
#include "cpu/reduce.h"
#include "tensor/convert.h"
#include "tensor/primitives/scan.h"
#include "tensor/reduction_layout.h"

namespace ember {

namespace {

template <class T>
using scan_acc_t = std::conditional_t<std::is_same_v<T, float> || std::is_same_v<T, double>, double,
                                      std::conditional_t<std::is_integral_v<T>, uint64_t, compute_t<T>>>;

// Adds x to the running sum `total` and returns the sum in T.
template <class T>
T accumulate(scan_acc_t<T>& total, T x) {
  using A = scan_acc_t<T>;
  if constexpr (std::is_integral_v<T>) {
    total += static_cast<A>(static_cast<int64_t>(x));  // unsigned: wraps, never UB
    return static_cast<T>(static_cast<int64_t>(total));
  } else {
    total += static_cast<A>(static_cast<compute_t<T>>(x));
    return convert<T>(total);
  }
}

// Scans `lanes` adjacent columns of len elements `stride` apart, from x into y (same layout).
template <class T>
void scan_block(const T* x, T* y, int64_t len, int64_t stride, int64_t lanes, bool reverse) {
  scan_acc_t<T> total[cpu::kColumnBlock] = {};
  for (int64_t step = 0; step < len; ++step) {
    const int64_t r = reverse ? len - 1 - step : step;
    for (int64_t k = 0; k < lanes; ++k) y[r * stride + k] = accumulate(total[k], x[r * stride + k]);
  }
}

// Scans kRows rows of len contiguous elements, row r at x + r * len, step by step: their sums are
// independent, so the additions of one step overlap instead of each waiting for the one before.
template <int kRows, class T>
void scan_rows(const T* x, T* y, int64_t len, bool reverse) {
  scan_acc_t<T> total[kRows] = {};
  for (int64_t step = 0; step < len; ++step) {
    const int64_t i = reverse ? len - 1 - step : step;
    for (int r = 0; r < kRows; ++r) y[r * len + i] = accumulate(total[r], x[r * len + i]);
  }
}

constexpr int64_t kRowGroup = 4;  // rows scanned together; 4 independent sums cover an add's latency

}  // namespace

void CumulativeSum::eval_cpu(const std::vector<Tensor>& in, std::vector<Tensor>& out) {
  const ReductionLayout l = dim_layout(in[0], dim_);
  if (l.outer * l.len * l.inner == 0) return;
  const cpu::ColumnBlocks blocks(l);
  visit(in[0].dtype(), [&]<class T>() {
    if constexpr (std::is_same_v<T, bool>) {
      throw DTypeError("cumsum: bool values are summed as int64 (the front end converts them)");
    } else {
      const T* x = l.data.data<T>();
      T* y = out[0].data<T>();  // contiguous, the element order of l.data
      if (l.inner == 1) {  // rows: contiguous lines, kRowGroup at a time
        const int64_t groups = (l.outer + kRowGroup - 1) / kRowGroup;
        cpu::parallel_for(groups, l.len * kRowGroup, [&](int64_t begin, int64_t end) {
          for (int64_t g = begin; g < end; ++g) {
            const int64_t first = g * kRowGroup, rows = std::min(kRowGroup, l.outer - first);
            if (rows == kRowGroup) scan_rows<kRowGroup>(x + first * l.len, y + first * l.len, l.len, reverse_);
            else
              for (int64_t r = first; r < first + rows; ++r) scan_rows<1>(x + r * l.len, y + r * l.len, l.len, reverse_);
          }
        });
        return;
      }
      cpu::parallel_for(blocks.count, l.len * blocks.width, [&](int64_t begin, int64_t end) {
        for (int64_t b = begin; b < end; ++b) {
          const int64_t first = blocks.first_element(b);
          scan_block(x + first, y + first, l.len, l.inner, blocks.lanes(b), reverse_);
        }
      });
    }
  });
}

}  // namespace ember
