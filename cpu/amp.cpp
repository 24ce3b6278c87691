// CPU kernels of the loss-scaling primitives (optim/amp/primitives.h). They read found_inf and the
// scale through pointers, as the CUDA kernels read device memory: nothing is read on the host side
// of the API, so a CPU run takes the same path as a GPU run.
#include <atomic>
#include <cmath>

#include "cpu/parallel.h"
#include "optim/amp/primitives.h"

namespace ember {

void AmpUnscale::eval_cpu(const std::vector<Tensor>& in, std::vector<Tensor>& out) {
  const float inv_scale = *in[0].data<float>();
  float* found_inf = out[0].data<float>();
  std::atomic<bool> non_finite{false};
  for (size_t i = 1; i < out.size(); ++i) {
    const Tensor& g = out[i];
    visit_floating(g.dtype(), name(), [&]<class T>() {
      T* p = g.data<T>();
      const auto inv = static_cast<optim::step_compute_t<T>>(inv_scale);
      cpu::parallel_for(g.numel(), 1, [&](int64_t begin, int64_t end) {
        bool bad = false;
        for (int64_t j = begin; j < end; ++j) bad |= amp::unscale_element(p, inv, j);
        if (bad) non_finite.store(true, std::memory_order_relaxed);
      });
    });
  }
  if (non_finite.load()) *found_inf = 1.0f;
}

void FirstNonFinite::eval_cpu(const std::vector<Tensor>& in, std::vector<Tensor>& out) {
  int32_t* first = out[0].data<int32_t>();
  if (*first <= slot_) return;  // an earlier check saw one already
  for (const Tensor& x : in) {
    std::atomic<bool> non_finite{false};
    visit_floating(x.dtype(), name(), [&]<class T>() {
      using Field = amp::ExponentField<T>;
      const T* p = x.data<T>();
      cpu::parallel_for(x.numel(), 1, [&](int64_t begin, int64_t end) {
        typename Field::Bits hits = 0;  // an OR of compares: vectorizes (SSE2 too), unlike an early exit
        for (int64_t j = begin; j < end; ++j)
          hits |= static_cast<typename Field::Bits>(amp::exponent_field(p[j]) == Field::kAllOnes);
        if (hits) non_finite.store(true, std::memory_order_relaxed);
      });
    });
    if (non_finite.load()) {
      *first = slot_;
      return;
    }
  }
}

void GradScaleUpdate::eval_cpu(const std::vector<Tensor>& in, std::vector<Tensor>& out) {
  amp::update_grad_scale(*out[0].data<float>(), *out[1].data<int32_t>(), *in[0].data<float>() != 0.0f, rule_);
}

void LossScaleUpdate::eval_cpu(const std::vector<Tensor>& in, std::vector<Tensor>& out) {
  int64_t* c = out[1].data<int64_t>();
  amp::LossScalerCounters counters{c[0], c[1], c[2]};
  amp::update_loss_scale(*out[0].data<float>(), counters, *in[0].data<float>() != 0.0f, rule_);
  c[0] = counters.iteration;
  c[1] = counters.last_overflow_iter;
  c[2] = counters.hysteresis_left;
}

void MasterCopyBack::eval_cpu(const std::vector<Tensor>& in, std::vector<Tensor>& out) {
  if (*in[0].data<float>() != 0.0f) return;  // a skipped step leaves the parameters as they are
  int64_t first = 0;  // the tensor's first element among all of the call's, for the noise
  for (size_t t = 0; t < out.size(); ++t) {
    const float* m = in[t + 1].data<float>();
    visit_floating(out[t].dtype(), name(), [&]<class T>() {
      T* p = out[t].data<T>();
      cpu::parallel_for(out[t].numel(), 1, [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) amp::copy_back_element(m, p, i, first + i, rule_);
      });
    });
    first += out[t].numel();
  }
}

}  // namespace ember
