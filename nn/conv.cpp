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

namespace {

// Checks a conv's bias against its input's dtype and its out channels.
void check_bias(const char* op, const Tensor& input, const Tensor& bias, int64_t out_channels, const Tensor& weight) {
  if (!bias.defined()) return;
  check_same_dtype(op, "bias", input, bias);
  if (!(bias.shape() == Shape{out_channels}))
    throw ShapeError(std::string(op) + ": bias " + to_string(bias.shape()) + " must have shape (" +
                     std::to_string(out_channels) + ",) for weight " + to_string(weight.shape()));
}

// The primitive's output y, (N, C, H, W) or (N, H, W, C) when channels_last, plus the bias per channel,
// seen NCHW-shaped.
Tensor add_bias(Tensor y, const Tensor& bias, bool channels_last) {
  if (bias.defined()) y = channels_last ? add(y, bias) : add(y, reshape(bias, {-1, 1, 1}));
  return from_nhwc(y, channels_last);
}

void check_floating(const char* op, const Tensor& input) {
  if (!input.is_floating_point())
    throw DTypeError(std::string(op) + ": expected a floating input, got " + dtype_name(input.dtype()));
}

// conv_transpose2d's output extent along one dim: (in - 1) stride - 2 pad + dilation (k - 1) +
// output_padding + 1 (PyTorch's ConvTranspose2d docs), or -1 when it is beyond 2^62.
int64_t transposed_size(int64_t in, int64_t k, int64_t pad, int64_t stride, int64_t dilation, int64_t output_padding) {
  int64_t grown = 0, span = 0, size = 0;
  if (__builtin_mul_overflow(in - 1, stride, &grown) || __builtin_mul_overflow(dilation, k - 1, &span) ||
      __builtin_add_overflow(grown, span, &size) || __builtin_add_overflow(size, output_padding + 1 - 2 * pad, &size) ||
      size > (int64_t{1} << 62))
    return -1;
  return size;
}

}  // namespace

Tensor conv2d(const Tensor& input_in, const Tensor& weight_in, const Tensor& bias_in, Pair stride, Pair padding,
              Pair dilation, int64_t groups) {
  const auto [input, weight, bias] = amp::autocast_args("conv2d", input_in, weight_in, bias_in);
  const Conv2dParams p{stride, padding, dilation, groups};
  conv_output_shape("conv2d", input.shape(), weight.shape(), p);
  check_floating("conv2d", input);
  check_same_dtype("conv2d", "weight", input, weight);
  check_bias("conv2d", input, bias, weight.shape()[0], weight);
  const bool channels_last = is_channels_last(input);
  return add_bias(run1(Conv2d{p, channels_last}, {input, weight}), bias, channels_last);
}

Tensor conv_transpose2d(const Tensor& input_in, const Tensor& weight_in, const Tensor& bias_in, Pair stride,
                        Pair padding, Pair output_padding, int64_t groups, Pair dilation) {
  static constexpr const char* op = "conv_transpose2d";
  const auto [input, weight, bias] = amp::autocast_args(op, input_in, weight_in, bias_in);
  const Shape &x = input.shape(), &w = weight.shape();
  if (x.size() != 4) throw ShapeError(std::string(op) + ": expected a 4-D input (N, C_in, H, W), got " + to_string(x));
  if (w.size() != 4)
    throw ShapeError(std::string(op) + ": expected a 4-D weight (C_in, C_out/groups, kH, kW), got " + to_string(w));
  if (groups < 1) throw ValueError(std::string(op) + ": groups must be positive, got " + std::to_string(groups));
  if (x[1] != w[0])
    throw ShapeError(std::string(op) + ": input " + to_string(x) + " has " + std::to_string(x[1]) +
                     " channels but weight " + to_string(w) + " takes " + std::to_string(w[0]));
  if (w[0] % groups != 0)
    throw ShapeError(std::string(op) + ": the input channels " + std::to_string(w[0]) + " of weight " + to_string(w) +
                     " are not divisible by groups " + std::to_string(groups));
  int64_t out_channels = 0;
  if (__builtin_mul_overflow(w[1], groups, &out_channels))
    throw ShapeError(std::string(op) + ": weight " + to_string(w) + " with groups " + std::to_string(groups) +
                     " gives more output channels than an int64 holds");
  if (w[2] < 1 || w[3] < 1)
    throw ShapeError(std::string(op) + ": the kernel size must be positive, got weight " + to_string(w));
  check_floating(op, input);
  check_same_dtype(op, "weight", input, weight);
  check_bias(op, input, bias, out_channels, weight);
  Shape out{x[0], out_channels, 0, 0};
  for (int i = 0; i < 2; ++i) {
    // Arguments out of range are named by conv_output_shape below.
    const auto in_range = [](int64_t v, int64_t low) { return v >= low && v <= kMaxWindowArgument; };
    if (!in_range(stride[i], 1) || !in_range(dilation[i], 1) || !in_range(padding[i], 0)) continue;
    if (output_padding[i] < 0 || output_padding[i] >= std::max(stride[i], dilation[i]))
      throw ValueError(std::string(op) + ": output_padding " + pair_str(output_padding) +
                       " must be non-negative and smaller than either stride " + pair_str(stride) +
                       " or dilation " + pair_str(dilation));
    out[2 + i] = transposed_size(x[2 + i], w[2 + i], padding[i], stride[i], dilation[i], output_padding[i]);
    if (out[2 + i] < 1)
      throw ShapeError(std::string(op) + ": input " + to_string(x) + ", weight " + to_string(w) + ", stride " +
                       pair_str(stride) + ", padding " + pair_str(padding) + " and dilation " + pair_str(dilation) +
                       " give no output (or one too large to count)");
  }
  const Conv2dParams p{stride, padding, dilation, groups};
  // The conv whose input gradient this is; it checks the remaining arguments and the channel counts.
  const Shape conv_out = conv_output_shape(op, out, w, p);
  // With output_padding >= stride (dilation > stride) that conv's output is larger than the input:
  // its extra positions contribute nothing, so the input is padded with zeros there.
  Tensor g = input;
  if (conv_out[2] != x[2] || conv_out[3] != x[3]) g = pad(input, {0, conv_out[3] - x[3], 0, conv_out[2] - x[2]});
  const bool channels_last = is_channels_last(input);
  return add_bias(run1(Conv2dBackwardInput{p, out, channels_last}, {g, weight}), bias, channels_last);
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
