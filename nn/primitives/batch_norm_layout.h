// How batch-norm kernels address x, g and their outputs: as (N, C, S), the spatial dims collapsed
// into one stride, so contiguous and channels-last operands are read in place, and outputs keep x's
// memory format (channels-last in, channels-last out, as in PyTorch). Host-side shape work only.
#pragma once

#include "autograd/grad_mode.h"
#include "tensor/ops.h"

namespace ember {

// Element (n, c, i) of an operand seen as (N, C, S) lies at n * sn + c * sc + i * ss.
struct NCS {
  int64_t sn = 0, sc = 0, ss = 1;
  int64_t at(int64_t n, int64_t c, int64_t i) const { return n * sn + c * sc + i * ss; }
};

// The spatial dims 2... of t collapsed into one stride (size-1 dims ignored); false if they don't.
inline bool ncs_collapse(const Tensor& t, NCS* l) {
  int64_t prev = -1;
  l->sn = t.stride(0);
  l->sc = t.stride(1);
  l->ss = 1;
  for (int d = 2; d < t.dim(); ++d) {
    if (t.size(d) == 1) continue;
    if (prev >= 0 && prev != t.stride(d) * t.size(d)) return false;
    prev = t.stride(d);
    l->ss = t.stride(d);
  }
  return true;
}

// t itself when its layout collapses, else a contiguous copy; *l receives the layout.
inline Tensor ncs_operand(const Tensor& t, NCS* l) {
  if (ncs_collapse(t, l)) return t;
  NoGradGuard no_grad;
  Tensor c = t.contiguous();
  ncs_collapse(c, l);
  return c;
}

// The dense channels-last strides of `shape` (rank >= 3): C innermost, then the last dim, ..., N.
inline Strides ncs_channels_last_strides(const Shape& shape) {
  Strides st = Dims::filled(shape.size(), 0);
  int64_t s = 1;
  st[1] = s;
  s *= shape[1];
  for (int d = shape.size() - 1; d >= 2; --d) {
    st[d] = s;
    s *= shape[d];
  }
  st[0] = s;
  return st;
}

// True when x (rank >= 3) is channels-last and not also contiguous (dims of size 1 don't count).
inline bool ncs_is_channels_last(const Tensor& x) {
  if (x.dim() < 3 || x.is_contiguous()) return false;
  const Strides want = ncs_channels_last_strides(x.shape());
  for (int d = 0; d < x.dim(); ++d)
    if (x.size(d) != 1 && x.stride(d) != want[d]) return false;
  return true;
}

// Gives `out` (freshly allocated, contiguous) x's memory format and returns the layout to write it in.
inline NCS ncs_output_like(const Tensor& x, Tensor& out) {
  if (ncs_is_channels_last(x))
    out = Tensor(make_intrusive<TensorImpl>(out.storage(), 0, out.shape(), ncs_channels_last_strides(out.shape()),
                                            out.dtype()));
  NCS l;
  ncs_collapse(out, &l);
  return l;
}

}  // namespace ember
