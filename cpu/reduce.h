// How the CPU reductions split a reduction layout (tensor/reduction_layout.h) into work units.
#pragma once

#include <algorithm>

#include "tensor/reduction_layout.h"

namespace ember::cpu {

// Kernels fold up to kColumnBlock adjacent outputs (columns i) side by side: each step along the
// reduced extent then reads one contiguous run of memory, and the loop over columns vectorizes.
inline constexpr int64_t kColumnBlock = 256;

// The outputs of a layout cut into such blocks, numbered o-major: the unit of work of a thread.
struct ColumnBlocks {
  explicit ColumnBlocks(const ReductionLayout& l)
      : inner(l.inner), len(l.len), width(std::min(l.inner, kColumnBlock)), per_outer((l.inner + width - 1) / width),
        count(l.outer * per_outer) {}
  int64_t first_element(int64_t block) const { return (block / per_outer) * len * inner + first_column(block); }
  int64_t first_output(int64_t block) const { return (block / per_outer) * inner + first_column(block); }
  int64_t lanes(int64_t block) const { return std::min(width, inner - first_column(block)); }

  int64_t inner, len, width, per_outer, count;

 private:
  int64_t first_column(int64_t block) const { return (block % per_outer) * width; }
};

}  // namespace ember::cpu
