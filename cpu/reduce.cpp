// CPU kernels of the reduction primitives: one fold over the (outer, len, inner) layout, given
// each reduction's accumulator.
#include "cpu/reduce.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <memory>
#include <vector>

#include "autograd/grad_mode.h"
#include "cpu/parallel.h"
#include "tensor/convert.h"
#include "tensor/ops.h"
#include "tensor/primitives/reduce.h"

namespace ember {


namespace {

// Units of work a reduction is cut into, when it has fewer: enough for this many threads.
constexpr int64_t kPieceThreads = 64;

// How many pieces to split each unit's `steps` into, so that few units (a full reduction is a single
// unit) still keep every thread busy. The count depends on the shape only, never on the thread
// count, so that the sums, whose grouping follows the pieces, are the same bits on any number of
// threads; the partial results cost kPieceThreads x width accumulators at most.
int64_t pieces_per_unit(int64_t units, int64_t steps, int64_t width) {
  if (units >= kPieceThreads) return 1;
  const int64_t wanted = (kPieceThreads + units - 1) / units;
  const int64_t worth_a_thread = steps * width / cpu::kParallelGrain;
  return std::clamp<int64_t>(std::min(wanted, worth_a_thread), 1, std::max<int64_t>(steps, 1));
}

constexpr int64_t kRowLanes = 32;  // independent accumulators a long row is spread over
constexpr int64_t kStepGroup = 8;  // steps a column takes in before touching its accumulator

// Folds every output of `l`: acc starts at init, step(acc, x, r) takes in each element (r its
// position along the reduced extent) in any grouping, merge(acc, other) joins partial results,
// write(output, acc) stores the result. A long row (inner == 1) is folded kRowLanes elements at
// a time into as many accumulators; otherwise a block of adjacent columns is folded side by side.
// Either way the loads are contiguous and the loop over lanes vectorizes.
template <class T, class Acc, class Step, class Merge, class Write>
void fold(const ReductionLayout& l, Acc init, Step step, Merge merge, Write write) {
  constexpr int64_t kLanes = std::max(kRowLanes, cpu::kColumnBlock);  // accumulators per unit
  if (l.outer * l.inner == 0) return;
  const T* x = l.data.data<T>();
  const bool split_rows = l.inner == 1 && l.len >= 2 * kRowLanes;
  const cpu::ColumnBlocks blocks(l);
  const int64_t units = split_rows ? l.outer : blocks.count;
  const int64_t width = split_rows ? kRowLanes : blocks.width;
  const int64_t steps = split_rows ? l.len / kRowLanes : l.len;  // each step takes in `width` elements
  const int64_t pieces = pieces_per_unit(units, steps, width);

  // Takes steps [s0, s1) of unit u into acc[0, width).
  auto fold_steps = [&](int64_t u, int64_t s0, int64_t s1, Acc* acc) {
    std::fill(acc, acc + width, init);
    if (split_rows) {
      const T* row = x + u * l.len;
      for (int64_t s = s0; s < s1; ++s)
        for (int64_t k = 0; k < kRowLanes; ++k) step(acc[k], row[s * kRowLanes + k], s * kRowLanes + k);
    } else {
      const T* first = x + blocks.first_element(u);
      const int64_t n = blocks.lanes(u);
      // kStepGroup steps at a time go into a fresh accumulator merged once, so that acc[k] is
      // loaded and stored once per group rather than once per element.
      int64_t s = s0;
      for (; s + kStepGroup <= s1; s += kStepGroup)
        for (int64_t k = 0; k < n; ++k) {
          Acc group = init;
          for (int64_t g = 0; g < kStepGroup; ++g) step(group, first[(s + g) * l.inner + k], s + g);
          merge(acc[k], group);
        }
      for (; s < s1; ++s)
        for (int64_t k = 0; k < n; ++k) step(acc[k], first[s * l.inner + k], s);
    }
  };
  // Writes unit u's outputs; a split row first takes in its tail and joins its lanes.
  auto finish = [&](int64_t u, Acc* acc) {
    if (split_rows) {
      const T* row = x + u * l.len;
      for (int64_t r = steps * kRowLanes; r < l.len; ++r) step(acc[r - steps * kRowLanes], row[r], r);
      for (int64_t k = 1; k < kRowLanes; ++k) merge(acc[0], acc[k]);
      write(u, acc[0]);
    } else {
      const int64_t first = blocks.first_output(u), n = blocks.lanes(u);
      for (int64_t k = 0; k < n; ++k) write(first + k, acc[k]);
    }
  };

  if (pieces == 1) {
    cpu::parallel_for(units, l.len * width, [&](int64_t begin, int64_t end) {
      Acc acc[kLanes];
      for (int64_t u = begin; u < end; ++u) {
        fold_steps(u, 0, steps, acc);
        finish(u, acc);
      }
    });
    return;
  }
  const auto partial = std::make_unique<Acc[]>(units * pieces * width);  // not vector: Acc may be bool
  cpu::parallel_for(units * pieces, l.len * width / pieces, [&](int64_t begin, int64_t end) {
    for (int64_t w = begin; w < end; ++w) {
      const int64_t u = w / pieces, p = w % pieces;
      fold_steps(u, steps * p / pieces, steps * (p + 1) / pieces, &partial[w * width]);
    }
  });
  for (int64_t u = 0; u < units; ++u) {
    Acc* acc = &partial[u * pieces * width];
    for (int64_t p = 1; p < pieces; ++p)
      for (int64_t k = 0; k < width; ++k) merge(acc[k], acc[p * width + k]);
    finish(u, acc);
  }
}

template <class C>
bool is_nan(C v) {
  if constexpr (std::is_floating_point_v<C>) return std::isnan(v);
  else return false;
}

// Integers and bool accumulate in int64, floats in double.
template <class T>
using accumulate_t = std::conditional_t<is_float_type_v<T>, double, int64_t>;

// Integer products wrap around on overflow as PyTorch's do (signed overflow would be undefined).
template <class A>
A multiply(A a, A b) {
  if constexpr (std::is_integral_v<A>) return static_cast<A>(static_cast<uint64_t>(a) * static_cast<uint64_t>(b));
  else return a * b;
}

// Sum and Prod: fold in the accumulate type; floats keep their dtype (or write the wider float
// `out` has), the rest give int64.
template <class Combine>
void accumulate(const Tensor& in, const Shape& dims, Tensor& out, int identity, Combine combine) {
  const ReductionLayout l = reduction_layout(in, dims);
  visit(in.dtype(), [&]<class T>() {
    using A = accumulate_t<T>;
    auto run = [&]<class O>() {
      O* y = out.data<O>();
      fold<T>(
          l, static_cast<A>(identity),
          [&](A& acc, T v, int64_t) { acc = combine(acc, static_cast<A>(static_cast<compute_t<T>>(v))); },
          [&](A& acc, A other) { acc = combine(acc, other); }, [&](int64_t i, A acc) { y[i] = convert<O>(acc); });
    };
    if constexpr (!is_float_type_v<T>) run.template operator()<int64_t>();
    else if (out.dtype() == DType::f64) run.template operator()<double>();
    else if (out.dtype() == DType::f32) run.template operator()<float>();
    else run.template operator()<T>();
  });
}

// The dims a one-dim reduction folds: a 0-dim input has none, which the layout reads as "all".
Shape along(const Tensor& x, int dim) { return x.dim() == 0 ? Shape{} : Shape{dim}; }

}  // namespace

void Sum::eval_cpu(const std::vector<Tensor>& in, std::vector<Tensor>& out) {
  accumulate(in[0], dims_, out[0], 0, [](auto a, auto b) { return a + b; });
}

void Prod::eval_cpu(const std::vector<Tensor>& in, std::vector<Tensor>& out) {
  accumulate(in[0], dims_, out[0], 1, [](auto a, auto b) { return multiply(a, b); });
}

void Extremum::eval_cpu(const std::vector<Tensor>& in, std::vector<Tensor>& out) {
  const ReductionLayout l = reduction_layout(in[0], dims_);
  visit(in[0].dtype(), [&]<class T>() {
    using C = compute_t<T>;
    using Limits = std::numeric_limits<C>;
    auto run = [&]<class Better>(Better better, C identity) {
      T* y = out[0].data<T>();
      // NaN replaces any value and is never replaced: it propagates.
      auto take = [better](C& acc, C v) {
        acc = better(v, acc) || is_nan(v) ? v : acc;  // a select, which vectorizes
      };
      fold<T>(
          l, identity, [&](C& acc, T v, int64_t) { take(acc, static_cast<C>(v)); }, take,
          [&](int64_t i, C acc) { y[i] = convert<T>(acc); });
    };
    if (is_max_) run(std::greater<C>(), Limits::has_infinity ? -Limits::infinity() : Limits::lowest());
    else run(std::less<C>(), Limits::has_infinity ? Limits::infinity() : Limits::max());
  });
}

void ArgExtremum::eval_cpu(const std::vector<Tensor>& in, std::vector<Tensor>& out) {
  const ReductionLayout l = reduction_layout(in[0], along(in[0], dim_));
  visit(in[0].dtype(), [&]<class T>() {
    using C = compute_t<T>;
    struct Best {
      C value{};
      int64_t index = -1;  // -1: nothing taken in yet
    };
    auto run = [&]<class Better>(Better better_value) {
      // NaN beats every number and is beaten by nothing: the first NaN wins, as in PyTorch.
      auto better = [better_value](C a, C b) { return !is_nan(b) && (is_nan(a) || better_value(a, b)); };
      int64_t* y = out[0].data<int64_t>();
      fold<T>(
          l, Best{},
          [&](Best& acc, T v, int64_t r) {
            const C c = static_cast<C>(v);
            if (acc.index < 0 || better(c, acc.value)) acc = {c, r};
          },
          [&](Best& acc, const Best& other) {
            if (other.index < 0) return;
            if (acc.index < 0 || better(other.value, acc.value) ||
                (!better(acc.value, other.value) && other.index < acc.index))  // a tie: the first one
              acc = other;
          },
          [&](int64_t i, const Best& acc) { y[i] = acc.index; });
    };
    if (is_max_) run(std::greater<C>());
    else run(std::less<C>());
  });
}

}  // namespace ember
