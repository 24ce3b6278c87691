// The strided loop under every CPU elementwise kernel: N operands (output first) viewed with the
// output's shape, inputs broadcast through zero strides. Dims are coalesced (tensor/coalesce.h), rows
// (or pieces of long rows) split across threads, and the innermost run is handed to the kernel with
// its byte strides.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>

#include "cpu/parallel.h"
#include "tensor/coalesce.h"
#include "tensor/tensor.h"

namespace ember::cpu {

template <int N>
struct Operands {
  std::array<char*, N> base;
  std::array<Strides, N> strides;  // bytes, all of the output's rank
};

// Operands of `out` and `inputs` broadcast to out's shape.
template <int N>
Operands<N> make_operands(const Tensor& out, const std::array<const Tensor*, N - 1>& inputs) {
  Operands<N> ops;
  const Shape& shape = out.shape();
  auto fill = [&](int k, const Tensor& t) {
    const int64_t es = dtype_size(t.dtype());
    ops.base[k] = static_cast<char*>(t.raw_data());
    Strides s = broadcast_strides(t.shape(), t.strides(), shape);
    for (auto& x : s) x *= es;
    ops.strides[k] = s;
  };
  fill(0, out);
  for (int k = 1; k < N; ++k) fill(k, *inputs[k - 1]);
  return ops;
}

// Calls row(ptrs, n, inner_strides) for every innermost run of elements of `shape`, runs split across
// threads; when there are fewer runs than threads, long runs are cut in pieces that are split
// instead. `cost` is the work per element, in elements.
template <int N, class Row>
void for_each_row(const Shape& shape, const Operands<N>& ops, Row&& row, int64_t cost = 1) {
  const CoalescedDims<N> c = coalesce<N>(shape, ops.strides);
  const int nd = c.nd;
  const auto& sizes = c.sizes;
  const auto& strides = c.strides;
  for (int64_t s : shape)
    if (s == 0) return;

  const int64_t inner = sizes[nd - 1];
  std::array<int64_t, N> inner_strides;
  for (int k = 0; k < N; ++k) inner_strides[k] = strides[k][nd - 1];
  int64_t rows = 1;
  for (int d = 0; d < nd - 1; ++d) rows *= sizes[d];

  // Pointers to element i of row r, whose coordinates are idx (found from r when not given).
  auto at = [&](int64_t* idx, int64_t r, int64_t i, bool given) {
    for (int d = nd - 2; d >= 0 && !given; --d) {
      idx[d] = r % sizes[d];
      r /= sizes[d];
    }
    std::array<char*, N> p;
    for (int k = 0; k < N; ++k) {
      int64_t off = i * inner_strides[k];
      for (int d = 0; d < nd - 1; ++d) off += idx[d] * strides[k][d];
      p[k] = ops.base[k] + off;
    }
    return p;
  };
  if (inner * cost >= 2 * kParallelGrain && rows < max_threads()) {
    const int64_t pieces = std::min<int64_t>(inner * cost / kParallelGrain, (max_threads() + rows - 1) / rows);
    parallel_for(rows * pieces, inner * cost / pieces, [&](int64_t begin, int64_t end) {
      int64_t idx[kMaxDims] = {};
      for (int64_t u = begin; u < end; ++u) {
        const int64_t piece = u % pieces, i0 = inner * piece / pieces, i1 = inner * (piece + 1) / pieces;
        row(at(idx, u / pieces, i0, false), i1 - i0, inner_strides);
      }
    });
    return;
  }
  parallel_for(rows, inner * cost, [&](int64_t begin, int64_t end) {
    int64_t idx[kMaxDims] = {};
    for (int64_t r = begin; r < end; ++r) {
      row(at(idx, r, 0, r != begin), inner, inner_strides);
      for (int d = nd - 2; d >= 0; --d) {  // the next row's coordinates
        if (++idx[d] < sizes[d]) break;
        idx[d] = 0;
      }
    }
  });
}

// Applies out = f(in...) elementwise. Out holds O, inputs hold I; f maps compute values.
template <class O, class I, int NI, class F>
void map_elements(const Tensor& out, const std::array<const Tensor*, NI>& inputs, F f) {
  constexpr int N = NI + 1;
  auto run = [&](const std::array<char*, N>& p, int64_t n, const std::array<int64_t, N>& s) {
    O* o = reinterpret_cast<O*>(p[0]);
    bool dense = s[0] == static_cast<int64_t>(sizeof(O));
    for (int k = 1; k < N; ++k) dense = dense && s[k] == static_cast<int64_t>(sizeof(I));
    if constexpr (NI == 1) {
      const I* a = reinterpret_cast<const I*>(p[1]);
      if (dense) {
        for (int64_t i = 0; i < n; ++i) o[i] = f(a[i]);
      } else {
        for (int64_t i = 0; i < n; ++i)
          *reinterpret_cast<O*>(p[0] + i * s[0]) = f(*reinterpret_cast<const I*>(p[1] + i * s[1]));
      }
    } else if constexpr (NI == 2) {
      const I* a = reinterpret_cast<const I*>(p[1]);
      const I* b = reinterpret_cast<const I*>(p[2]);
      if (dense) {
        for (int64_t i = 0; i < n; ++i) o[i] = f(a[i], b[i]);
      } else if (s[0] == static_cast<int64_t>(sizeof(O)) && s[1] == static_cast<int64_t>(sizeof(I)) && s[2] == 0) {
        const I bv = *b;  // tensor op scalar: the most common broadcast
        for (int64_t i = 0; i < n; ++i) o[i] = f(a[i], bv);
      } else {
        for (int64_t i = 0; i < n; ++i)
          *reinterpret_cast<O*>(p[0] + i * s[0]) =
              f(*reinterpret_cast<const I*>(p[1] + i * s[1]), *reinterpret_cast<const I*>(p[2] + i * s[2]));
      }
    } else {
      static_assert(NI == 2 || NI == 1, "map_elements handles one or two inputs");
    }
  };
  // A small op on dense tensors of one shape (a one-element add in a loop) is one run: no broadcast
  // strides or coalesced dims to work out first, which cost as much as the rest of the dispatch.
  bool one_run = out.numel() < kParallelGrain && out.is_contiguous();
  for (int k = 0; k < NI && one_run; ++k) one_run = inputs[k]->shape() == out.shape() && inputs[k]->is_contiguous();
  if (one_run) {
    std::array<char*, N> p;
    std::array<int64_t, N> s;
    p[0] = static_cast<char*>(out.raw_data());
    s[0] = sizeof(O);
    for (int k = 1; k < N; ++k) {
      p[k] = static_cast<char*>(inputs[k - 1]->raw_data());
      s[k] = sizeof(I);
    }
    if (out.numel() > 0) run(p, out.numel(), s);
    return;
  }
  for_each_row<N>(out.shape(), make_operands<N>(out, inputs), run);
}

}  // namespace ember::cpu
