// Front end, shape checks and vjps of conv2d. The three primitives are each other's backward:
// conv(x, w) is bilinear, so d/dx and d/dw are the BackwardInput/BackwardWeight halves, and those
// halves' vjps are conv2d and the other half (double backward comes for free).
#include "nn/conv.h"

#include "nn/primitives/conv.h"
#include "tensor/autocast.h"

namespace ember {

namespace {

int64_t conv_output_size(int64_t in, int64_t k, int64_t pad, int64_t stride, int64_t dilation) {
  return (in + 2 * pad - dilation * (k - 1) - 1) / stride + 1;
}

// Checks input (N, C, H, W) against weight (O, C/groups, kH, kW) and returns the output (N, O, OH, OW).
Shape conv_output_shape(const char* op, const Shape& x, const Shape& w, const Conv2dParams& p) {
  const std::string operands = std::string(op) + ": input " + to_string(x) + " and weight " + to_string(w);
  if (x.size() != 4) throw ShapeError(std::string(op) + ": expected a 4-D input (N, C, H, W), got " + to_string(x));
  if (w.size() != 4)
    throw ShapeError(std::string(op) + ": expected a 4-D weight (O, C/groups, kH, kW), got " + to_string(w));
  if (p.groups < 1) throw ValueError(std::string(op) + ": groups must be positive, got " + std::to_string(p.groups));
  for (int i = 0; i < 2; ++i) {
    // Bounded so that the padded input and the dilated kernel cannot overflow.
    for (const Pair* v : {&p.stride, &p.padding, &p.dilation})
      if ((*v)[i] > kMaxWindowArgument)
        throw ValueError(std::string(op) + ": stride " + pair_str(p.stride) + ", padding " + pair_str(p.padding) +
                         " and dilation " + pair_str(p.dilation) + " must each be at most 2^31 - 1");
    if (w.size() == 4 && w[2 + i] < 1)
      throw ShapeError(operands + ": the kernel size must be positive, got " + pair_str({w[2], w[3]}));
    if (p.stride[i] < 1) throw ValueError(std::string(op) + ": stride must be positive, got " + pair_str(p.stride));
    if (p.dilation[i] < 1)
      throw ValueError(std::string(op) + ": dilation must be positive, got " + pair_str(p.dilation));
    if (p.padding[i] < 0)
      throw ValueError(std::string(op) + ": padding must be non-negative, got " + pair_str(p.padding));
  }
  if (x[1] != w[1] * p.groups)
    throw ShapeError(operands + " disagree on channels (" + std::to_string(x[1]) + " vs " + std::to_string(w[1]) + "*" +
                     std::to_string(p.groups) + ")");
  if (w[0] % p.groups != 0)
    throw ShapeError(operands + ": out channels " + std::to_string(w[0]) + " are not divisible by groups " +
                     std::to_string(p.groups));
  Shape out{x[0], w[0], 0, 0};
  for (int i = 0; i < 2; ++i) {
    const int64_t padded = x[2 + i] + 2 * p.padding[i], span = p.dilation[i] * (w[2 + i] - 1) + 1;
    if (padded < span || w[2 + i] < 1)
      throw ShapeError(operands + ": the padded input " + pair_str({x[2] + 2 * p.padding[0], x[3] + 2 * p.padding[1]}) +
                       " is smaller than the dilated kernel " +
                       pair_str({p.dilation[0] * (w[2] - 1) + 1, p.dilation[1] * (w[3] - 1) + 1}));
    out[2 + i] = conv_output_size(x[2 + i], w[2 + i], p.padding[i], p.stride[i], p.dilation[i]);
  }
  return out;
}

Shape nhwc(const Shape& s) { return {s[0], s[2], s[3], s[1]}; }

void check_same_dtype(const char* op, const char* what, const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype())
    throw DTypeError(std::string(op) + ": input is " + dtype_name(a.dtype()) + " but " + what + " is " +
                     dtype_name(b.dtype()) + "; they must match");
}

Tensor from_nhwc(const Tensor& y, bool channels_last) { return channels_last ? permute(y, {0, 3, 1, 2}) : y; }

Tensor conv_forward(const Tensor& x, const Tensor& w, const Conv2dParams& p, bool channels_last) {
  return from_nhwc(run1(Conv2d{p, channels_last}, {x, w}), channels_last);
}
Tensor conv_backward_input(const Tensor& g, const Tensor& w, const Conv2dParams& p, const Shape& x_shape,
                           bool channels_last) {
  return from_nhwc(run1(Conv2dBackwardInput{p, x_shape, channels_last}, {g, w}), channels_last);
}
Tensor conv_backward_weight(const Tensor& g, const Tensor& x, const Conv2dParams& p, const Shape& w_shape) {
  return run1(Conv2dBackwardWeight{p, w_shape}, {g, x});
}

}  // namespace

// ---- Conv2d

std::vector<OutputSpec> Conv2d::infer(const std::vector<Tensor>& in) const {
  check_same_dtype(name(), "weight", in[0], in[1]);
  const Shape out = conv_output_shape(name(), in[0].shape(), in[1].shape(), p_);
  return {{channels_last_ ? nhwc(out) : out, in[0].dtype()}};
}

std::vector<Tensor> Conv2d::vjp(const std::vector<Tensor>& g, const std::vector<Tensor>& in,
                                const std::vector<Tensor>&) {
  // g (N, O, OH, OW) shaped as the primitive's output; seen as NCHW again.
  const Tensor gy = from_nhwc(g[0], channels_last_);
  Tensor gx, gw;
  if (input_needs_grad(0)) gx = conv_backward_input(gy, in[1], p_, input_meta(0).shape, channels_last_);
  if (input_needs_grad(1)) gw = conv_backward_weight(gy, in[0], p_, input_meta(1).shape);
  return {gx, gw};
}

// ---- Conv2dBackwardInput

std::vector<OutputSpec> Conv2dBackwardInput::infer(const std::vector<Tensor>& in) const {
  const Tensor &g = in[0], &w = in[1];
  if (g.dtype() != w.dtype())
    throw DTypeError(std::string(name()) + ": grad_output is " + dtype_name(g.dtype()) + " but weight is " +
                     dtype_name(w.dtype()));
  const Shape out = conv_output_shape(name(), input_shape_, w.shape(), p_);
  if (!(g.shape() == out))
    throw ShapeError(std::string(name()) + ": grad_output " + to_string(g.shape()) + ", expected " + to_string(out));
  return {{channels_last_ ? nhwc(input_shape_) : input_shape_, g.dtype()}};
}

std::vector<Tensor> Conv2dBackwardInput::vjp(const std::vector<Tensor>& c, const std::vector<Tensor>& in,
                                             const std::vector<Tensor>&) {
  // gx = BI(g, w) is bilinear: <c, BI(g, w)> = <conv(c, w), g>, so d/dg = conv(c, w), d/dw = BW(g, c).
  const Tensor cx = from_nhwc(c[0], channels_last_);  // (N, C, H, W)
  Tensor gg, gw;
  if (input_needs_grad(0)) gg = conv_forward(cx, in[1], p_, false);
  if (input_needs_grad(1)) gw = conv_backward_weight(in[0], cx, p_, input_meta(1).shape);
  return {gg, gw};
}

// ---- Conv2dBackwardWeight

std::vector<OutputSpec> Conv2dBackwardWeight::infer(const std::vector<Tensor>& in) const {
  const Tensor &g = in[0], &x = in[1];
  if (g.dtype() != x.dtype())
    throw DTypeError(std::string(name()) + ": grad_output is " + dtype_name(g.dtype()) + " but input is " +
                     dtype_name(x.dtype()));
  const Shape out = conv_output_shape(name(), x.shape(), weight_shape_, p_);
  if (!(g.shape() == out))
    throw ShapeError(std::string(name()) + ": grad_output " + to_string(g.shape()) + ", expected " + to_string(out));
  return {{weight_shape_, g.dtype()}};
}

std::vector<Tensor> Conv2dBackwardWeight::vjp(const std::vector<Tensor>& c, const std::vector<Tensor>& in,
                                              const std::vector<Tensor>&) {
  // gw = BW(g, x): <c, BW(g, x)> = <g, conv(x, c)>, so d/dg = conv(x, c), d/dx = BI(g, c).
  Tensor gg, gx;
  if (input_needs_grad(0)) gg = conv_forward(in[1], c[0], p_, false);
  if (input_needs_grad(1)) gx = conv_backward_input(in[0], c[0], p_, input_meta(1).shape, false);
  return {gg, gx};
}

// ---- front end

Tensor conv2d(const Tensor& input_in, const Tensor& weight_in, const Tensor& bias_in, Pair stride, Pair padding,
              Pair dilation, int64_t groups) {
  const auto [input, weight, bias] = amp::autocast_args("conv2d", input_in, weight_in, bias_in);
  const Conv2dParams p{stride, padding, dilation, groups};
  const Shape out = conv_output_shape("conv2d", input.shape(), weight.shape(), p);
  if (!input.is_floating_point())
    throw DTypeError(std::string("conv2d: expected a floating input, got ") + dtype_name(input.dtype()));
  check_same_dtype("conv2d", "weight", input, weight);
  if (bias.defined()) {
    check_same_dtype("conv2d", "bias", input, bias);
    if (!(bias.shape() == Shape{weight.shape()[0]}))
      throw ShapeError("conv2d: bias " + to_string(bias.shape()) + " must have shape (" +
                       std::to_string(weight.shape()[0]) + ",) for weight " + to_string(weight.shape()));
  }
  (void)out;
  const bool channels_last = is_channels_last(input);
  Tensor y = run1(Conv2d{p, channels_last}, {input, weight});  // (N, O, OH, OW), or (N, OH, OW, O)
  if (bias.defined()) y = channels_last ? add(y, bias) : add(y, reshape(bias, {-1, 1, 1}));
  return from_nhwc(y, channels_last);
}

Tensor conv2d(const Tensor& input, const Tensor& weight, const Tensor& bias, Pair stride, PaddingMode padding,
              Pair dilation, int64_t groups) {
  if (padding == PaddingMode::valid) return conv2d(input, weight, bias, stride, {0, 0}, dilation, groups);
  if (stride[0] != 1 || stride[1] != 1)
    throw ValueError("conv2d: padding 'same' needs stride 1, got (" + std::to_string(stride[0]) + ", " +
                     std::to_string(stride[1]) + ")");
  if (weight.dim() != 4)
    throw ShapeError("conv2d: weight " + to_string(weight.shape()) + " must be (out, in/groups, kH, kW)");
  Pair before{};
  std::vector<int64_t> extra(4, 0);  // pad()'s (left, right, top, bottom): the odd element after
  for (int i = 0; i < 2; ++i) {
    const int64_t total = dilation[i] * (weight.size(2 + i) - 1);
    before[i] = total / 2;
    extra[2 * (1 - i) + 1] = total - 2 * before[i];
  }
  const bool asymmetric = extra[1] != 0 || extra[3] != 0;
  return conv2d(asymmetric ? pad(input, extra) : input, weight, bias, stride, before, dilation, groups);
}

}  // namespace ember
