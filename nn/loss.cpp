// Front ends of the losses and the vjp of the fused cross entropy.
#include "nn/loss.h"

#include <cmath>

#include "autograd/grad_mode.h"
#include "nn/primitives/loss.h"
#include "tensor/autocast.h"

namespace ember {

namespace {

Reduction parse_reduction(const char* op, const std::string& r) {
  if (r == "mean") return Reduction::mean;
  if (r == "sum") return Reduction::sum;
  if (r == "none") return Reduction::none;
  throw ValueError(std::string(op) + ": reduction must be 'mean', 'sum' or 'none', got '" + r + "'");
}

// Checks logits / log-probs (N, C, d1...) against target (N, d1...) and returns them with a
// batch dim added when the input is (C) and the target 0-dim.
void check_class_input(const char* op, Tensor& input, Tensor& target, bool* unbatched) {
  if (!is_floating(input.dtype()))
    throw DTypeError(std::string(op) + ": expected floating input, got " + dtype_name(input.dtype()));
  if (target.dtype() != DType::i64 && target.dtype() != DType::i32)
    throw DTypeError(std::string(op) + ": expected target of class indices (i64 or i32), got " +
                     dtype_name(target.dtype()));
  *unbatched = input.dim() == 1 && target.dim() == 0;
  if (*unbatched) {
    input = input.unsqueeze(0);
    target = target.unsqueeze(0);
  }
  bool ok = input.dim() >= 2 && target.dim() == input.dim() - 1 && target.size(0) == input.size(0);
  for (int d = 2; ok && d < input.dim(); ++d) ok = target.size(d - 1) == input.size(d);
  if (!ok)
    throw ShapeError(std::string(op) + ": input " + to_string(input.shape()) + " and target " +
                     to_string(target.shape()) + " don't match (expected input (N, C, d1...) and target (N, d1...))");
}

Tensor reduce(const Tensor& loss, Reduction r) {
  if (r == Reduction::mean) return mean(loss);
  if (r == Reduction::sum) return sum(loss);
  return loss;
}

}  // namespace

std::vector<OutputSpec> CrossEntropy::infer(const std::vector<Tensor>& in) const {
  if (reduction_ == Reduction::none) return {{in[1].shape(), in[0].dtype()}};
  return {{Shape{}, in[0].dtype()}};
}

Tensor cross_entropy(const Tensor& logits_in, const Tensor& target_in, const std::string& reduction,
                     int64_t ignore_index, double label_smoothing) {
  const auto [logits, target] = amp::autocast_args("cross_entropy", logits_in, target_in);
  const char* op = "cross_entropy";
  const Reduction r = parse_reduction(op, reduction);
  if (!(label_smoothing >= 0 && label_smoothing <= 1))
    throw ValueError(std::string(op) + ": label_smoothing must be in [0, 1], got " + std::to_string(label_smoothing));
  Tensor x = logits, t = target;
  bool unbatched = false;
  check_class_input(op, x, t, &unbatched);
  Tensor loss = run1(CrossEntropy(r, ignore_index, label_smoothing), {x.contiguous(), t.contiguous()});
  return unbatched && r == Reduction::none ? loss.squeeze(0) : loss;
}

// With p = softmax(logits) over dim 1, onehot the target's class and keep = (target != ignore):
//   dlogits = (p - (1 - e) * onehot - e / C) * keep * s,
// s = g per position (none), g (sum) or g / count(keep) (mean). Computed by the
// CrossEntropyBackward kernel, or with public ops when the backward is recorded: in f32 for 16-bit
// logits, rounded once, and the count an integer (70000 kept positions are inf in f16).
std::vector<Tensor> CrossEntropy::vjp(const std::vector<Tensor>& g, const std::vector<Tensor>& in,
                                      const std::vector<Tensor>&) {
  if (!autograd::GradMode::is_enabled())  // first order: the fused backward kernel
    return {run1(CrossEntropyBackward(reduction_, ignore_index_, label_smoothing_), {in[0], in[1], g[0].contiguous()}),
            Tensor()};
  const DType ct = opmath_dtype(in[0].dtype());
  const Tensor x = in[0].to(ct);        // (N, C, d...)
  const Tensor t = in[1].unsqueeze(1);  // (N, 1, d...)
  const int64_t C = x.size(1);
  Shape cs = Dims::filled(x.dim(), 1);
  cs[1] = C;
  const Tensor onehot = eq(arange(C, DType::i64, x.device()).reshape(cs), t).to(ct);  // (N, C, d...)
  const Tensor keep = ne(t, Scalar(ignore_index_));                                  // (N, 1, d...)
  const double e = label_smoothing_;
  Tensor d = (softmax(x, 1) - onehot * (1 - e) - e / static_cast<double>(C)) * keep.to(ct);
  Tensor s = g[0].to(ct);
  if (reduction_ == Reduction::none) s = s.unsqueeze(1);
  else if (reduction_ == Reduction::mean) s = s / sum(keep);
  return {d * s, Tensor()};
}

Tensor nll_loss(const Tensor& log_probs_in, const Tensor& target_in, const std::string& reduction,
                int64_t ignore_index) {
  const auto [log_probs, target] = amp::autocast_args("nll_loss", log_probs_in, target_in);
  const char* op = "nll_loss";
  const Reduction r = parse_reduction(op, reduction);
  Tensor x = log_probs, t = target;
  bool unbatched = false;
  check_class_input(op, x, t, &unbatched);
  const int64_t C = x.size(1);
  for (const int64_t v : t.to_vector<int64_t>())
    if (v != ignore_index && (v < 0 || v >= C))
      throw IndexError(std::string(op) + ": target " + std::to_string(v) + " is out of bounds for " +
                       std::to_string(C) + " classes (ignore_index " + std::to_string(ignore_index) + ")");
  const Tensor keep = ne(t, Scalar(ignore_index));                           // (N, d...)
  const Tensor safe = where(keep, t, zeros_like(t)).unsqueeze(1);            // (N, 1, d...)
  const Tensor picked = gather(x, 1, safe).squeeze(1);                       // (N, d...)
  Tensor loss = where(keep, -picked, zeros_like(picked));
  // The mean sums 16-bit losses in f32 and divides there by the integer count, rounding once.
  if (r == Reduction::mean) return (sum(loss, {}, false, opmath_dtype(loss.dtype())) / sum(keep)).to(loss.dtype());
  if (r == Reduction::sum) return sum(loss);
  return unbatched ? loss.squeeze(0) : loss;
}

Tensor mse_loss(const Tensor& a_in, const Tensor& b_in, const std::string& reduction) {
  const auto [a, b] = amp::autocast_args("mse_loss", a_in, b_in);
  const Reduction r = parse_reduction("mse_loss", reduction);
  const DType dt = result_type(a, b);
  // 16-bit inputs: the difference is squared in f32, as PyTorch's kernel does, then the result
  // returns to the inputs' dtype (rounding the difference first would cost a few ulp).
  if (is_reduced_float(dt)) return reduce(square(a.to(DType::f32) - b.to(DType::f32)), r).to(dt);
  return reduce(square(a - b), r);
}

}  // namespace ember
