"""The package's docstrings come from the /// comments of ember's headers (tools/docstrings.py), the
comments Doxygen reads: the reader of each, and that bound functions carry them."""

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


@pytest.mark.parametrize("name, header, qualified", [
    ("mul", "tensor/ops.h", "ember::mul"),
    ("equal", "tensor/ops.h", "ember::equal"),
    ("transpose", "tensor/ops.h", "ember::transpose"),
])
def test_bound_functions_carry_their_header_comment(name, header, qualified):
    comment = read((ROOT / header).read_text())[qualified]
    assert getattr(ember, name).__doc__.rstrip().endswith(comment)
