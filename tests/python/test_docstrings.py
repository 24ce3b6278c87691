"""The package's docstrings come from the /// comments of ember's headers (tools/docstrings.py), the
comments Doxygen reads: the reader of each, and that bound functions carry them."""

import importlib
import importlib.util
import pathlib

import pytest

import ember

ROOT = pathlib.Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("docstrings", ROOT / "tools" / "docstrings.py")
docstrings = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(docstrings)


def read(header):
    return dict(docstrings.header_docs(header))


def test_comments_above_and_after_declarations():
    got = read("""/// @file
/// What the file holds (not a declaration's).
#pragma once
namespace ember {
/// Zeros of a shape:
/// the second line joins the first.
Tensor zeros(const Shape& shape, TensorOptions opts = {});
Tensor ones(const Shape& shape, TensorOptions opts = {});  ///< Ones.
Tensor undocumented(const Tensor& x);
inline constexpr milliseconds kTimeout = std::chrono::minutes(10);  ///< How long a wait lasts.
/// Calls f with T.
template <class F>
decltype(auto) visit(DType d, F&& f) {
  if (d == DType::f32) { return f(); }
  return f();
}
}  // namespace ember
""")
    assert got == {"ember::zeros": "Zeros of a shape: the second line joins the first.", "ember::ones": "Ones.",
                   "ember::kTimeout": "How long a wait lasts.", "ember::visit": "Calls f with T."}


def test_classes_members_and_member_groups():
    got = read("""namespace ember::nn {
/// A layer.
class Linear : public UnaryModule {
 public:
  /// Builds it.
  Linear(int64_t in, int64_t out, bool bias = true);
  int64_t in() const { return in_; }  ///< Input features.
  /// the weights @{
  Tensor weight;
  Tensor bias;
  /// @}
  Tensor loose;
 private:
  struct Options {
    int64_t size = 0;  ///< Its size.
  };
};
/// After the class.
void after();
}
""")
    assert got == {"ember::nn::Linear": "A layer.", "ember::nn::Linear::Linear": "Builds it.",
                   "ember::nn::Linear::in": "Input features.", "ember::nn::Linear::weight": "the weights",
                   "ember::nn::Linear::bias": "the weights", "ember::nn::Linear::Options::size": "Its size.",
                   "ember::nn::after": "After the class."}


def test_operators_and_destructors_are_left_out():
    got = read("""namespace ember {
struct Size {
  bool operator==(const Size&) const = default;  ///< Same sizes.
  ~Size();  ///< Frees.
};
}
""")
    assert got == {}


def test_identifiers_of_the_generated_header():
    assert docstrings.identifier("ember::nn::Linear::weight") == "nn_Linear_weight"
    assert docstrings.identifier("ember::std") == "std_"  # not a C++ name it could shadow


def _function_and_method(pairs):
    """ember.<name> and ember.Tensor.<name>, which bind_ops.cpp's def_both binds together, of ember::<cpp> in
    tensor/ops.h, for each (name, cpp)."""
    return [(f"ember{owner}.{name}", "tensor/ops.h", f"ember::{cpp}")
            for name, cpp in pairs for owner in ("", ".Tensor")]


# (Python attribute path, header, qualified C++ name) of the bindings whose docstring is their declaration's
# doc:: constant: functions, methods, classes and properties. Objects the Python package wraps are reached
# through ember._ember, whose docstrings these are.
BOUND = _function_and_method([
    ("neg", "neg"), ("negative", "neg"), ("abs", "abs"), ("sign", "sign"), ("exp", "exp"), ("log", "log"),
    ("log1p", "log1p"), ("sqrt", "sqrt"), ("rsqrt", "rsqrt"), ("sin", "sin"), ("cos", "cos"), ("tanh", "tanh"),
    ("sigmoid", "sigmoid"), ("relu", "relu"), ("silu", "silu"), ("erf", "erf"), ("reciprocal", "reciprocal"),
    ("square", "square"), ("logical_not", "logical_not"), ("gelu", "gelu"), ("clamp", "clamp"), ("pow", "pow"),
    ("add", "add"), ("sub", "sub"), ("mul", "mul"), ("div", "div"), ("maximum", "maximum"), ("minimum", "minimum"),
    ("eq", "eq"), ("ne", "ne"), ("lt", "lt"), ("le", "le"), ("gt", "gt"), ("ge", "ge"),
    ("masked_fill", "masked_fill"), ("equal", "equal"), ("allclose", "allclose"), ("isfinite_all", "all_finite"),
    ("argmax", "argmax"), ("argmin", "argmin"), ("logsumexp", "logsumexp"), ("softmax", "softmax"),
    ("log_softmax", "log_softmax"), ("matmul", "matmul"), ("mm", "mm"), ("bmm", "bmm"), ("transpose", "transpose"),
    ("unsqueeze", "unsqueeze"), ("squeeze", "squeeze"), ("flatten", "flatten"), ("narrow", "narrow"),
    ("select", "select"), ("chunk", "chunk"), ("index_select", "index_select"), ("gather", "gather"),
    ("scatter_add", "scatter_add"), ("index_add", "index_add"),
]) + [
    ("ember.where", "tensor/ops.h", "ember::where"),
    ("ember.linear", "tensor/ops.h", "ember::linear"),
    ("ember.broadcast_to", "tensor/ops.h", "ember::broadcast_to"),
    ("ember.Tensor.broadcast_to", "tensor/ops.h", "ember::broadcast_to"),
    ("ember.cat", "tensor/ops.h", "ember::cat"),
    ("ember.stack", "tensor/ops.h", "ember::stack"),
    ("ember.result_type", "tensor/ops.h", "ember::result_type"),
    ("ember.Tensor.permute", "tensor/ops.h", "ember::permute"),
    ("ember.Tensor.t", "tensor/tensor.h", "ember::Tensor::t"),
    ("ember.Tensor.sum_to_size", "tensor/ops.h", "ember::sum_to"),
    ("ember.ValuesIndices", "tensor/ops.h", "ember::ValuesIndices"),
    ("ember.Tensor.shape", "tensor/tensor.h", "ember::Tensor::shape"),
    ("ember.Tensor.dtype", "tensor/tensor.h", "ember::Tensor::dtype"),
    ("ember.Tensor.device", "tensor/tensor.h", "ember::Tensor::device"),
    ("ember.Tensor.ndim", "tensor/tensor.h", "ember::Tensor::dim"),
    ("ember.Tensor.is_floating_point", "tensor/tensor.h", "ember::Tensor::is_floating_point"),
    ("ember.Tensor.dim", "tensor/tensor.h", "ember::Tensor::dim"),
    ("ember.Tensor.ndimension", "tensor/tensor.h", "ember::Tensor::dim"),
    ("ember.Tensor.numel", "tensor/tensor.h", "ember::Tensor::numel"),
    ("ember.Tensor.nelement", "tensor/tensor.h", "ember::Tensor::numel"),
    ("ember.Tensor.storage_offset", "tensor/tensor.h", "ember::Tensor::offset"),
    ("ember.Tensor.is_contiguous", "tensor/tensor.h", "ember::Tensor::is_contiguous"),
    ("ember.Tensor.element_size", "tensor/dtype.h", "ember::dtype_size"),
    ("ember.Tensor.itemsize", "tensor/dtype.h", "ember::dtype_size"),
    ("ember.Tensor.clone", "tensor/ops.h", "ember::clone"),
    ("ember.Tensor.pin_memory", "tensor/ops.h", "ember::pin_memory"),
    ("ember.Tensor.is_same", "tensor/tensor.h", "ember::Tensor::is_same"),
    ("ember.Tensor._version", "tensor/tensor.h", "ember::Tensor::version"),
    ("ember.Tensor._use_count", "tensor/tensor.h", "ember::Tensor::use_count"),
    ("ember.autograd.Node", "autograd/node.h", "ember::autograd::Node"),
    ("ember.autograd.Node.name", "autograd/node.h", "ember::autograd::Node::name"),
    ("ember.autograd.FunctionCtx.save_for_backward", "autograd/function.h",
     "ember::autograd::FunctionContext::save_for_backward"),
    ("ember.autograd.FunctionCtx.saved_tensors", "autograd/function.h",
     "ember::autograd::FunctionContext::saved_tensors"),
    ("ember.autograd.FunctionCtx.mark_non_differentiable", "autograd/function.h",
     "ember::autograd::FunctionContext::mark_non_differentiable"),
    ("ember.is_grad_enabled", "autograd/grad_mode.h", "ember::autograd::GradMode::is_enabled"),
    ("ember._ember._set_grad_enabled", "autograd/grad_mode.h", "ember::autograd::GradMode::set_enabled"),
    ("ember._ember.is_anomaly_enabled", "autograd/grad_mode.h", "ember::autograd::AnomalyMode::is_enabled"),
    ("ember._ember._set_anomaly_enabled", "autograd/grad_mode.h", "ember::autograd::AnomalyMode::set_enabled"),
    ("ember.Tensor.grad_fn", "tensor/tensor.h", "ember::Tensor::grad_fn"),
    ("ember.Tensor.retain_grad", "tensor/tensor.h", "ember::Tensor::retain_grad"),
    ("ember.Generator", "tensor/random.h", "ember::Generator"),
    ("ember.Generator.initial_seed", "tensor/random.h", "ember::Generator::seed"),
    ("ember.Generator.set_state", "tensor/random.h", "ember::Generator::set_state"),
    ("ember.zeros", "tensor/ops.h", "ember::zeros"),
    ("ember.ones", "tensor/ops.h", "ember::ones"),
    ("ember.empty", "tensor/ops.h", "ember::empty"),
    ("ember.arange", "tensor/ops.h", "ember::arange"),
    ("ember.dtype.itemsize", "tensor/dtype.h", "ember::dtype_size"),
    ("ember.device", "tensor/device.h", "ember::Device"),
    ("ember.manual_seed", "tensor/random.h", "ember::manual_seed"),
    ("ember.set_num_threads", "tensor/ops.h", "ember::set_num_threads"),
    ("ember.get_num_threads", "tensor/ops.h", "ember::get_num_threads"),
    ("ember.use_deterministic_algorithms", "tensor/deterministic.h", "ember::set_deterministic"),
    ("ember.are_deterministic_algorithms_enabled", "tensor/deterministic.h", "ember::is_deterministic"),
    ("ember.promote_types", "tensor/dtype.h", "ember::promote_types"),
    ("ember.DTypeError", "tensor/error.h", "ember::DTypeError"),
    ("ember.IndexError", "tensor/error.h", "ember::IndexError"),
    ("ember.ValueError", "tensor/error.h", "ember::ValueError"),
    ("ember.NotImplementedError", "tensor/error.h", "ember::NotImplementedError"),
    ("ember.StateError", "tensor/error.h", "ember::StateError"),
    ("ember.CaptureError", "tensor/error.h", "ember::CaptureError"),
    ("ember.IOError", "tensor/atomic_file.h", "ember::IOError"),
    ("ember.FormatError", "tensor/safetensors.h", "ember::FormatError"),
    ("ember.DataError", "data/data_file.h", "ember::data::DataError"),
    ("ember.CollectiveMismatchError", "dist/error.h", "ember::dist::CollectiveMismatchError"),
    ("ember._ember._save_safetensors", "tensor/safetensors.h", "ember::save_safetensors"),
]


def resolve(path):
    """The object at a dotted path: modules imported, then attributes (a class's property as the property)."""
    parts = path.split(".")
    obj = importlib.import_module(parts[0])
    for i, name in enumerate(parts[1:], 1):
        try:
            obj = getattr(obj, name)
        except AttributeError:
            obj = importlib.import_module(".".join(parts[: i + 1]))
    return obj


@pytest.mark.parametrize("path, header, qualified", BOUND)
def test_bound_functions_carry_their_header_comment(path, header, qualified):
    comment = read((ROOT / header).read_text())[qualified]
    assert resolve(path).__doc__.rstrip().endswith(comment)
