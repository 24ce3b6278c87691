// ember.nn.functional's C++ half: the functional ops of nn/*.h (convolution, pooling, normalisation,
// dropout, embedding, losses, attention) and tensor/ops.h's pad, under PyTorch's argument names and
// defaults. Sizes given as an int or a pair are read here; the ops themselves run with the GIL
// released (arguments are converted first, tensors held by value).
#include <nanobind/stl/array.h>

#include "python/ember/bind.h"
#include "python/ember/ember_headers_train.h"

namespace ember::python {

namespace {

using Pair = std::array<int64_t, 2>;

// An int (both dims) or a sequence of two ints, as PyTorch's _pair.
Pair pair_of(nb::handle h, const char* fn, const char* what) {
  if (PyIndex_Check(h.ptr())) {
    const int64_t v = nb::cast<int64_t>(h);
    return {v, v};
  }
  if (PySequence_Check(h.ptr()) && !nb::isinstance<nb::str>(h)) {
    const auto v = nb::cast<std::vector<int64_t>>(h);
    if (v.size() == 1) return {v[0], v[0]};
    if (v.size() == 2) return {v[0], v[1]};
  }
  throw ValueError(std::string(fn) + ": " + what + " must be an int or a pair of ints, got " +
                   nb::cast<std::string>(nb::repr(h)));
}

std::optional<Pair> optional_pair(nb::handle h, const char* fn, const char* what) {
  if (h.is_none()) return std::nullopt;
  // PyTorch's stride=[] means the default (the kernel size).
  if (PySequence_Check(h.ptr()) && !nb::isinstance<nb::str>(h) && PySequence_Size(h.ptr()) == 0) return std::nullopt;
  return pair_of(h, fn, what);
}

Tensor or_undefined(const std::optional<Tensor>& t) { return t ? *t : Tensor(); }

Tensor conv2d(Tensor input, Tensor weight, std::optional<Tensor> bias, nb::handle stride_h, nb::handle padding_h,
              nb::handle dilation_h, int64_t groups) {
  const Pair stride = pair_of(stride_h, "conv2d", "stride");
  const Pair dilation = pair_of(dilation_h, "conv2d", "dilation");
  const Tensor b = or_undefined(bias);
  if (nb::isinstance<nb::str>(padding_h)) {
    const std::string mode = nb::cast<std::string>(padding_h);
    PaddingMode pm;
    if (mode == "same") pm = PaddingMode::same;
    else if (mode == "valid") pm = PaddingMode::valid;
    else throw ValueError("conv2d: padding must be 'same', 'valid', an int or a pair, got '" + mode + "'");
    nb::gil_scoped_release release;
    return ember::conv2d(input, weight, b, stride, pm, dilation, groups);
  }
  const Pair padding = pair_of(padding_h, "conv2d", "padding");
  nb::gil_scoped_release release;
  return ember::conv2d(input, weight, b, stride, padding, dilation, groups);
}

Tensor conv_transpose2d(Tensor input, Tensor weight, std::optional<Tensor> bias, nb::handle stride_h,
                        nb::handle padding_h, nb::handle output_padding_h, int64_t groups, nb::handle dilation_h) {
  const Pair stride = pair_of(stride_h, "conv_transpose2d", "stride");
  const Pair padding = pair_of(padding_h, "conv_transpose2d", "padding");
  const Pair output_padding = pair_of(output_padding_h, "conv_transpose2d", "output_padding");
  const Pair dilation = pair_of(dilation_h, "conv_transpose2d", "dilation");
  const Tensor b = or_undefined(bias);
  nb::gil_scoped_release release;
  return ember::conv_transpose2d(input, weight, b, stride, padding, output_padding, groups, dilation);
}

nb::object max_pool2d(Tensor input, nb::handle kernel_h, nb::handle stride_h, nb::handle padding_h,
                      nb::handle dilation_h, bool ceil_mode, bool return_indices) {
  const Pair kernel = pair_of(kernel_h, "max_pool2d", "kernel_size");
  const std::optional<Pair> stride = optional_pair(stride_h, "max_pool2d", "stride");
  const Pair padding = pair_of(padding_h, "max_pool2d", "padding");
  const Pair dilation = pair_of(dilation_h, "max_pool2d", "dilation");
  ValuesIndices r;
  {
    nb::gil_scoped_release release;
    if (return_indices) r = max_pool2d_with_indices(input, kernel, stride, padding, dilation, ceil_mode);
    else r.values = ember::max_pool2d(input, kernel, stride, padding, dilation, ceil_mode);
  }
  if (return_indices) return nb::make_tuple(r.values, r.indices);
  return nb::cast(r.values);
}

Tensor avg_pool2d(Tensor input, nb::handle kernel_h, nb::handle stride_h, nb::handle padding_h, bool ceil_mode,
                  bool count_include_pad, std::optional<int64_t> divisor_override) {
  const Pair kernel = pair_of(kernel_h, "avg_pool2d", "kernel_size");
  const std::optional<Pair> stride = optional_pair(stride_h, "avg_pool2d", "stride");
  const Pair padding = pair_of(padding_h, "avg_pool2d", "padding");
  nb::gil_scoped_release release;
  return ember::avg_pool2d(input, kernel, stride, padding, ceil_mode, count_include_pad, divisor_override);
}

Tensor adaptive_avg_pool2d(Tensor input, nb::handle size_h) {
  if (PySequence_Check(size_h.ptr()))
    for (nb::handle s : nb::borrow<nb::sequence>(size_h))
      if (s.is_none())
        throw NotImplementedError("adaptive_avg_pool2d: None in output_size (keep the input's size) is not supported");
  const Pair size = pair_of(size_h, "adaptive_avg_pool2d", "output_size");
  nb::gil_scoped_release release;
  return ember::adaptive_avg_pool2d(input, size);
}

// PyTorch's pad: pads the last dims, (left, right) for the last, then the one before, ...
Tensor pad(const Tensor& input, const std::vector<int64_t>& pads, const std::string& mode, std::optional<double> value) {
  if (mode != "constant")
    throw NotImplementedError("pad: only mode='constant' is supported, got '" + mode + "'");
  return ember::pad(input, pads, value.value_or(0.0));
}

}  // namespace

void bind_functional(nb::module_& m) {
  nb::module_ F = m.def_submodule("_F", "The C++ functional ops ember.nn.functional re-exports.");
  F.def("conv2d", &conv2d, "input"_a, "weight"_a, "bias"_a.none() = nb::none(), "stride"_a = 1, "padding"_a = 0,
        "dilation"_a = 1, "groups"_a = 1, doc::conv2d);
  F.def("conv_transpose2d", &conv_transpose2d, "input"_a, "weight"_a, "bias"_a.none() = nb::none(), "stride"_a = 1,
        "padding"_a = 0, "output_padding"_a = 0, "groups"_a = 1, "dilation"_a = 1, doc::conv_transpose2d);
  F.def("max_pool2d", &max_pool2d, "input"_a, "kernel_size"_a, "stride"_a.none() = nb::none(), "padding"_a = 0,
        "dilation"_a = 1, "ceil_mode"_a = false, "return_indices"_a = false,
        "Max over each window (stride defaults to the kernel); with return_indices, (values, indices) with "
        "indices h * W + w within each plane.");
  F.def("avg_pool2d", &avg_pool2d, "input"_a, "kernel_size"_a, "stride"_a.none() = nb::none(), "padding"_a = 0,
        "ceil_mode"_a = false, "count_include_pad"_a = true, "divisor_override"_a.none() = nb::none(),
        doc::avg_pool2d);
  F.def("adaptive_avg_pool2d", &adaptive_avg_pool2d, "input"_a, "output_size"_a,
        doc::adaptive_avg_pool2d);
  F.def("batch_norm",
        [](Tensor x, std::optional<Tensor> rm, std::optional<Tensor> rv, std::optional<Tensor> w, std::optional<Tensor> b,
           bool training, double momentum, double eps) {
          const Tensor mean = or_undefined(rm), var = or_undefined(rv), weight = or_undefined(w), bias = or_undefined(b);
          nb::gil_scoped_release release;
          return ember::batch_norm(x, mean, var, weight, bias, training, momentum, eps);
        },
        "input"_a, "running_mean"_a.none(), "running_var"_a.none(), "weight"_a.none() = nb::none(),
        "bias"_a.none() = nb::none(), "training"_a = false, "momentum"_a = 0.1, "eps"_a = 1e-5,
        doc::batch_norm);
  F.def("layer_norm",
        [](Tensor x, nb::handle shape_h, std::optional<Tensor> w, std::optional<Tensor> b, double eps) {
          Shape shape;
          if (PyIndex_Check(shape_h.ptr())) shape = Shape{nb::cast<int64_t>(shape_h)};
          else if (!nb::try_cast<Shape>(shape_h, shape))
            throw nb::type_error(("layer_norm: normalized_shape must be an int or a sequence of ints, got " +
                                  std::string(Py_TYPE(shape_h.ptr())->tp_name)).c_str());
          const Tensor weight = or_undefined(w), bias = or_undefined(b);
          nb::gil_scoped_release release;
          return ember::layer_norm(x, shape, weight, bias, eps);
        },
        "input"_a, "normalized_shape"_a, "weight"_a.none() = nb::none(), "bias"_a.none() = nb::none(), "eps"_a = 1e-5,
        doc::layer_norm);
  F.def("dropout",
        [](Tensor x, double p, bool training, Generator* gen) {
          nb::gil_scoped_release release;
          return ember::dropout(x, p, training, gen);
        },
        "input"_a, "p"_a = 0.5, "training"_a = true, nb::kw_only(), "generator"_a.none() = nb::none(),
        doc::dropout);
  F.def("embedding",
        [](Tensor indices, Tensor weight, std::optional<int64_t> padding_idx) {
          return ember::embedding(weight, indices, padding_idx);
        },
        "input"_a, "weight"_a, "padding_idx"_a.none() = nb::none(),
        doc::embedding);
  F.def("cross_entropy",
        [](Tensor logits, Tensor target, std::optional<Tensor> weight, int64_t ignore_index, const std::string& reduction,
           double label_smoothing) {
          const Tensor w = or_undefined(weight);
          nb::gil_scoped_release release;
          return ember::cross_entropy(logits, target, reduction, ignore_index, label_smoothing, w);
        },
        "input"_a, "target"_a, "weight"_a.none() = nb::none(), nb::kw_only(), "ignore_index"_a = -100,
        "reduction"_a = "mean", "label_smoothing"_a = 0.0,
        doc::cross_entropy);
  F.def("nll_loss",
        [](Tensor log_probs, Tensor target, std::optional<Tensor> weight, int64_t ignore_index, const std::string& reduction) {
          const Tensor w = or_undefined(weight);
          nb::gil_scoped_release release;
          return ember::nll_loss(log_probs, target, reduction, ignore_index, w);
        },
        "input"_a, "target"_a, "weight"_a.none() = nb::none(), nb::kw_only(), "ignore_index"_a = -100,
        "reduction"_a = "mean", doc::nll_loss);
  F.def("mse_loss",
        [](Tensor a, Tensor b, const std::string& reduction) {
          nb::gil_scoped_release release;
          return ember::mse_loss(a, b, reduction);
        },
        "input"_a, "target"_a, nb::kw_only(), "reduction"_a = "mean", doc::mse_loss);
  F.def("scaled_dot_product_attention",
        [](Tensor q, Tensor k, Tensor v, std::optional<Tensor> mask, double dropout_p, bool is_causal,
           std::optional<double> scale, Generator* gen) {
          const Tensor m = or_undefined(mask);
          nb::gil_scoped_release release;
          return ember::scaled_dot_product_attention(q, k, v, m, dropout_p, is_causal, scale, gen);
        },
        "query"_a, "key"_a, "value"_a, "attn_mask"_a.none() = nb::none(), "dropout_p"_a = 0.0, "is_causal"_a = false,
        nb::kw_only(), "scale"_a.none() = nb::none(), "generator"_a.none() = nb::none(),
        doc::scaled_dot_product_attention);
  F.def("pad", &pad, "input"_a, "pad"_a, "mode"_a = "constant", "value"_a.none() = nb::none(),
        "Pads the last dims: pad = (left, right) of the last dim, then of the one before, ... (negative crops).");
}

}  // namespace ember::python
