// CPU kernels of the optimizer step primitives and of the total gradient norm: a loop over each
// parameter's elements (split across threads when large) around the math of optim/step_math.h.
// found_inf and grad_scale are read from memory here as the CUDA kernels read them on the device.
#include <algorithm>
#include <array>
#include <vector>

#include "cpu/parallel.h"
#include "cpu/simd_math.h"
#include "optim/primitives/steps.h"
#include "optim/primitives/total_norm.h"

namespace ember {

namespace {

using optim::kStepChunk;

// Work per element for the parallel grain: an update reads and writes a few arrays.
constexpr int64_t kElementCost = 4;

bool skip_step(const StepLayout& l, const std::vector<Tensor>& in) {
  const Tensor* f = l.found_inf(in);
  return f && *f->data<float>() != 0.0f;
}

// The step's hyperparameters with the scheduled ones its kernels read from memory (steps.h).
template <class H>
H with_stored(H h, const StepLayout& l, const std::vector<Tensor>& in) {
  return optim::with_scheduled(h, l.scheduled(in).data<double>());
}

float grad_scale(const StepLayout& l, const std::vector<Tensor>& in) {
  const Tensor* s = l.grad_scale(in);
  return s ? *s->data<float>() : 1.0f;
}

template <class F>
void for_elements(int64_t n, F&& f) {
  cpu::parallel_for(n, kElementCost, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) f(i);
  });
}

// f(begin, end) for each kStepChunk chunk of [0, n), chunks in parallel, results in chunk order
// (so that sums of them do not depend on the thread count).
template <class R, class F>
std::vector<R> chunk_results(int64_t n, F&& f) {
  const int64_t chunks = (n + kStepChunk - 1) / kStepChunk;
  std::vector<R> results(static_cast<size_t>(chunks));
  cpu::parallel_for(chunks, kStepChunk * kElementCost, [&](int64_t begin, int64_t end) {
    for (int64_t c = begin; c < end; ++c)
      results[static_cast<size_t>(c)] = f(c * kStepChunk, std::min(n, (c + 1) * kStepChunk));
  });
  return results;
}

// For Adam and LAMB: calls f.template operator()<T>(i, bias corrections, p, grad, exp_avg,
// exp_avg_sq) for each parameter i, the corrections those of its new step count, then advances the
// count (operand `step_operand`).
template <class F>
void for_each_moment_step(const StepLayout& l, const std::vector<Tensor>& in, const std::vector<Tensor>& out,
                          int step_operand, double beta1, double beta2, const char* op, F&& f) {
  for (int64_t i = 0; i < l.n; ++i) {
    double& step = *l.operand(out, step_operand, i).data<double>();
    const optim::BiasCorrection bc = optim::bias_correction(beta1, beta2, step + 1);
    visit_floating(l.operand(out, 0, i).dtype(), op, [&]<class T>() {
      f.template operator()<T>(i, bc, l.operand(out, 0, i).data<T>(), l.grad(in, i).data<T>(),
                               l.operand(out, 1, i).data<T>(), l.operand(out, 2, i).data<T>());
    });
    step += 1;
  }
}

}  // namespace

void SGDStep::eval_cpu(const std::vector<Tensor>& in, std::vector<Tensor>& out) {
  if (skip_step(l_, in)) return;
  const float scale = grad_scale(l_, in);
  const auto h = with_stored(h_, l_, in);
  const bool momentum = h.momentum != 0;
  for (int64_t i = 0; i < l_.n; ++i) {
    const Tensor& p = l_.operand(out, 0, i);
    double* step = momentum ? l_.operand(out, 2, i).data<double>() : nullptr;
    visit_floating(p.dtype(), name(), [&]<class T>() {
      T* pp = p.data<T>();
      const T* g = l_.grad(in, i).data<T>();
      T* buf = momentum ? l_.operand(out, 1, i).data<T>() : nullptr;
      const bool first = step && *step == 0;
      for_elements(p.numel(), [&](int64_t e) { optim::sgd_element(h, pp, g, buf, first, scale, e); });
    });
    if (step) *step += 1;
  }
}

void AdamStep::eval_cpu(const std::vector<Tensor>& in, std::vector<Tensor>& out) {
  if (skip_step(l_, in)) return;
  const float scale = grad_scale(l_, in);
  const auto h = with_stored(h_, l_, in);
  auto update = [&]<class T>(int64_t i, const optim::BiasCorrection& bc, T* p, const T* g, T* m, T* v) {
    T* vmax = h.amsgrad ? l_.operand(out, 3, i).data<T>() : nullptr;
    for_elements(l_.operand(out, 0, i).numel(),
                 [&](int64_t e) { optim::adam_element(h, bc, p, g, m, v, vmax, scale, e); });
  };
  for_each_moment_step(l_, in, out, h.amsgrad ? 4 : 3, h.beta1, h.beta2, name(), update);
}

void LAMBStep::eval_cpu(const std::vector<Tensor>& in, std::vector<Tensor>& out) {
  if (skip_step(l_, in)) return;
  const float scale = grad_scale(l_, in);
  const auto h = with_stored(h_, l_, in);
  auto update = [&]<class T>(int64_t i, const optim::BiasCorrection& bc, T* p, const T* g, T* m, T* v) {
    const int64_t n = l_.operand(out, 0, i).numel();
    // Phase one: moments, and ||p||^2 and ||r||^2 summed per chunk in double.
    auto moments = [&](int64_t begin, int64_t end) {
      std::array<double, 2> sums{0, 0};
      for (int64_t e = begin; e < end; ++e) optim::lamb_moments_element(h, bc, p, g, m, v, scale, e, sums[0], sums[1]);
      return sums;
    };
    double p_sq = 0, r_sq = 0;
    for (const auto& [ps, rs] : chunk_results<std::array<double, 2>>(n, moments)) {
      p_sq += ps;
      r_sq += rs;
    }
    // Phase two: the update scaled by the trust ratio.
    const double trust = optim::lamb_trust(p_sq, r_sq);
    for_elements(n, [&](int64_t e) { optim::lamb_apply_element(h, bc, trust, p, m, v, e); });
  };
  for_each_moment_step(l_, in, out, 3, h.beta1, h.beta2, name(), update);
}

void TotalNorm::eval_cpu(const std::vector<Tensor>& in, std::vector<Tensor>& out) {
  const optim::NormKind kind = optim::norm_kind(norm_type_);
  const cpu::simd::Kernels* simd = kind == optim::NormKind::two ? cpu::simd::active_kernels() : nullptr;
  double total = 0;
  for (const Tensor& x : in) {
    visit_floating(x.dtype(), name(), [&]<class T>() {
      const T* d = x.data<T>();
      const auto partial = chunk_results<double>(x.numel(), [&](int64_t begin, int64_t end) {
        if constexpr (std::is_same_v<T, float>)
          if (simd != nullptr) return simd->sum_squared_deviations(d + begin, 0.0, end - begin);  // in double lanes
        double acc = 0;
        for (int64_t e = begin; e < end; ++e)
          acc = optim::norm_combine(kind, acc, optim::norm_term(kind, norm_type_, convert<double>(d[e])));
        return acc;
      });
      for (double p : partial) total = optim::norm_combine(kind, total, p);
    });
  }
  const double norm = optim::norm_finish(kind, norm_type_, total);
  visit_floating(out[0].dtype(), name(), [&]<class T>() { *out[0].data<T>() = convert<T>(norm); });
}

}  // namespace ember
