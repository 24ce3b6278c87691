// eval_cpu of SortRows: each row's (key, index) pairs ordered lexicographically, so equal keys keep
// index order (a stable sort). A small k (a classifier's top-5) keeps the best k in one pass over the
// row instead: most elements then cost one comparison with the k-th best.
#include <algorithm>
#include <utility>
#include <vector>

#include "cpu/parallel.h"
#include "tensor/primitives/sort.h"
#include "tensor/sort_key.h"

namespace ember {

namespace {
// k at most n / kSmallK takes the one-pass selection (measured on topk(5) of rows of 1000).
constexpr int64_t kSmallK = 8;
}  // namespace

void SortRows::eval_cpu(const std::vector<Tensor>& in, std::vector<Tensor>& out) {
  const int64_t rows = in[0].size(0), n = in[0].size(1), k = k_;
  if (rows == 0 || k == 0) return;
  int64_t* indices = out[0].data<int64_t>();
  const uint64_t flip = descending_ ? ~uint64_t{0} : 0;  // a descending key is the complement
  visit(in[0].dtype(), [&]<class T>() {
    const T* x = in[0].data<T>();
    using Entry = std::pair<uint64_t, int64_t>;  // (key, index): lexicographic order is the stable one
    const auto by_key = [](uint64_t key, const Entry& e) { return key < e.first; };
    const bool small_k = k * kSmallK <= n;
    // cost: about log2(n) comparisons per element
    cpu::parallel_for(rows, n * 16, [&](int64_t begin, int64_t end) {
      std::vector<Entry> row(small_k ? k : n);
      for (int64_t r = begin; r < end; ++r) {
        const T* values = x + r * n;
        if (small_k) {
          // Indices only grow, so an entry equal in key to the k-th best ranks after it: skipped, and a
          // kept one goes after every entry of an equal key (upper_bound).
          int64_t kept = 0;
          for (int64_t i = 0; i < n; ++i) {
            const uint64_t key = sort_key(values[i]) ^ flip;
            if (kept == k && !(key < row[k - 1].first)) continue;
            const auto at = std::upper_bound(row.begin(), row.begin() + kept, key, by_key);
            if (kept < k) ++kept;
            std::move_backward(at, row.begin() + kept - 1, row.begin() + kept);
            *at = {key, i};
          }
        } else {
          for (int64_t i = 0; i < n; ++i) row[i] = {sort_key(values[i]) ^ flip, i};
          if (k < n) std::partial_sort(row.begin(), row.begin() + k, row.end());
          else std::sort(row.begin(), row.end());
        }
        for (int64_t i = 0; i < k; ++i) indices[r * k + i] = row[i].second;
      }
    });
  });
}

}  // namespace ember
