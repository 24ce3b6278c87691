// eval_cpu of SortRows: each row's (key, index) pairs ordered lexicographically, so equal keys keep
// index order (a stable sort); only the first k when k is smaller than the row.
#include <algorithm>
#include <utility>
#include <vector>

#include "cpu/parallel.h"
#include "tensor/primitives/sort.h"
#include "tensor/sort_key.h"

namespace ember {

void SortRows::eval_cpu(const std::vector<Tensor>& in, std::vector<Tensor>& out) {
  const int64_t rows = in[0].size(0), n = in[0].size(1), k = k_;
  if (rows == 0 || k == 0) return;
  int64_t* indices = out[0].data<int64_t>();
  const uint64_t flip = descending_ ? ~uint64_t{0} : 0;  // a descending key is the complement
  visit(in[0].dtype(), [&]<class T>() {
    const T* x = in[0].data<T>();
    // cost: about log2(n) comparisons per element
    cpu::parallel_for(rows, n * 16, [&](int64_t begin, int64_t end) {
      std::vector<std::pair<uint64_t, int64_t>> row(n);
      for (int64_t r = begin; r < end; ++r) {
        for (int64_t i = 0; i < n; ++i) row[i] = {sort_key(x[r * n + i]) ^ flip, i};
        if (k < n) std::partial_sort(row.begin(), row.begin() + k, row.end());
        else std::sort(row.begin(), row.end());
        for (int64_t i = 0; i < k; ++i) indices[r * k + i] = row[i].second;
      }
    });
  });
}

}  // namespace ember
