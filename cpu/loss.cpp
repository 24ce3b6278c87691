// CPU kernel of the fused cross entropy: logits read as (N, C, S) contiguous; each position's
// max, log-sum-exp and smoothing term in one pass over its C classes (double accumulation).
#include <cmath>
#include <limits>
#include <vector>

#include "cpu/parallel.h"
#include "cpu/simd_math.h"
#include "nn/primitives/loss.h"
#include "tensor/convert.h"
#include "tensor/host_sync.h"
#include "tensor/math.h"

namespace ember {

void CrossEntropy::eval_cpu(const std::vector<Tensor>& in, std::vector<Tensor>& out) {
  const Tensor& x = in[0];
  const int64_t N = x.size(0), C = x.size(1), S = N * C == 0 ? 0 : x.numel() / (N * C);
  const int64_t P = N * S;  // positions
  const std::vector<int64_t> t = detail::cpu_values<int64_t>(in[1]);
  int64_t count = 0;
  for (int64_t p = 0; p < P; ++p) {  // validated before the threads start (no throw inside them)
    if (t[p] == ignore_index_) continue;
    if (t[p] < 0 || t[p] >= C)
      throw IndexError("cross_entropy: target " + std::to_string(t[p]) + " is out of bounds for " +
                       std::to_string(C) + " classes (ignore_index " + std::to_string(ignore_index_) + ")");
    ++count;
  }
  std::vector<double> loss(static_cast<size_t>(P));
  const double e = label_smoothing_;
  const cpu::simd::Kernels* simd = cpu::simd::active_kernels();
  visit_floating(x.dtype(), name(), [&]<class T>() {
    const bool vector_rows = std::is_same_v<T, float> && simd != nullptr && S == 1;  // classes contiguous
    const T* xp = x.data<T>();
    cpu::parallel_for(P, C, [&](int64_t begin, int64_t end) {
      for (int64_t p = begin; p < end; ++p) {
        if (t[p] == ignore_index_) {
          loss[p] = 0;
          continue;
        }
        const T* xr = xp + (p / S) * C * S + p % S;  // class c at xr[c * S]
        using Cp = compute_t<T>;  // exp in the compute type (float for f32), sums in double
        Cp mx = -std::numeric_limits<Cp>::infinity();
        double total = 0, sum_x = 0;
        if (vector_rows) {
          if constexpr (std::is_same_v<T, float>) {
            mx = simd->max(xr, C);
            total = simd->exp_sum(xr, mx, nullptr, C);
            if (e != 0) sum_x = simd->sum(xr, C);
          }
        } else {
          for (int64_t c = 0; c < C; ++c) mx = std::fmax(mx, static_cast<Cp>(xr[c * S]));
          for (int64_t c = 0; c < C; ++c) {
            const Cp v = static_cast<Cp>(xr[c * S]);
            total += static_cast<double>(math::exp(v - mx));
            sum_x += static_cast<double>(v);
          }
        }
        const double lse = static_cast<double>(mx) + math::log(total);
        const double nll = lse - static_cast<double>(static_cast<compute_t<T>>(xr[t[p] * S]));
        loss[p] = e == 0 ? nll : (1 - e) * nll + e * (lse - sum_x / static_cast<double>(C));
      }
    });
    if (reduction_ == Reduction::none) {
      T* o = out[0].data<T>();
      for (int64_t p = 0; p < P; ++p) o[p] = convert<T>(loss[p]);
    } else {
      double s = 0;
      for (int64_t p = 0; p < P; ++p) s += loss[p];
      if (reduction_ == Reduction::mean) s /= static_cast<double>(count);  // 0/0 = NaN, as PyTorch
      out[0].data<T>()[0] = convert<T>(s);
    }
  });
}

// dlogits at each position: (softmax - (1 - e) onehot - e / C) * scale, 0 where ignored.
void CrossEntropyBackward::eval_cpu(const std::vector<Tensor>& in, std::vector<Tensor>& out) {
  const Tensor& x = in[0];
  const int64_t N = x.size(0), C = x.size(1), S = N * C == 0 ? 0 : x.numel() / (N * C);
  const int64_t P = N * S;
  const std::vector<int64_t> t = detail::cpu_values<int64_t>(in[1]);
  const std::vector<double> g = detail::cpu_values<double>(in[2]);  // (P) for none, else one value
  int64_t count = 0;
  for (int64_t p = 0; p < P; ++p) count += t[p] != ignore_index_;
  const double e = label_smoothing_;
  const Reduction r = reduction_;
  const int64_t ignore = ignore_index_;
  const cpu::simd::Kernels* simd = cpu::simd::active_kernels();
  visit_floating(x.dtype(), name(), [&]<class T>() {
    using Cp = compute_t<T>;
    const bool vector_rows = std::is_same_v<T, float> && simd != nullptr && S == 1;
    const T* xp = x.data<T>();
    T* dp = out[0].data<T>();
    cpu::parallel_for(P, C, [&](int64_t begin, int64_t end) {
      for (int64_t p = begin; p < end; ++p) {
        const int64_t base = (p / S) * C * S + p % S;  // class c at base + c * S
        if (t[p] == ignore) {
          for (int64_t c = 0; c < C; ++c) dp[base + c * S] = convert<T>(0.0);
          continue;
        }
        const double scale = r == Reduction::none ? g[p] : r == Reduction::sum ? g[0] : g[0] / static_cast<double>(count);
        Cp mx = -std::numeric_limits<Cp>::infinity();
        double total = 0;
        if constexpr (std::is_same_v<T, float>) {
          if (vector_rows) {  // the same terms and roundings, exp from the vector kernels
            const float* xr = xp + base;
            float* dr = dp + base;
            mx = simd->max(xr, C);
            total = simd->exp_sum(xr, mx, nullptr, C);
            const auto inv = static_cast<float>(scale / total), off = static_cast<float>(e / static_cast<double>(C) * scale);
            simd->exp_scale(xr, mx, inv, dr, C);
            for (int64_t c = 0; c < C; ++c) dr[c] -= off;
            dr[t[p]] -= static_cast<float>((1 - e) * scale);
            continue;
          }
        }
        for (int64_t c = 0; c < C; ++c) mx = std::fmax(mx, static_cast<Cp>(xp[base + c * S]));
        for (int64_t c = 0; c < C; ++c) total += static_cast<double>(math::exp(static_cast<Cp>(xp[base + c * S]) - mx));
        const auto inv = static_cast<Cp>(scale / total), off = static_cast<Cp>(e / static_cast<double>(C) * scale);
        const auto hit = static_cast<Cp>((1 - e) * scale);
        // The target's term joins before the one rounding to T (rounding p * s first would lose it
        // to cancellation where p is near 1, or below 16 bits' normal range).
        for (int64_t c = 0; c < C; ++c)
          dp[base + c * S] =
              convert<T>(math::exp(static_cast<Cp>(xp[base + c * S]) - mx) * inv - off - (c == t[p] ? hit : Cp(0)));
      }
    });
  });
}

}  // namespace ember
