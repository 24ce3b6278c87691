// CPU kernels of conv2d and its backward halves: im2col per image and group, then GEMM (cpu/gemm.h);
// backward-input is a GEMM then col2im. f32/f64 natively, f16/bf16 through f32 copies. Every tensor
// is read and written through its strides: a channels-last (NHWC) input is gathered by im2col in
// place, and the output matrices are handed to GEMM in whichever of row/column-major their strides
// give (an NHWC output is the transposed product).
// Threads: images go in chunks (several im2col matrices side by side, one GEMM per chunk and group;
// NCHW outputs and gradients pass through a small reorder buffer), and the batch is split across
// threads, each doing its own im2col/col2im and one-thread GEMMs. im2col/col2im copy the in-bounds
// run of each output row without per-element bounds checks; that, more than chunking, is what brought
// conv fwd+bwd from about 0.35 to about 0.75 of raw GEMM speed.
// In a build with oneDNN, the passes go to cpu/conv_dnnl.cpp first (outside deterministic mode);
// these kernels run what it declines, and stay the readable reference it is tested against.
#include <algorithm>
#include <optional>
#include <vector>

#include "cpu/conv_dnnl.h"
#include "cpu/convert_into.h"
#include "cpu/gemm.h"
#include "cpu/loops.h"
#include "nn/primitives/conv.h"
#include "tensor/convert.h"
#include "tensor/deterministic.h"
#include "tensor/ops.h"

namespace ember {

namespace {

template <class T>
using Mat = cpu::Matrix<T>;
using cpu::gemm;

struct Geometry {
  int64_t N, C, H, W, O, kh, kw, OH, OW, G, Cg, Og;
  Conv2dParams p;
  int64_t K() const { return Cg * kh * kw; }  // rows of the im2col matrix
  int64_t L() const { return OH * OW; }       // its columns
};

Geometry geometry(const Shape& x, const Shape& w, const Shape& y, const Conv2dParams& p) {
  return {x[0], x[1], x[2], x[3], w[0], w[2], w[3], y[2], y[3], p.groups, x[1] / p.groups, w[0] / p.groups, p};
}

// Element pointer and strides of a 4-D NCHW-shaped tensor.
template <class T>
struct View4 {
  T* p;
  int64_t s[4];
  explicit View4(const Tensor& t) : p(t.data<std::remove_const_t<T>>()) {
    for (int d = 0; d < 4; ++d) s[d] = t.strides()[d];
  }
};

// The (channels x H*W) matrix of one image of v as GEMM can read it, when its strides allow.
template <class T>
std::optional<Mat<T>> plane_matrix(const View4<T>& v, int64_t rows, int64_t H, int64_t W) {
  int64_t cs;
  if (W == 1)
    cs = v.s[2];
  else if (H == 1 || v.s[2] == W * v.s[3])
    cs = v.s[3];
  else
    return std::nullopt;
  const auto layout = cpu::matrix_layout(rows, H * W, v.s[1], cs);
  if (!layout) return std::nullopt;
  return Mat<T>{v.p, layout->transposed, layout->ld};
}

// The output columns ow in [lo, hi) whose input column ow*stride - pad + kj*dilation lies in [0, W).
inline void valid_columns(const Geometry& g, int64_t kj, int64_t& lo, int64_t& hi) {
  const int64_t s = g.p.stride[1], off = kj * g.p.dilation[1] - g.p.padding[1];  // iw = ow*s + off
  lo = off >= 0 ? 0 : (-off + s - 1) / s;
  hi = g.W - 1 - off < 0 ? 0 : (g.W - 1 - off) / s + 1;
  lo = std::min(lo, g.OW);
  hi = std::clamp(hi, lo, g.OW);
}

// col (K x L, row-major with row stride ld) = the patches of image n, channels [c0, c0 + Cg), of x.
template <class T>
void im2col(const Geometry& g, const View4<const T>& x, int64_t n, int64_t c0, T* col, int64_t ld) {
  const int64_t kk = g.kh * g.kw, sw = g.p.stride[1], xs3 = x.s[3];
  for (int64_t r = 0; r < g.K(); ++r) {
    const int64_t c = c0 + r / kk, ki = (r / g.kw) % g.kh, kj = r % g.kw;
    const T* plane = x.p + n * x.s[0] + c * x.s[1];
    T* dst = col + r * ld;
    int64_t lo, hi;
    valid_columns(g, kj, lo, hi);
    const int64_t off = kj * g.p.dilation[1] - g.p.padding[1];
    for (int64_t oh = 0; oh < g.OH; ++oh) {
      const int64_t ih = oh * g.p.stride[0] - g.p.padding[0] + ki * g.p.dilation[0];
      T* d = dst + oh * g.OW;
      if (ih < 0 || ih >= g.H) {
        std::fill(d, d + g.OW, T(0));
        continue;
      }
      std::fill(d, d + lo, T(0));
      const T* src = plane + ih * x.s[2];
      if (sw == 1 && xs3 == 1)
        std::copy(src + (lo + off), src + (hi + off), d + lo);
      else
        for (int64_t ow = lo; ow < hi; ++ow) d[ow] = src[(ow * sw + off) * xs3];
      std::fill(d + hi, d + g.OW, T(0));
    }
  }
}

// gx[n, c0 + c] += the columns of col (K x L, row stride ld) folded back onto the image.
template <class T>
void col2im(const Geometry& g, const T* col, int64_t ld, const View4<T>& gx, int64_t n, int64_t c0) {
  const int64_t kk = g.kh * g.kw, sw = g.p.stride[1], gs3 = gx.s[3];
  for (int64_t c = 0; c < g.Cg; ++c) {
    T* plane = gx.p + n * gx.s[0] + (c0 + c) * gx.s[1];
    for (int64_t q = 0; q < kk; ++q) {
      const int64_t ki = q / g.kw, kj = q % g.kw;
      const T* src = col + (c * kk + q) * ld;
      int64_t lo, hi;
      valid_columns(g, kj, lo, hi);
      const int64_t off = kj * g.p.dilation[1] - g.p.padding[1];
      for (int64_t oh = 0; oh < g.OH; ++oh) {
        const int64_t ih = oh * g.p.stride[0] - g.p.padding[0] + ki * g.p.dilation[0];
        if (ih < 0 || ih >= g.H) continue;
        T* dst = plane + ih * gx.s[2];
        const T* s = src + oh * g.OW;
        if (sw == 1 && gs3 == 1)
          for (int64_t ow = lo; ow < hi; ++ow) dst[ow + off] += s[ow];
        else
          for (int64_t ow = lo; ow < hi; ++ow) dst[(ow * sw + off) * gs3] += s[ow];
      }
    }
  }
}

// Channels [c0, c0 + rows) of images [n0, n0 + nc) of v as one (rows x nc*L) GEMM matrix, when the
// strides allow it (one image, or channels-last with images one after another).
template <class T>
std::optional<Mat<T>> batch_matrix(const Geometry& g, const View4<T>& v, int64_t c0, int64_t rows, int64_t n0,
                                   int64_t nc) {
  auto m = plane_matrix(v, rows, g.OH, g.OW);
  if (!m || !(nc == 1 || (m->transposed && v.s[0] == g.L() * m->ld))) return std::nullopt;
  m->p += n0 * v.s[0] + c0 * v.s[1];
  return m;
}

// buf (rows x nc*L, row-major) to or from channels [c0, c0 + rows) of images [n0, n0 + nc) of v.
template <bool kToBuffer, class T, class V>
void copy_block(const Geometry& g, T* buf, const V& v, int64_t c0, int64_t rows, int64_t n0, int64_t nc) {
  const int64_t L = g.L(), ld = nc * L, s3 = v.s[3];
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t i = 0; i < nc; ++i)
      for (int64_t oh = 0; oh < g.OH; ++oh) {
        auto* t = v.p + (n0 + i) * v.s[0] + (c0 + r) * v.s[1] + oh * v.s[2];
        T* b = buf + r * ld + i * L + oh * g.OW;
        if (s3 == 1) {
          if constexpr (kToBuffer)
            std::copy(t, t + g.OW, b);
          else
            std::copy(b, b + g.OW, t);
        } else {
          for (int64_t ow = 0; ow < g.OW; ++ow) {
            if constexpr (kToBuffer)
              b[ow] = t[ow * s3];
            else
              t[ow * s3] = b[ow];
          }
        }
      }
}

// The im2col matrices of images [n0, n0 + nc) side by side in col (K x nc*L, row stride ld).
template <class T>
void im2col_chunk(const Geometry& g, const View4<const T>& xv, int64_t n0, int64_t nc, int64_t c0, T* col, int64_t ld) {
  for (int64_t i = 0; i < nc; ++i) im2col(g, xv, n0 + i, c0, col + i * g.L(), ld);
}

// Images go in chunks: the im2col matrices of a chunk sit side by side in one K x (chunk*L) buffer,
// so that small images still make GEMMs about kChunkColumns wide, enough to pay for packing the
// weights, which every GEMM call does again (2 cores, ember_conv_bench and SmallCNN's convs: 2048
// columns ran no faster; chunks bounded by kColumnBytes alone ran SmallCNN's first conv 2x slower).
// A thread's buffer stays within kColumnBytes so that it is still in cache between im2col and GEMM.
constexpr int64_t kColumnBytes = int64_t{4} << 20;
constexpr int64_t kChunkColumns = 512;

template <class T>
int64_t chunk_images(const Geometry& g) {
  const int64_t per_image = std::max<int64_t>(g.K() * g.L() * static_cast<int64_t>(sizeof(T)), 1);
  const int64_t cap = std::clamp<int64_t>(kColumnBytes / per_image, 1, std::max<int64_t>(g.N, 1));
  return std::clamp<int64_t>((kChunkColumns + g.L() - 1) / std::max<int64_t>(g.L(), 1), 1, cap);
}

// A thread's buffers: the im2col matrix, a reorder buffer for NCHW blocks and, in backward-weight,
// its partial sum of the weight gradient.
template <class T>
struct Scratch {
  std::vector<T> col, tmp, acc;
};

// Images in deterministic mode are cut into this many runs (fewer for a smaller batch) whatever the
// thread count, so that backward-weight's partial sums, one per run, are the same on any machine.
constexpr int64_t kDeterministicRuns = 16;

// Calls chunk(n0, nc, scratch) for consecutive chunks of images. The batch is cut into runs of
// consecutive images, one per thread (kDeterministicRuns in deterministic mode), each run done on one
// thread: im2col/col2im and one-thread GEMMs on its own images with its own scratch. A batch of one
// image runs on the calling thread, where cpu::gemm spreads each GEMM over the threads instead.
// Returns the scratches in batch order.
template <class T, class F>
std::vector<Scratch<T>> for_each_chunk(const Geometry& g, F&& chunk) {
  const int64_t most = chunk_images<T>(g);
  const int64_t runs = std::min(g.N, is_deterministic() ? kDeterministicRuns : int64_t{cpu::max_threads()});
  std::vector<Scratch<T>> parts(static_cast<size_t>(runs));
  const int64_t run_cost = g.N / std::max<int64_t>(runs, 1) * g.G * g.Og * g.L() * g.K();
  cpu::parallel_for(runs, run_cost, [&](int64_t begin, int64_t end) {
    for (int64_t run = begin; run < end; ++run) {
      const int64_t first = g.N * run / runs, last = g.N * (run + 1) / runs;
      Scratch<T>& s = parts[static_cast<size_t>(run)];
      s.col.resize(static_cast<size_t>(g.K() * g.L() * std::min(most, last - first)));
      for (int64_t n0 = first; n0 < last; n0 += most) chunk(n0, std::min(most, last - n0), s);
    }
  });
  return parts;
}

// gy's channels [c0, c0 + Og) of images [n0, n0 + nc) as a GEMM matrix: in place, or gathered into tmp.
template <class T>
Mat<const T> gy_block(const Geometry& g, const View4<const T>& gyv, int64_t c0, int64_t n0, int64_t nc,
                      std::vector<T>& tmp) {
  if (auto m = batch_matrix(g, gyv, c0, g.Og, n0, nc)) return *m;
  tmp.resize(static_cast<size_t>(g.Og * nc * g.L()));
  copy_block<true>(g, tmp.data(), gyv, c0, g.Og, n0, nc);
  return {tmp.data(), false, nc * g.L()};
}

// A tensor whose images GEMM can read as (channels x H*W) matrices: t itself, or a contiguous copy.
template <class T>
Tensor gemm_readable(const Tensor& t, int64_t rows) {
  if (plane_matrix(View4<const T>(t), rows, t.shape()[2], t.shape()[3])) return t;
  return contiguous(t);
}

template <class T>
void conv_forward(const Tensor& x, const Tensor& w_in, const Tensor& y, const Conv2dParams& p) {
  const Geometry g = geometry(x.shape(), w_in.shape(), y.shape(), p);
  if (y.numel() == 0) return;
  const Tensor w = contiguous(w_in);  // (O, K) row-major
  const View4<const T> xv(x);
  const View4<T> yv(y);
  const T* wp = w.data<T>();
  for_each_chunk<T>(g, [&](int64_t n0, int64_t nc, Scratch<T>& s) {
    const int64_t ld = nc * g.L();
    for (int64_t gr = 0; gr < g.G; ++gr) {
      im2col_chunk(g, xv, n0, nc, gr * g.Cg, s.col.data(), ld);
      // y[chunk, g] (Og x nc*L) = W_g (Og x K) @ col (K x nc*L)
      const Mat<const T> wg{wp + gr * g.Og * g.K(), false, g.K()};
      if (auto out = batch_matrix(g, yv, gr * g.Og, g.Og, n0, nc)) {
        gemm<T>(g.Og, ld, g.K(), wg, {s.col.data(), false, ld}, T(0), *out);
      } else {
        s.tmp.resize(static_cast<size_t>(g.Og * ld));
        gemm<T>(g.Og, ld, g.K(), wg, {s.col.data(), false, ld}, T(0), {s.tmp.data(), false, ld});
        copy_block<false>(g, s.tmp.data(), yv, gr * g.Og, g.Og, n0, nc);
      }
    }
  });
}

template <class T>
void conv_backward_input(const Tensor& gy_in, const Tensor& w_in, const Tensor& gx, const Conv2dParams& p) {
  const Geometry g = geometry(gx.shape(), w_in.shape(), gy_in.shape(), p);
  if (gx.numel() == 0) return;
  T* const gx0 = gx.data<T>();  // freshly allocated: dense, image n at [n * image, (n + 1) * image)
  const int64_t image = gx.numel() / g.N;
  if (gy_in.numel() == 0) {
    std::fill(gx0, gx0 + gx.numel(), T(0));
    return;
  }
  const Tensor w = contiguous(w_in), gy = gemm_readable<T>(gy_in, g.Og);
  const View4<const T> gyv(gy);
  const View4<T> gxv(gx);
  const T* wp = w.data<T>();
  for_each_chunk<T>(g, [&](int64_t n0, int64_t nc, Scratch<T>& s) {
    const int64_t ld = nc * g.L();
    std::fill(gx0 + n0 * image, gx0 + (n0 + nc) * image, T(0));
    for (int64_t gr = 0; gr < g.G; ++gr) {
      // col (K x nc*L) = W_g^T (K x Og) @ gy[chunk, g] (Og x nc*L)
      gemm<T>(g.K(), ld, g.Og, {wp + gr * g.Og * g.K(), true, g.K()}, gy_block(g, gyv, gr * g.Og, n0, nc, s.tmp),
              T(0), {s.col.data(), false, ld});
      for (int64_t i = 0; i < nc; ++i) col2im(g, s.col.data() + i * g.L(), ld, gxv, n0 + i, gr * g.Cg);
    }
  });
}

template <class T>
void conv_backward_weight(const Tensor& gy_in, const Tensor& x, const Tensor& gw, const Conv2dParams& p) {
  const Geometry g = geometry(x.shape(), gw.shape(), gy_in.shape(), p);
  T* out = gw.data<T>();  // (O, K), dense
  const auto size = static_cast<size_t>(gw.numel());
  std::fill(out, out + size, T(0));
  if (gy_in.numel() == 0 || x.numel() == 0) return;
  const Tensor gy = gemm_readable<T>(gy_in, g.Og);
  const View4<const T> gyv(gy), xv(x);
  // Each thread sums its images' gradients apart; the sums are added in batch order.
  const std::vector<Scratch<T>> parts = for_each_chunk<T>(g, [&](int64_t n0, int64_t nc, Scratch<T>& s) {
    if (s.acc.empty()) s.acc.assign(size, T(0));
    const int64_t ld = nc * g.L();
    for (int64_t gr = 0; gr < g.G; ++gr) {
      im2col_chunk(g, xv, n0, nc, gr * g.Cg, s.col.data(), ld);
      // gw_g (Og x K) += gy[chunk, g] (Og x nc*L) @ col^T (nc*L x K)
      gemm<T>(g.Og, g.K(), ld, gy_block(g, gyv, gr * g.Og, n0, nc, s.tmp), {s.col.data(), true, ld}, T(1),
              {s.acc.data() + gr * g.Og * g.K(), false, g.K()});
    }
  });
  for (const Scratch<T>& part : parts)
    for (size_t i = 0; i < size; ++i) out[i] += part.acc[i];
}

Tensor nchw(const Tensor& t, bool channels_last) { return channels_last ? permute(t, {0, 3, 1, 2}) : t; }

// Runs one pass: oneDNN's (dnnl_pass: one of cpu/conv_dnnl.h's) outside the deterministic mode unless
// ember's own kernel is chosen, else kernel<T>(a, b, out) in f32/f64. 16-bit types oneDNN declines
// (f16; bf16 on CPUs without avx512_bf16) go through f32 copies, on oneDNN's f32 kernels where it
// runs, and are narrowed back.
template <class F, class K>
void run_pass(const char* op, F dnnl_pass, const Tensor& a, const Tensor& b, const Tensor& out, bool channels_last,
              const Conv2dParams& p, K kernel) {
  NoGradGuard no_grad;  // views and temporaries here are not graph nodes
  const bool dnnl = !is_deterministic() && cpu_conv_dnnl();
  if (dnnl && dnnl_pass(a, b, nchw(out, channels_last), p)) return;
  visit_floating(out.dtype(), op, [&]<class T>() {
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
      kernel.template operator()<T>(a, b, nchw(out, channels_last));
    } else {
      const Tensor a32 = to(a, DType::f32), b32 = to(b, DType::f32);
      const Tensor o32 = Tensor::empty(out.shape(), DType::f32);
      if (!(dnnl && dnnl_pass(a32, b32, nchw(o32, channels_last), p)))
        kernel.template operator()<float>(a32, b32, nchw(o32, channels_last));
      cpu::convert_into(out, o32);
    }
  });
}

}  // namespace

void Conv2d::eval_cpu(const std::vector<Tensor>& in, std::vector<Tensor>& out) {
  run_pass(name(), cpu::dnnl_conv_forward, in[0], in[1], out[0], channels_last_, p_,
           [&]<class T>(const Tensor& x, const Tensor& w, const Tensor& y) { conv_forward<T>(x, w, y, p_); });
}

void Conv2dBackwardInput::eval_cpu(const std::vector<Tensor>& in, std::vector<Tensor>& out) {
  run_pass(name(), cpu::dnnl_conv_backward_input, in[0], in[1], out[0], channels_last_, p_,
           [&]<class T>(const Tensor& gy, const Tensor& w, const Tensor& gx) { conv_backward_input<T>(gy, w, gx, p_); });
}

void Conv2dBackwardWeight::eval_cpu(const std::vector<Tensor>& in, std::vector<Tensor>& out) {
  run_pass(name(), cpu::dnnl_conv_backward_weight, in[0], in[1], out[0], false, p_,
           [&]<class T>(const Tensor& gy, const Tensor& x, const Tensor& gw) { conv_backward_weight<T>(gy, x, gw, p_); });
}

}  // namespace ember
