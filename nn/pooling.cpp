// Front ends, shape checks and vjps of max_pool2d, avg_pool2d and adaptive_avg_pool2d.
#include "nn/pooling.h"

#include "nn/primitives/pooling.h"
#include "tensor/autocast.h"
#include "tensor/layout.h"

namespace ember {

namespace {

int64_t floor_div(int64_t a, int64_t b) { return a / b - ((a % b != 0) && ((a < 0) != (b < 0))); }

void check_input(const char* op, const Tensor& x) {
  if (x.dim() != 4) throw ShapeError(std::string(op) + ": expected a 4-D input (N, C, H, W), got " + to_string(x.shape()));
  if (!x.is_floating_point()) throw DTypeError(std::string(op) + ": expected a floating input, got " + dtype_name(x.dtype()));
}

// The output shape of a regular (non-adaptive) pooling, with PyTorch's argument checks.
Shape pooled_shape(const char* op, const Shape& x, const Pool2dParams& p, bool is_max) {
  for (int i = 0; i < 2; ++i) {
    // Bounded so that the window arithmetic (dilation * kernel, kernel * kernel) cannot overflow.
    for (const Pair* v : {&p.kernel, &p.stride, &p.padding, &p.dilation})
      if ((*v)[i] > kMaxWindowArgument)
        throw ValueError(std::string(op) + ": kernel " + pair_str(p.kernel) + ", stride " + pair_str(p.stride) +
                         ", padding " + pair_str(p.padding) + " and dilation " + pair_str(p.dilation) +
                         " must each be at most 2^31 - 1");
    if (p.kernel[i] < 1) throw ValueError(std::string(op) + ": kernel size must be positive, got " + pair_str(p.kernel));
    if (p.stride[i] < 1) throw ValueError(std::string(op) + ": stride must be positive, got " + pair_str(p.stride));
    if (p.dilation[i] < 1) throw ValueError(std::string(op) + ": dilation must be positive, got " + pair_str(p.dilation));
    if (p.padding[i] < 0 || p.padding[i] > p.kernel[i] / 2)
      throw ValueError(std::string(op) + ": padding " + pair_str(p.padding) +
                       " must be non-negative and at most half the kernel size " + pair_str(p.kernel));
  }
  (void)is_max;
  Shape out{x[0], x[1], 0, 0};
  for (int i = 0; i < 2; ++i)
    out[2 + i] = pool_output_size(x[2 + i], p.kernel[i], p.padding[i], p.stride[i], p.dilation[i], p.ceil_mode);
  if (out[2] < 1 || out[3] < 1)
    throw ShapeError(std::string(op) + ": input " + to_string(x) + " gives output size " +
                     pair_str({out[2], out[3]}) + " with kernel " + pair_str(p.kernel) + ", stride " +
                     pair_str(p.stride) + ", padding " + pair_str(p.padding) + ", dilation " + pair_str(p.dilation) +
                     ": too small");
  return out;
}

Shape avg_output_shape(const char* op, const Shape& x, const Pool2dParams& p) {
  if (!p.adaptive) return pooled_shape(op, x, p, false);
  if (p.output_size[0] < 1 || p.output_size[1] < 1)
    throw ValueError(std::string(op) + ": output size must be positive, got " + pair_str(p.output_size));
  if (x[2] < 1 || x[3] < 1)
    throw ShapeError(std::string(op) + ": input " + to_string(x) + " has an empty plane");
  return {x[0], x[1], p.output_size[0], p.output_size[1]};
}

// AvgPool2d of x, in x's layout.
Tensor avg_pool(Pool2dParams p, const Tensor& x) {
  p.channels_last = is_channels_last(x);
  const Tensor y = run1(AvgPool2d{p}, {x});
  return p.channels_last ? to_channels_last(y) : y;
}

Pool2dParams regular(Pair kernel, std::optional<Pair> stride, Pair padding, Pair dilation, bool ceil_mode) {
  Pool2dParams p;
  p.kernel = kernel;
  p.stride = stride.value_or(kernel);
  p.padding = padding;
  p.dilation = dilation;
  p.ceil_mode = ceil_mode;
  return p;
}

}  // namespace

int64_t pool_output_size(int64_t in, int64_t kernel, int64_t pad, int64_t stride, int64_t dilation, bool ceil_mode) {
  int64_t out = floor_div(in + 2 * pad - dilation * (kernel - 1) - 1 + (ceil_mode ? stride - 1 : 0), stride) + 1;
  if (ceil_mode && (out - 1) * stride >= in + pad) --out;  // the last window must start inside the input or left padding
  return out;
}

// ---- MaxPool2d

std::vector<OutputSpec> MaxPool2d::infer(const std::vector<Tensor>& in) const {
  const Shape out = pooled_shape(name(), in[0].shape(), p_, true);
  return {{out, in[0].dtype()}, {out, DType::i64}};
}

std::vector<Tensor> MaxPool2d::vjp(const std::vector<Tensor>& g, const std::vector<Tensor>&,
                                   const std::vector<Tensor>& out) {
  // Scatter g to the argmax of each window: gx (N, C, H*W) [indices (N, C, OH*OW)] += g (N, C, OH*OW).
  const Shape& xs = input_meta(0).shape;
  const Tensor& gy = g[0];
  const Tensor flat = scatter_add(zeros({xs[0], xs[1], xs[2] * xs[3]}, TensorOptions(gy.dtype()).with_device(gy.device())),
                                  2, reshape(out[1], {xs[0], xs[1], -1}), reshape(gy, {xs[0], xs[1], -1}));
  const Tensor gx = reshape(flat, xs);
  return {p_.channels_last ? to_channels_last(gx) : gx};
}

// ---- AvgPool2d and its backward

std::vector<OutputSpec> AvgPool2d::infer(const std::vector<Tensor>& in) const {
  return {{avg_output_shape(name(), in[0].shape(), p_), in[0].dtype()}};
}

std::vector<Tensor> AvgPool2d::vjp(const std::vector<Tensor>& g, const std::vector<Tensor>&,
                                   const std::vector<Tensor>&) {
  const Shape& xs = input_meta(0).shape;
  const Tensor gx = run1(AvgPool2dBackward{p_, {xs[2], xs[3]}}, {g[0]});
  return {p_.channels_last ? to_channels_last(gx) : gx};
}

std::vector<OutputSpec> AvgPool2dBackward::infer(const std::vector<Tensor>& in) const {
  const Shape& gs = in[0].shape();
  const Shape xs{gs[0], gs[1], input_hw_[0], input_hw_[1]};
  const Shape expected = avg_output_shape(name(), xs, p_);
  if (!(gs == expected))
    throw ShapeError(std::string(name()) + ": grad_output " + to_string(gs) + ", expected " + to_string(expected));
  return {{xs, in[0].dtype()}};
}

std::vector<Tensor> AvgPool2dBackward::vjp(const std::vector<Tensor>& g, const std::vector<Tensor>&,
                                           const std::vector<Tensor>&) {
  return {run1(AvgPool2d{p_}, {g[0]})};  // the adjoint of the adjoint
}

// ---- front ends

ValuesIndices max_pool2d_with_indices(const Tensor& input_in, Pair kernel, std::optional<Pair> stride, Pair padding,
                                      Pair dilation, bool ceil_mode) {
  const auto [input] = amp::autocast_args("max_pool2d", input_in);
  check_input("max_pool2d", input);
  Pool2dParams p = regular(kernel, stride, padding, dilation, ceil_mode);
  p.channels_last = is_channels_last(input);
  const std::vector<Tensor> out = run(MaxPool2d{p}, {input});
  return {p.channels_last ? to_channels_last(out[0]) : out[0], out[1]};
}

Tensor max_pool2d(const Tensor& input, Pair kernel, std::optional<Pair> stride, Pair padding, Pair dilation,
                  bool ceil_mode) {
  return max_pool2d_with_indices(input, kernel, stride, padding, dilation, ceil_mode).values;
}

Tensor avg_pool2d(const Tensor& input_in, Pair kernel, std::optional<Pair> stride, Pair padding, bool ceil_mode,
                  bool count_include_pad, std::optional<int64_t> divisor_override) {
  const auto [input] = amp::autocast_args("avg_pool2d", input_in);
  check_input("avg_pool2d", input);
  if (divisor_override && *divisor_override == 0)
    throw ValueError("avg_pool2d: divisor_override must not be 0 (input " + to_string(input.shape()) + ")");
  Pool2dParams p = regular(kernel, stride, padding, {1, 1}, ceil_mode);
  p.count_include_pad = count_include_pad;
  p.divisor_override = divisor_override.value_or(0);
  return avg_pool(p, input);
}

Tensor adaptive_avg_pool2d(const Tensor& input_in, Pair output_size) {
  const auto [input] = amp::autocast_args("adaptive_avg_pool2d", input_in);
  check_input("adaptive_avg_pool2d", input);
  Pool2dParams p;
  p.adaptive = true;
  p.output_size = output_size;
  return avg_pool(p, input);
}

}  // namespace ember
