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

// A class weight must be undefined or (C) of the input's dtype and device.
void check_class_weight(const char* op, const Tensor& weight, const Tensor& input) {
  if (!weight.defined()) return;
  const int64_t C = input.size(1);
  const std::string w = std::string(op) + ": weight " + to_string(weight.shape()) + " " + dtype_name(weight.dtype()) +
                        " on " + weight.device().str();
  if (weight.dim() != 1 || weight.size(0) != C)
    throw ShapeError(w + " must hold one value per class: (" + std::to_string(C) + ") for input " +
                     to_string(input.shape()));
  if (weight.dtype() != input.dtype()) throw DTypeError(w + " must have the input's dtype " + dtype_name(input.dtype()));
  if (!(weight.device() == input.device())) throw DeviceError(w + " is not on the input's device " + input.device().str());
}

// The weight as (1, C, 1...) against an input of `dims` dims, in dtype ct.
Tensor class_broadcast(const Tensor& weight, int64_t dims, DType ct) {
  Shape s = Dims::filled(dims, 1);
  s[1] = weight.size(0);
  return weight.to(ct).reshape(s);
}

// w[t] at each position of the checked targets t (N, d...) in dtype ct, 0 where ignored.
Tensor target_weights(const Tensor& t, const Tensor& ignored, const Tensor& weight, DType ct) {
  const Tensor classes = masked_fill(t, ignored, 0.0);  // a class index everywhere
  return masked_fill(reshape(index_select(weight.to(ct), 0, classes.flatten()), t.shape()), ignored, 0.0);
}

// The negative log likelihood of x (N, C, d...) at the checked targets t (N, d...), where `ignored`
// marks the targets equal to ignore_index and w holds target_weights() (undefined: no class
// weight), in x's dtype; the mean's sums run in f32 for 16-bit x, divided once by the kept
// targets' total weight.
Tensor weighted_nll(const Tensor& x, const Tensor& t, const Tensor& ignored, const Tensor& w, Reduction r) {
  const Tensor picked = gather(x, 1, masked_fill(t, ignored, 0.0).unsqueeze(1)).squeeze(1);
  Tensor loss = masked_fill(-picked, ignored, 0.0);
  if (w.defined()) loss = loss * w.to(x.dtype());
  // Without a weight an integer count: 70000 kept targets are inf in f16.
  const Tensor total = w.defined() ? sum(w) : sum(logical_not(ignored));
  if (r == Reduction::mean) return (sum(loss, {}, false, opmath_dtype(x.dtype())) / total).to(x.dtype());
  if (r == Reduction::sum) return sum(loss);
  return loss;
}

// Checks that every target not ignored names a class (a host read of the targets).
void check_targets(const char* op, const Tensor& t, int64_t C, int64_t ignore_index) {
  for (const int64_t v : t.to_vector<int64_t>())
    if (v != ignore_index && (v < 0 || v >= C))
      throw IndexError(std::string(op) + ": target " + std::to_string(v) + " is out of bounds for " +
                       std::to_string(C) + " classes (ignore_index " + std::to_string(ignore_index) + ")");
}

// Cross entropy with class indices and a class weight, as PyTorch composes it (nll_loss of
// log_softmax, plus the smoothing term reduced with nll's denominator: cross_entropy_loss_label_smoothing
// in aten/src/ATen/native/LossNLL.cpp). Logits x (N, C, d...), targets checked.
Tensor weighted_cross_entropy(const Tensor& x, const Tensor& t, const Tensor& weight, Reduction r, int64_t ignore_index,
                              double e) {
  const DType ct = opmath_dtype(x.dtype());
  const Tensor lp = log_softmax(x.to(ct), 1);
  const Tensor ignored = eq(t, Scalar(ignore_index));  // (N, d...)
  const Tensor w = target_weights(t, ignored, weight, ct);
  Tensor loss = weighted_nll(lp, t, ignored, w, r);
  if (e > 0) {
    Tensor smooth = masked_fill(-sum(lp * class_broadcast(weight, x.dim(), ct), {1}), ignored, 0.0);  // (N, d...)
    if (r == Reduction::sum) smooth = sum(smooth);
    if (r == Reduction::mean) smooth = sum(smooth) / sum(w);
    loss = loss * (1 - e) + smooth * (e / static_cast<double>(x.size(1)));
  }
  return loss.to(x.dtype());
}

// Cross entropy with class-probability targets (PyTorch's cross_entropy_loss_prob_target): logits x
// and target q of one shape (N, C, d...), weight undefined or checked.
Tensor probability_cross_entropy(const Tensor& x, const Tensor& q, const Tensor& weight, Reduction r, double e) {
  const DType ct = opmath_dtype(x.dtype());
  const int64_t C = x.size(1);
  Tensor target = q.to(ct);
  if (e > 0) target = target * (1 - e) + e / static_cast<double>(C);
  Tensor terms = log_softmax(x.to(ct), 1) * target;
  if (weight.defined()) terms = terms * class_broadcast(weight, x.dim(), ct);
  Tensor loss;
  if (r == Reduction::none) loss = -sum(terms, {1});
  else if (r == Reduction::sum) loss = -sum(terms);
  else loss = -sum(terms) / static_cast<double>(C == 0 ? 0 : x.numel() / C);  // no positions: 0 / 0, NaN
  return loss.to(x.dtype());
}

}  // namespace

std::vector<OutputSpec> CrossEntropy::infer(const std::vector<Tensor>& in) const {
  if (reduction_ == Reduction::none) return {{in[1].shape(), in[0].dtype()}};
  return {{Shape{}, in[0].dtype()}};
}

Tensor cross_entropy(const Tensor& logits_in, const Tensor& target_in, const std::string& reduction,
                     int64_t ignore_index, double label_smoothing, const Tensor& weight_in) {
  const auto [logits, target, weight] = amp::autocast_args("cross_entropy", logits_in, target_in, weight_in);
  const char* op = "cross_entropy";
  const Reduction r = parse_reduction(op, reduction);
  if (!(label_smoothing >= 0 && label_smoothing <= 1))
    throw ValueError(std::string(op) + ": label_smoothing must be in [0, 1], got " + std::to_string(label_smoothing));
  Tensor x = logits, t = target;
  bool unbatched = false;
  const std::string args = "input " + to_string(x.shape()) + " " + dtype_name(x.dtype()) + " and target " +
                           to_string(t.shape()) + " " + dtype_name(t.dtype());
  // As PyTorch: a target of the input's shape holds class probabilities, any other class indices.
  if (x.dim() >= 1 && x.shape() == t.shape()) {
    if (!is_floating(x.dtype()) || t.dtype() != x.dtype())
      throw DTypeError(std::string(op) + ": a target of the input's shape holds class probabilities, of the input's "
                       "floating dtype; got " + args);
    if (!(t.device() == x.device()))
      throw DeviceError(std::string(op) + ": target on " + t.device().str() + " and input on " + x.device().str());
    if (ignore_index >= 0)
      throw ValueError(std::string(op) + ": ignore_index " + std::to_string(ignore_index) +
                       " names a class, but class-probability targets have none to ignore (" + args + ")");
    unbatched = x.dim() == 1;
    if (unbatched) {
      x = x.unsqueeze(0);
      t = t.unsqueeze(0);
    }
    check_class_weight(op, weight, x);
    const Tensor loss = probability_cross_entropy(x, t, weight, r, label_smoothing);
    return unbatched && r == Reduction::none ? loss.squeeze(0) : loss;
  }
  if (is_floating(t.dtype()))
    throw DTypeError(std::string(op) + ": the target holds neither class indices (i64 or i32) nor class "
                     "probabilities (the input's shape); got " + args);
  check_class_input(op, x, t, &unbatched);
  check_class_weight(op, weight, x);
  Tensor loss;
  if (weight.defined()) {
    check_targets(op, t, x.size(1), ignore_index);
    loss = weighted_cross_entropy(x, t, weight, r, ignore_index, label_smoothing);
  } else {
    if (x.size(1) == 0) check_targets(op, t, 0, ignore_index);  // the fused kernel would give nan
    loss = run1(CrossEntropy(r, ignore_index, label_smoothing), {x.contiguous(), t.contiguous()});
  }
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
                int64_t ignore_index, const Tensor& weight_in) {
  const auto [log_probs, target, weight] = amp::autocast_args("nll_loss", log_probs_in, target_in, weight_in);
  const char* op = "nll_loss";
  const Reduction r = parse_reduction(op, reduction);
  Tensor x = log_probs, t = target;
  bool unbatched = false;
  check_class_input(op, x, t, &unbatched);
  check_class_weight(op, weight, x);
  check_targets(op, t, x.size(1), ignore_index);
  const Tensor ignored = eq(t, Scalar(ignore_index));
  const Tensor w = weight.defined() ? target_weights(t, ignored, weight, opmath_dtype(x.dtype())) : Tensor();
  const Tensor loss = weighted_nll(x, t, ignored, w, r);
  return unbatched && r == Reduction::none ? loss.squeeze(0) : loss;
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
