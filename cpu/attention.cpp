// CPU kernels of fused attention after FlashAttention-2 (Dao 2023, arXiv:2307.08691, Algorithms 1
// and 2). The forward walks key blocks with the online softmax of Milakov & Gimelshein
// (arXiv:1805.02867): a running max m and sum l per query row, the accumulator rescaled by
// exp(m_old - m_new). The backward recomputes each tile's probabilities from the saved row max and
// row sum as e^(s - m) / l.
// Tile products go through cpu::gemm in the compute type (f32 for 16-bit inputs).
#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "cpu/gemm.h"
#include "cpu/parallel.h"
#include "cpu/simd_math.h"
#include "nn/primitives/attention.h"
#include "tensor/convert.h"
#include "tensor/math.h"
#include "tensor/philox.h"

namespace ember {

namespace {

// Most query rows and key columns per tile (a 128 x 128 f32 score tile is 64 KB, in L2 with its q,
// k and v rows). One thread's CPU time on this 2-core EPYC (best of two runs, with libm's exp then),
// (B, h, L = S, E) = (4, 8, 1024, 64) / (32, 3, 65, 64), forward + backward: 64 x 64 522 / 8.4 ms,
// 64 x 128 512 / 8.6, 128 x 128 506 / 8.2, 32 x 64 525 / 8.1; forward alone at L = 1024: 197, 188,
// 183, 196 ms.
constexpr int64_t kQueryBlock = 128, kKeyBlock = 128;

// [0, n) in ceil(n / most) blocks whose sizes differ by at most 1 (300 rows: 3 x 100, not 128 + 128 + 44).
struct Blocks {
  int64_t n, count;
  Blocks(int64_t size, int64_t most) : n(size), count((size + most - 1) / most) {}
  int64_t begin(int64_t b) const { return n * b / count; }
  int64_t end(int64_t b) const { return n * (b + 1) / count; }
};

// `count` contiguous values in the compute type C: the data itself when it is already C, else a
// converted copy in `scratch`.
template <class C, class T>
const C* as_compute(const T* p, int64_t count, std::vector<C>& scratch) {
  if constexpr (std::is_same_v<T, C>) {
    return p;
  } else {
    scratch.resize(static_cast<size_t>(count));
    for (int64_t i = 0; i < count; ++i) scratch[i] = convert<C>(p[i]);
    return scratch.data();
  }
}

template <class C>
constexpr C kNegInf = -std::numeric_limits<C>::infinity();

// The masks of one batch entry applied to a row of scores: the given mask (bool: false masks out;
// floating: added) and the causal one (key j > query i masked out, PyTorch's top-left alignment).
template <class T, class C>
struct RowMask {
  const bool* keep = nullptr;
  const T* add = nullptr;
  int64_t sl = 0, ss = 0;  // the mask's strides along L and S
  bool causal = false;

  RowMask(const AttentionParams& p, const std::vector<Tensor>& in, size_t mask_input, int64_t n) : causal(p.causal) {
    if (!p.has_mask) return;
    const Tensor& m = in[mask_input];
    int64_t offset = 0;  // batch entry n of the mask's (B..., L, S) layout
    for (int d = m.dim() - 3; d >= 0; --d) {
      offset += (n % m.size(d)) * m.stride(d);
      n /= m.size(d);
    }
    sl = m.stride(-2);
    ss = m.stride(-1);
    if (m.dtype() == DType::boolean) keep = m.data<bool>() + offset;
    else add = m.data<T>() + offset;
  }
  // Scores of query i against keys [j0, j0 + count).
  void apply(C* s, int64_t i, int64_t j0, int64_t count) const {
    if (keep) {
      const bool* k = keep + i * sl + j0 * ss;
      for (int64_t c = 0; c < count; ++c)
        if (!k[c * ss]) s[c] = kNegInf<C>;
    } else if (add) {
      const T* a = add + i * sl + j0 * ss;
      for (int64_t c = 0; c < count; ++c) s[c] += convert<C>(a[c * ss]);
    }
    if (causal)
      for (int64_t c = std::max<int64_t>(0, i + 1 - j0); c < count; ++c) s[c] = kNegInf<C>;
  }
};

// Dropout's factor for element idx of the (N, L, S) weights: 1 / (1 - p) when kept, else 0. Kept
// when u >= p, u the f32 that rand() draws for that element (cpu/random.cpp's Philox layout, four
// per block), so the fused op drops what dropout(softmax(...), p) drops from the same generator state.
template <class C>
class DropoutMask {
 public:
  explicit DropoutMask(const AttentionParams& p)
      : counter_(p.counter.resolved()), p_(static_cast<float>(p.dropout_p)),
        scale_(static_cast<C>(1.0 / (1.0 - p.dropout_p))) {}
  C factor(uint64_t idx) {
    const uint64_t b = counter_.first_block + idx / 4;
    if (b != cached_) {
      block_ = philox::generate(counter_.seed, b);
      cached_ = b;
    }
    return philox::to_unit_float<24>(block_.v[idx % 4]) >= p_ ? scale_ : C(0);
  }

 private:
  philox::Counter counter_;  // resolved: a captured step's base read once
  float p_;
  C scale_;
  uint64_t cached_ = ~uint64_t{0};
  philox::Block block_{};
};

// The row passes over a score tile: cpu/simd_math.h's kernels for float where they are active,
// scalar loops with tensor/math.h's exp otherwise (f64, the deterministic mode, CPUs without AVX2).
// perf at (4, 8, 1024, 1024, 64) before they were vectorised: a scalar running max took a fifth of
// the forward, libm's expf (one call per score) 40% of the rest.
template <class C>
class RowOps {
 public:
  // The largest of s[0, n) and init, NaNs skipped (std::fmax's rule, as the SIMD max's).
  C max(const C* s, int64_t n, C init) const {
    if constexpr (std::is_same_v<C, float>)
      if (simd_) return std::fmax(init, simd_->max(s, n));
    C m = init;
    for (int64_t c = 0; c < n; ++c) m = std::fmax(m, s[c]);
    return m;
  }
  // s[c] = e^(s[c] - shift), and their sum.
  C exp_sum(C* s, int64_t n, C shift) const {
    if constexpr (std::is_same_v<C, float>)
      if (simd_) return static_cast<C>(simd_->exp_sum(s, shift, s, n));
    C sum = 0;
    for (int64_t c = 0; c < n; ++c) sum += s[c] = math::exp(s[c] - shift);
    return sum;
  }
  // s[c] = e^(s[c] - shift) * scale.
  void exp_scale(C* s, int64_t n, C shift, C scale) const {
    if constexpr (std::is_same_v<C, float>)
      if (simd_) return simd_->exp_scale(s, shift, scale, s, n);
    for (int64_t c = 0; c < n; ++c) s[c] = math::exp(s[c] - shift) * scale;
  }

 private:
  const cpu::simd::Kernels* simd_ = std::is_same_v<C, float> ? cpu::simd::active_kernels() : nullptr;
};

template <class T>
void forward(const AttentionParams& prm, const std::vector<Tensor>& in, std::vector<Tensor>& out) {
  using C = compute_t<T>;
  const Tensor &q = in[0], &k = in[1], &v = in[2];
  const int64_t N = q.size(0), L = q.size(1), E = q.size(2), S = k.size(1), Ev = v.size(2);
  const Blocks qb(L, kQueryBlock), kb(S, kKeyBlock);
  const T *qp = q.data<T>(), *kp = k.data<T>(), *vp = v.data<T>();
  T* op = out[0].data<T>();
  C* stats = out[1].data<C>();
  const C scale = static_cast<C>(prm.scale);
  const bool dropout = prm.dropout_p > 0;
  const RowOps<C> rows;
  // Threads over (batch entry, query block); each task walks all key blocks.
  cpu::parallel_for(N * qb.count, (L / std::max<int64_t>(qb.count, 1) + 1) * S * (E + Ev), [&](int64_t begin, int64_t end) {
    std::vector<C> qs(kQueryBlock * E), st(kQueryBlock * kKeyBlock), acc(kQueryBlock * Ev), m(kQueryBlock),
        l(kQueryBlock), kbuf, vbuf;
    DropoutMask<C> drop(prm);
    int64_t converted = -1;  // the batch entry whose k, v the buffers hold
    const C *kc = nullptr, *vc = nullptr;
    for (int64_t task = begin; task < end; ++task) {
      const int64_t n = task / qb.count, i0 = qb.begin(task % qb.count), br = qb.end(task % qb.count) - i0;
      if (n != converted) {
        kc = as_compute<C>(kp + n * S * E, S * E, kbuf);
        vc = as_compute<C>(vp + n * S * Ev, S * Ev, vbuf);
        converted = n;
      }
      const T* qn = qp + (n * L + i0) * E;
      for (int64_t x = 0; x < br * E; ++x) qs[x] = convert<C>(qn[x]) * scale;
      std::fill_n(m.begin(), br, kNegInf<C>);
      std::fill_n(l.begin(), br, C(0));
      std::fill_n(acc.begin(), br * Ev, C(0));
      const RowMask<T, C> mask(prm, in, 3, n);
      for (int64_t b = 0; b < kb.count; ++b) {
        const int64_t j0 = kb.begin(b), bc = kb.end(b) - j0;
        if (prm.causal && j0 > i0 + br - 1) break;  // every key of this block and the next is after every query
        cpu::gemm<C>(br, bc, E, {qs.data(), false, E}, {kc + j0 * E, true, E}, C(0), {st.data(), false, bc});
        for (int64_t r = 0; r < br; ++r) {
          C* s = st.data() + r * bc;
          mask.apply(s, i0 + r, j0, bc);
          const C mx = rows.max(s, bc, m[r]);
          if (mx == kNegInf<C>) {  // no key of this row taken part so far
            std::fill_n(s, bc, C(0));
            continue;
          }
          const C alpha = math::exp(m[r] - mx);  // 0 on the first block with a key
          const C sum = rows.exp_sum(s, bc, mx);
          if (dropout) {  // l sums the weights before dropout: softmax, then dropout
            const auto row = static_cast<uint64_t>((n * L + i0 + r) * S + j0);
            for (int64_t c = 0; c < bc; ++c) s[c] *= drop.factor(row + static_cast<uint64_t>(c));
          }
          l[r] = l[r] * alpha + sum;
          m[r] = mx;
          if (alpha != C(1))
            for (int64_t c = 0; c < Ev; ++c) acc[r * Ev + c] *= alpha;
        }
        cpu::gemm<C>(br, Ev, bc, {st.data(), false, bc}, {vc + j0 * Ev, false, Ev}, C(1), {acc.data(), false, Ev});
      }
      for (int64_t r = 0; r < br; ++r) {
        const bool dead = l[r] == C(0);  // every key masked out: a zero row, as PyTorch's SDPA gives
        const C inv = dead ? C(0) : C(1) / l[r];
        T* o = op + (n * L + i0 + r) * Ev;
        for (int64_t c = 0; c < Ev; ++c) o[c] = convert<T>(acc[r * Ev + c] * inv);
        // A max of +inf makes the backward's e^(s - m) 0 on a dead row.
        C* row = stats + 2 * (n * L + i0 + r);
        row[0] = dead ? std::numeric_limits<C>::infinity() : m[r];
        row[1] = l[r];
      }
    }
  });
}

// With Qs = q * scale, P = exp(Qs K^T + mask - m) / l, Z the dropout factors and D = rowsum(g * out):
//   dv = (P Z)^T g,  dS = P * (Z * (g v^T) - D),  dq = scale * dS k,  dk = dS^T Qs.
// Threads over batch entries: each owns its dk, dv (summed over query blocks) and dq.
template <class T>
void backward(const AttentionParams& prm, const std::vector<Tensor>& in, std::vector<Tensor>& out) {
  using C = compute_t<T>;
  const Tensor &q = in[0], &k = in[1], &v = in[2], &o = in[3], &g = in[4];
  const int64_t N = q.size(0), L = q.size(1), E = q.size(2), S = k.size(1), Ev = v.size(2);
  const Blocks qb(L, kQueryBlock), kb(S, kKeyBlock);
  const C* stats = in[5].data<C>();
  const C scale = static_cast<C>(prm.scale);
  const bool dropout = prm.dropout_p > 0;
  const RowOps<C> rows;
  cpu::parallel_for(N, L * S * (E + Ev), [&](int64_t begin, int64_t end) {
    std::vector<C> qs(L * E), dq(L * E), dk(S * E), dv(S * Ev), d(L), st(kQueryBlock * kKeyBlock),
        dp(kQueryBlock * kKeyBlock), z(dropout ? kQueryBlock * kKeyBlock : 0), pz(z.size()), kbuf, vbuf, gbuf;
    DropoutMask<C> drop(prm);
    for (int64_t n = begin; n < end; ++n) {
      const T* qn = q.data<T>() + n * L * E;
      for (int64_t x = 0; x < L * E; ++x) qs[x] = convert<C>(qn[x]) * scale;
      const C* kc = as_compute<C>(k.data<T>() + n * S * E, S * E, kbuf);
      const C* vc = as_compute<C>(v.data<T>() + n * S * Ev, S * Ev, vbuf);
      const C* gc = as_compute<C>(g.data<T>() + n * L * Ev, L * Ev, gbuf);
      const T* on = o.data<T>() + n * L * Ev;
      // D in double: ds = P (dP - D) cancels where a row's weights are near one-hot, so D's rounding
      // reaches dq and dk (summed in f32, their errors were 1.4x higher on scores of ~100).
      for (int64_t i = 0; i < L; ++i) {
        double sum = 0;
        for (int64_t c = 0; c < Ev; ++c) sum += static_cast<double>(gc[i * Ev + c]) * convert<double>(on[i * Ev + c]);
        d[i] = static_cast<C>(sum);
      }
      std::fill(dq.begin(), dq.end(), C(0));
      std::fill(dk.begin(), dk.end(), C(0));
      std::fill(dv.begin(), dv.end(), C(0));
      const RowMask<T, C> mask(prm, in, 6, n);
      for (int64_t b = 0; b < kb.count; ++b) {
        const int64_t j0 = kb.begin(b), bc = kb.end(b) - j0;
        for (int64_t a = 0; a < qb.count; ++a) {
          const int64_t i0 = qb.begin(a), br = qb.end(a) - i0;
          if (prm.causal && i0 + br - 1 < j0) continue;  // every query of this block is before every key
          cpu::gemm<C>(br, bc, E, {qs.data() + i0 * E, false, E}, {kc + j0 * E, true, E}, C(0), {st.data(), false, bc});
          for (int64_t r = 0; r < br; ++r) {
            C* s = st.data() + r * bc;
            mask.apply(s, i0 + r, j0, bc);
            const C* row = stats + 2 * (n * L + i0 + r);
            rows.exp_scale(s, bc, row[0], row[1] == C(0) ? C(0) : C(1) / row[1]);
            if (dropout) {
              const auto row = static_cast<uint64_t>((n * L + i0 + r) * S + j0);
              for (int64_t c = 0; c < bc; ++c) {
                z[r * bc + c] = drop.factor(row + static_cast<uint64_t>(c));
                pz[r * bc + c] = s[c] * z[r * bc + c];
              }
            }
          }
          const C* p = dropout ? pz.data() : st.data();  // the weights out used
          cpu::gemm<C>(bc, Ev, br, {p, true, bc}, {gc + i0 * Ev, false, Ev}, C(1), {dv.data() + j0 * Ev, false, Ev});
          cpu::gemm<C>(br, bc, Ev, {gc + i0 * Ev, false, Ev}, {vc + j0 * Ev, true, Ev}, C(0), {dp.data(), false, bc});
          for (int64_t r = 0; r < br; ++r)
            for (int64_t c = 0; c < bc; ++c) {
              const int64_t x = r * bc + c;
              dp[x] = st[x] * ((dropout ? dp[x] * z[x] : dp[x]) - d[i0 + r]);
            }
          cpu::gemm<C>(br, E, bc, {dp.data(), false, bc}, {kc + j0 * E, false, E}, C(1), {dq.data() + i0 * E, false, E});
          cpu::gemm<C>(bc, E, br, {dp.data(), true, bc}, {qs.data() + i0 * E, false, E}, C(1), {dk.data() + j0 * E, false, E});
        }
      }
      T* dqo = out[0].data<T>() + n * L * E;
      for (int64_t x = 0; x < L * E; ++x) dqo[x] = convert<T>(dq[x] * scale);
      T* dko = out[1].data<T>() + n * S * E;
      for (int64_t x = 0; x < S * E; ++x) dko[x] = convert<T>(dk[x]);
      T* dvo = out[2].data<T>() + n * S * Ev;
      for (int64_t x = 0; x < S * Ev; ++x) dvo[x] = convert<T>(dv[x]);
    }
  });
}

}  // namespace

void ScaledDotProductAttention::eval_cpu(const std::vector<Tensor>& in, std::vector<Tensor>& out) {
  visit_floating(in[0].dtype(), name(), [&]<class T>() { forward<T>(p_, in, out); });
}

void ScaledDotProductAttentionBackward::eval_cpu(const std::vector<Tensor>& in, std::vector<Tensor>& out) {
  visit_floating(in[0].dtype(), name(), [&]<class T>() { backward<T>(p_, in, out); });
}

}  // namespace ember
