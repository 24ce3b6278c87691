/// @file
/// Shape and strides: a small inline array of int64 (no heap allocation), plus the shape rules
/// every op shares: broadcasting, contiguous strides, dim wrapping.
#pragma once

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <span>
#include <string>
#include <vector>

#include "tensor/error.h"

namespace ember {

/// The most dims a tensor may have: beyond PyTorch's samples of high rank, while shape and strides
/// stay inline arrays (two of 128 bytes) and a CUDA kernel's strided operands stay well inside its
/// 4 KiB of parameters.
inline constexpr int kMaxDims = 16;

/// A fixed-capacity vector of dimension sizes or strides. Ranks above kMaxDims raise ShapeError.
class Dims {
 public:
  Dims() = default;
  Dims(std::initializer_list<int64_t> v) { assign(v.begin(), v.end()); }     ///< From a list: `Shape{2, 3}`.
  explicit Dims(std::span<const int64_t> v) { assign(v.begin(), v.end()); }  ///< From a span of values.
  /// From a vector (implicit, so a std::vector passes where a Shape is expected).
  Dims(const std::vector<int64_t>& v) { assign(v.begin(), v.end()); }  // NOLINT: implicit on purpose
  static Dims filled(int n, int64_t value) {  ///< `n` entries of `value`.
    Dims d;
    d.resize(n, value);
    return d;
  }

  int size() const { return n_; }                    ///< Number of entries (a shape's rank).
  bool empty() const { return n_ == 0; }             ///< Whether there are no entries (a 0-dim shape).
  int64_t& operator[](int i) { return v_[i]; }       ///< Entry i (unchecked).
  int64_t operator[](int i) const { return v_[i]; }  ///< Entry i (unchecked).
  int64_t* begin() { return v_; }                    ///< Iterator to the first entry.
  int64_t* end() { return v_ + n_; }                 ///< Iterator past the last entry.
  const int64_t* begin() const { return v_; }        ///< Iterator to the first entry.
  const int64_t* end() const { return v_ + n_; }     ///< Iterator past the last entry.
  int64_t back() const { return v_[n_ - 1]; }        ///< The last entry (unchecked).
  void push_back(int64_t x) {                        ///< Appends x; ShapeError beyond kMaxDims.
    check_rank(n_ + 1);
    v_[n_++] = x;
  }
  void insert(int pos, int64_t x) {  ///< Inserts x before entry pos; ShapeError beyond kMaxDims.
    check_rank(n_ + 1);
    for (int i = n_; i > pos; --i) v_[i] = v_[i - 1];
    v_[pos] = x;
    ++n_;
  }
  void erase(int pos) {  ///< Removes entry pos.
    for (int i = pos; i + 1 < n_; ++i) v_[i] = v_[i + 1];
    --n_;
  }
  /// Keeps the first n entries, appending `fill` when growing; ShapeError beyond kMaxDims.
  void resize(int n, int64_t fill = 0) {
    check_rank(n);
    for (int i = n_; i < n; ++i) v_[i] = fill;
    n_ = n;
  }
  std::vector<int64_t> vec() const { return {begin(), end()}; }  ///< The entries as a std::vector.
  /// Same entries.
  friend bool operator==(const Dims& a, const Dims& b) {
    return a.n_ == b.n_ && std::equal(a.begin(), a.end(), b.begin());
  }

 private:
  template <class It>
  void assign(It first, It last) {
    check_rank(static_cast<int>(last - first));
    n_ = 0;
    for (; first != last; ++first) v_[n_++] = *first;
  }
  static void check_rank(int n) {
    if (n > kMaxDims)
      throw ShapeError("ember supports at most " + std::to_string(kMaxDims) + " dimensions, got " +
                       std::to_string(n));
  }
  int64_t v_[kMaxDims] = {};
  int n_ = 0;
};

using Shape = Dims;    ///< The size of each dim of a tensor.
using Strides = Dims;  ///< The step of each dim of a tensor, in elements.

std::string to_string(const Dims& d);  ///< "(2, 3, 4)"
int64_t numel(const Shape& s);         ///< The product of the sizes: the number of elements (1 for a 0-dim shape).
/// Row-major strides of a dense tensor of shape s (size-0 dims count as 1).
Strides contiguous_strides(const Shape& s);
/// Wraps a possibly negative dim into [0, ndim); raises IndexError naming `op` when out of range.
int wrap_dim(int64_t dim, int ndim, const char* op);
/// The broadcast of two shapes (NumPy rules); ShapeError naming `op` and both shapes otherwise.
Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op);
/// Strides that read a tensor of shape/strides `from` as if it had the (broadcast) shape `to`.
Strides broadcast_strides(const Shape& from, const Strides& strides, const Shape& to);

}  // namespace ember
