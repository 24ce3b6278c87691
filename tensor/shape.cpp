#include "tensor/shape.h"

namespace ember {

std::string to_string(const Dims& d) {
  std::string s = "(";
  for (int i = 0; i < d.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(d[i]);
  }
  if (d.size() == 1) s += ",";
  return s + ")";
}

int64_t numel(const Shape& s) {
  int64_t n = 1;
  for (int64_t x : s) n *= x;
  return n;
}

Strides contiguous_strides(const Shape& s) {
  Strides st = Dims::filled(s.size(), 1);
  for (int i = s.size() - 2; i >= 0; --i) st[i] = st[i + 1] * std::max<int64_t>(s[i + 1], 1);
  return st;
}

int wrap_dim(int64_t dim, int ndim, const char* op) {
  const int64_t n = std::max(ndim, 1);  // a 0-dim tensor accepts dim 0 and -1, like PyTorch
  if (dim < -n || dim >= n)
    throw IndexError(std::string(op) + ": dim " + std::to_string(dim) + " out of range for a tensor of " +
                     std::to_string(ndim) + " dimension(s)");
  return static_cast<int>(dim < 0 ? dim + n : dim);
}

Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op) {
  const int n = std::max(a.size(), b.size());
  Shape out = Dims::filled(n, 1);
  for (int i = 0; i < n; ++i) {
    const int ia = a.size() - n + i, ib = b.size() - n + i;
    const int64_t sa = ia >= 0 ? a[ia] : 1, sb = ib >= 0 ? b[ib] : 1;
    if (sa != sb && sa != 1 && sb != 1)
      throw ShapeError(std::string(op) + ": shapes " + to_string(a) + " and " + to_string(b) +
                       " cannot be broadcast (dim " + std::to_string(i) + ": " + std::to_string(sa) +
                       " vs " + std::to_string(sb) + ")");
    out[i] = sa == 1 ? sb : sa;
  }
  return out;
}

Strides broadcast_strides(const Shape& from, const Strides& strides, const Shape& to) {
  Strides out = Dims::filled(to.size(), 0);
  const int lead = to.size() - from.size();
  for (int i = 0; i < from.size(); ++i) out[lead + i] = from[i] == 1 ? 0 : strides[i];
  return out;
}

}  // namespace ember
