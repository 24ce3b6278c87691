// The ops of tensor/ops.h, as Tensor methods and as module functions (ember.exp(x) and x.exp()), the
// Python operators (+ - * / // % ** @, comparisons, in-place forms) and the shape ops. Ops ember has no
// primitive for but PyTorch users expect (remainder, repeat, all, any, logical and/or) are composed of
// ember ops here, so they stay differentiable where PyTorch's are.
#include "python/ember/bind.h"

namespace ember::python {

namespace {

nb::handle g_values_indices;  // namedtuple (values, indices) of max(dim) / min(dim); the module holds it

nb::object values_indices(const ValuesIndices& r) { return g_values_indices(nb::cast(r.values), nb::cast(r.indices)); }

// A subscript of einsum's sublist form as its letter: 0-25 are 'A'-'Z', 26-51 'a'-'z' (PyTorch's
// mapping, so the implicit output's order agrees), Ellipsis is "...".
std::string sublist_subscripts(nb::handle sublist, const char* which) {
  if (!nb::isinstance<nb::list>(sublist) && !nb::isinstance<nb::tuple>(sublist))
    throw nb::type_error(("einsum: " + std::string(which) + " must be a list of subscripts (ints in [0, 52) or Ellipsis), got " +
                          std::string(nb::type_name(sublist.type()).c_str()))
                             .c_str());
  std::string text;
  for (nb::handle s : sublist) {
    if (s.is(nb::ellipsis())) {
      text += "...";
      continue;
    }
    if (!nb::isinstance<nb::int_>(s) || nb::isinstance<nb::bool_>(s))
      throw nb::type_error(("einsum: a subscript in a sublist must be an int or Ellipsis, got " +
                            std::string(nb::type_name(s.type()).c_str()))
                               .c_str());
    const auto n = nb::cast<int64_t>(s);
    if (n < 0 || n >= 52)
      throw nb::value_error(("einsum: subscript " + std::to_string(n) + " of a sublist is outside [0, 52)").c_str());
    text += static_cast<char>(n < 26 ? 'A' + n : 'a' + (n - 26));
  }
  return text;
}

// einsum(equation, *operands), einsum(equation, [operands]) or the sublist form
// einsum(op0, sublist0, op1, sublist1, ..., [output sublist]), as torch.einsum takes them.
Tensor einsum_from_args(const nb::args& args) {
  if (args.size() == 0) throw nb::type_error("einsum: expected an equation and operands, got no arguments");
  std::vector<Tensor> operands;
  if (nb::isinstance<nb::str>(args[0])) {
    const std::string equation = nb::cast<std::string>(args[0]);
    std::vector<nb::handle> items;
    if (args.size() == 2 && (nb::isinstance<nb::list>(args[1]) || nb::isinstance<nb::tuple>(args[1])))
      for (nb::handle op : args[1]) items.push_back(op);
    else
      for (size_t i = 1; i < args.size(); ++i) items.push_back(args[i]);
    for (nb::handle op : items) {
      if (!nb::isinstance<Tensor>(op))
        throw nb::type_error(("einsum: operands must be tensors, got " + std::string(nb::type_name(op.type()).c_str())).c_str());
      operands.push_back(nb::cast<Tensor>(op));
    }
    return einsum(equation, operands);
  }
  std::string equation;
  size_t i = 0;
  for (; i + 1 < args.size(); i += 2) {
    if (!nb::isinstance<Tensor>(args[i]))
      throw nb::type_error(("einsum: expected an equation string or a tensor first, then sublists; argument " +
                            std::to_string(i) + " is " + std::string(nb::type_name(args[i].type()).c_str()))
                               .c_str());
    operands.push_back(nb::cast<Tensor>(args[i]));
    if (i > 0) equation += ',';
    equation += sublist_subscripts(args[i + 1], ("the sublist of operand " + std::to_string(i / 2)).c_str());
  }
  if (i < args.size()) {
    equation += "->";
    equation += sublist_subscripts(args[i], "the output sublist");
  }
  if (operands.empty()) throw nb::type_error("einsum: the sublist form takes pairs of a tensor and its sublist");
  return einsum(equation, operands);
}

// In-place methods return the very Python object they were called on (t.add_(1) is t). Takes a
// captureless lambda turned function pointer (+[](Tensor& a, ...) {...}), whose parameters it keeps.
template <class... Args>
auto in_place(void (*f)(Tensor&, Args...)) {
  return [f](nb::handle self, Args... args) {
    f(nb::cast<Tensor&>(self), args...);
    return nb::borrow(self);
  };
}

Shape all_dims_if_none(const std::optional<DimList>& d) { return d ? d->dims : Shape{}; }

// a - floor(a / b) * b: Python's and torch's remainder (the sign follows the divisor).
Tensor remainder(const Tensor& a, const Tensor& b) { return a - div(a, b, RoundingMode::floor) * b; }
Tensor remainder(const Tensor& a, Scalar b) { return a - div(a, b, RoundingMode::floor) * b; }

// x.repeat(*sizes): x tiled sizes[i] times along dim i (leading sizes add dims), as an expand of a view
// with a size-1 dim before each dim, then a reshape; differentiable through expand.
Tensor repeat(const Tensor& x, const Shape& sizes) {
  if (sizes.size() < x.dim())
    throw ShapeError("repeat: " + std::to_string(sizes.size()) + " repeat counts for a tensor of " +
                     std::to_string(x.dim()) + " dims; give at least one per dim");
  for (int64_t r : sizes)
    if (r < 0) throw ValueError("repeat: repeat counts must be at least 0, got " + to_string(sizes));
  const int lead = sizes.size() - x.dim();
  std::vector<int64_t> interleaved, expanded, final_shape;
  for (int i = 0; i < sizes.size(); ++i) {
    const int64_t s = i < lead ? 1 : x.shape()[i - lead];
    interleaved.insert(interleaved.end(), {1, s});
    expanded.insert(expanded.end(), {sizes[i], s});
    final_shape.push_back(sizes[i] * s);
  }
  return x.reshape(interleaved).expand(expanded).reshape(final_shape);
}

// any / all over dims, as counts of nonzero elements (ember has no boolean reductions).
Tensor any(const Tensor& x, const Shape& dims, bool keepdim) {
  return gt(sum(ne(x, 0).to(DType::i64), dims, keepdim), 0);
}
Tensor all(const Tensor& x, const Shape& dims, bool keepdim) {
  return eq(sum(eq(x, 0).to(DType::i64), dims, keepdim), 0);
}

// Logical and / or / xor of anything (nonzero is true), as bool tensors.
Tensor logical_and(const Tensor& a, const Tensor& b) { return ne(mul(ne(a, 0).to(DType::u8), ne(b, 0).to(DType::u8)), 0); }
Tensor logical_or(const Tensor& a, const Tensor& b) { return ne(maximum(ne(a, 0).to(DType::u8), ne(b, 0).to(DType::u8)), 0); }
Tensor logical_xor(const Tensor& a, const Tensor& b) { return ne(ne(a, 0), ne(b, 0)); }

// & | ^ ~ on bool tensors only: ember has no bitwise integer ops.
void require_bool(const Tensor& a, const char* op) {
  if (a.dtype() != DType::boolean)
    throw NotImplementedError(std::string("operator ") + op + " is only supported on bool tensors, got " +
                              dtype_name(a.dtype()));
}

double norm_order(nb::handle p) {
  if (nb::isinstance<nb::str>(p)) {
    if (nb::cast<std::string>(p) == "fro") return 2.0;
    throw ValueError("norm: p must be a number or 'fro', got '" + nb::cast<std::string>(p) + "'");
  }
  return nb::cast<double>(p);
}

double correction_of(std::optional<bool> unbiased, std::optional<double> correction) {
  if (correction) return *correction;
  return unbiased.value_or(true) ? 1.0 : 0.0;
}

Tensor clamp_any(const Tensor& x, const std::optional<Operand>& min, const std::optional<Operand>& max) {
  const bool numbers = (!min || !min->tensor) && (!max || !max->tensor);
  if (numbers) {
    return clamp(x, min ? std::optional<double>(min->scalar.to_double()) : std::nullopt,
                 max ? std::optional<double>(max->scalar.to_double()) : std::nullopt);
  }
  return clamp(x, min ? min->as_tensor(x.device()) : Tensor(), max ? max->as_tensor(x.device()) : Tensor());
}

Tensor squeeze_any(const Tensor& x, const std::optional<DimList>& dim) {
  if (!dim) return squeeze(x);
  return squeeze(x, dim->dims);
}

nb::tuple to_tuple(const std::vector<Tensor>& ts) {
  nb::list out;
  for (const Tensor& t : ts) out.append(nb::cast(t));
  return nb::tuple(out);
}

void bind_operators(nb::class_<Tensor>& c) {
  using nb::is_operator;
  // Arithmetic, with a tensor or a Python number on either side.
  c.def("__add__", [](const Tensor& a, const Tensor& b) { return a + b; }, is_operator())
      .def("__add__", [](const Tensor& a, Scalar b) { return a + b; }, is_operator())
      .def("__radd__", [](const Tensor& a, Scalar b) { return b + a; }, is_operator())
      .def("__sub__", [](const Tensor& a, const Tensor& b) { return a - b; }, is_operator())
      .def("__sub__", [](const Tensor& a, Scalar b) { return a - b; }, is_operator())
      .def("__rsub__", [](const Tensor& a, Scalar b) { return b - a; }, is_operator())
      .def("__mul__", [](const Tensor& a, const Tensor& b) { return a * b; }, is_operator())
      .def("__mul__", [](const Tensor& a, Scalar b) { return a * b; }, is_operator())
      .def("__rmul__", [](const Tensor& a, Scalar b) { return b * a; }, is_operator())
      .def("__truediv__", [](const Tensor& a, const Tensor& b) { return a / b; }, is_operator())
      .def("__truediv__", [](const Tensor& a, Scalar b) { return a / b; }, is_operator())
      .def("__rtruediv__", [](const Tensor& a, Scalar b) { return b / a; }, is_operator())
      .def("__floordiv__", [](const Tensor& a, const Tensor& b) { return div(a, b, RoundingMode::floor); }, is_operator())
      .def("__floordiv__", [](const Tensor& a, Scalar b) { return div(a, b, RoundingMode::floor); }, is_operator())
      .def("__rfloordiv__",
           [](const Tensor& a, Scalar b) { return div(wrapped_scalar(b, a.device()), a, RoundingMode::floor); },
           is_operator())
      .def("__mod__", [](const Tensor& a, const Tensor& b) { return remainder(a, b); }, is_operator())
      .def("__mod__", [](const Tensor& a, Scalar b) { return remainder(a, b); }, is_operator())
      .def("__rmod__", [](const Tensor& a, Scalar b) { return remainder(wrapped_scalar(b, a.device()), a); },
           is_operator())
      .def("__pow__", [](const Tensor& a, const Tensor& b) { return pow(a, b); }, is_operator())
      .def("__pow__", [](const Tensor& a, Scalar b) { return pow(a, b); }, is_operator())
      .def("__rpow__", [](const Tensor& a, Scalar b) { return pow(wrapped_scalar(b, a.device()), a); }, is_operator())
      // Operands by value where the GIL is released: the handles cannot change under the call.
      .def("__matmul__", [](Tensor a, Tensor b) { return matmul(a, b); }, is_operator(),
           nb::call_guard<nb::gil_scoped_release>())
      .def("__neg__", [](const Tensor& a) { return neg(a); })
      .def("__pos__", [](const Tensor& a) { return a; })
      .def("__abs__", [](const Tensor& a) { return abs(a); })
      .def("__invert__",
           [](const Tensor& a) {
             require_bool(a, "~");
             return logical_not(a);
           })
      .def("__and__", [](const Tensor& a, const Tensor& b) { require_bool(a, "&"); return logical_and(a, b); }, is_operator())
      .def("__or__", [](const Tensor& a, const Tensor& b) { require_bool(a, "|"); return logical_or(a, b); }, is_operator())
      .def("__xor__", [](const Tensor& a, const Tensor& b) { require_bool(a, "^"); return logical_xor(a, b); }, is_operator());

  // Comparisons are elementwise and return bool tensors.
  c.def("__eq__", [](const Tensor& a, const Tensor& b) { return eq(a, b); }, is_operator())
      .def("__eq__", [](const Tensor& a, Scalar b) { return eq(a, b); }, is_operator())
      .def("__ne__", [](const Tensor& a, const Tensor& b) { return ne(a, b); }, is_operator())
      .def("__ne__", [](const Tensor& a, Scalar b) { return ne(a, b); }, is_operator())
      .def("__lt__", [](const Tensor& a, const Tensor& b) { return lt(a, b); }, is_operator())
      .def("__lt__", [](const Tensor& a, Scalar b) { return lt(a, b); }, is_operator())
      .def("__le__", [](const Tensor& a, const Tensor& b) { return le(a, b); }, is_operator())
      .def("__le__", [](const Tensor& a, Scalar b) { return le(a, b); }, is_operator())
      .def("__gt__", [](const Tensor& a, const Tensor& b) { return gt(a, b); }, is_operator())
      .def("__gt__", [](const Tensor& a, Scalar b) { return gt(a, b); }, is_operator())
      .def("__ge__", [](const Tensor& a, const Tensor& b) { return ge(a, b); }, is_operator())
      .def("__ge__", [](const Tensor& a, Scalar b) { return ge(a, b); }, is_operator());

  // In place: the same Python object comes back, its elements rewritten.
  c.def("__iadd__", in_place(+[](Tensor& a, const Tensor& b) { a.add_(b); }), is_operator())
      .def("__iadd__", in_place(+[](Tensor& a, Scalar b) { a.add_(b); }), is_operator())
      .def("__isub__", in_place(+[](Tensor& a, const Tensor& b) { a.sub_(b); }), is_operator())
      .def("__isub__", in_place(+[](Tensor& a, Scalar b) { a.sub_(b); }), is_operator())
      .def("__imul__", in_place(+[](Tensor& a, const Tensor& b) { a.mul_(b); }), is_operator())
      .def("__imul__", in_place(+[](Tensor& a, Scalar b) { a.mul_(b); }), is_operator())
      .def("__itruediv__", in_place(+[](Tensor& a, const Tensor& b) { a.div_(b); }), is_operator())
      .def("__itruediv__", in_place(+[](Tensor& a, Scalar b) { a.div_(b); }), is_operator());
}

void bind_in_place_methods(nb::class_<Tensor>& c) {
  c.def("add_",
        in_place(+[](Tensor& a, const Tensor& b, Scalar alpha) {
          if (alpha.to_double() == 1.0) a.add_(b);
          else a.add_(b.mul(alpha));
        }),
        "other"_a, nb::kw_only(), "alpha"_a = 1, "self += alpha * other (broadcast into self's shape); returns self.")
      .def("add_", in_place(+[](Tensor& a, Scalar b) { a.add_(b); }), "other"_a, "self += other; returns self.")
      .def("sub_",
           in_place(+[](Tensor& a, const Tensor& b, Scalar alpha) {
             if (alpha.to_double() == 1.0) a.sub_(b);
             else a.sub_(b.mul(alpha));
           }),
           "other"_a, nb::kw_only(), "alpha"_a = 1, "self -= alpha * other; returns self.")
      .def("sub_", in_place(+[](Tensor& a, Scalar b) { a.sub_(b); }), "other"_a, "self -= other; returns self.")
      .def("mul_", in_place(+[](Tensor& a, const Tensor& b) { a.mul_(b); }), "other"_a, "self *= other; returns self.")
      .def("mul_", in_place(+[](Tensor& a, Scalar b) { a.mul_(b); }), "other"_a, "self *= other; returns self.")
      .def("div_", in_place(+[](Tensor& a, const Tensor& b) { a.div_(b); }), "other"_a, "self /= other; returns self.")
      .def("div_", in_place(+[](Tensor& a, Scalar b) { a.div_(b); }), "other"_a, "self /= other; returns self.")
      .def("neg_", in_place(+[](Tensor& a) { a.neg_(); }), "self = -self; returns self.")
      .def("exp_", in_place(+[](Tensor& a) { a.exp_(); }), "self = exp(self); returns self.")
      .def("relu_", in_place(+[](Tensor& a) { a.relu_(); }), "self = relu(self); returns self.")
      .def("sigmoid_", in_place(+[](Tensor& a) { a.sigmoid_(); }), "self = sigmoid(self); returns self.")
      .def("tanh_", in_place(+[](Tensor& a) { a.tanh_(); }), "self = tanh(self); returns self.")
      .def("sqrt_", in_place(+[](Tensor& a) { a.sqrt_(); }), "self = sqrt(self); returns self.")
      .def("clamp_",
           in_place(+[](Tensor& a, std::optional<double> min, std::optional<double> max) { a.clamp_(min, max); }),
           "min"_a = nb::none(), "max"_a = nb::none(), "self limited to [min, max]; returns self.")
      .def("fill_", in_place(+[](Tensor& a, Scalar v) { a.fill_(v); }), "value"_a, "Sets every element to value; returns self.")
      .def("fill_",
           in_place(+[](Tensor& a, const Tensor& v) {
             if (v.dim() != 0) throw ShapeError("fill_: the value must be a 0-dim tensor, got shape " + to_string(v.shape()));
             a.copy_(v);
           }),
           "value"_a, "Sets every element to the 0-dim tensor value; returns self.")
      .def("zero_", in_place(+[](Tensor& a) { a.zero_(); }), "Sets every element to 0; returns self.")
      .def("copy_",
           [](nb::handle self, Tensor src, bool non_blocking) {
             const Tensor t = nb::cast<Tensor&>(self);  // handles by value: the GIL is released below
             {
               nb::gil_scoped_release release;
               t.copy_(src, non_blocking);
             }
             return nb::borrow(self);
           },
           "src"_a, "non_blocking"_a = false,
           "Copies src (broadcast, converted to self's dtype, from any device) into self; returns self.")
      .def("masked_fill_", in_place(+[](Tensor& a, const Tensor& mask, Scalar v) { a.masked_fill_(mask, v); }), "mask"_a,
           "value"_a, "Writes value where the bool mask (broadcast to self) is true; returns self.")
      .def("requires_grad_",
           [](nb::handle self, bool requires_grad) {
             nb::cast<Tensor&>(self).requires_grad_(requires_grad);
             return nb::borrow(self);
           },
           "requires_grad"_a = true, "Marks this leaf as requiring grad (or not); returns self.");
}

void bind_math(nb::module_& m) {
  using UnaryFn = Tensor (*)(const Tensor&);
  struct Unary {
    const char* name;
    UnaryFn fn;
    const char* doc;
  };
  static const Unary unary[] = {
      {"neg", &neg, doc::neg},
      {"negative", &neg, doc::neg},
      {"abs", &abs, doc::abs},
      {"sign", &sign, doc::sign},
      {"exp", &exp, doc::exp},
      {"log", &log, doc::log},
      {"log1p", &log1p, doc::log1p},
      {"sqrt", &sqrt, doc::sqrt},
      {"rsqrt", &rsqrt, doc::rsqrt},
      {"sin", &sin, doc::sin},
      {"cos", &cos, doc::cos},
      {"tanh", &tanh, doc::tanh},
      {"sigmoid", &sigmoid, doc::sigmoid},
      {"relu", &relu, doc::relu},
      {"silu", &silu, doc::silu},
      {"erf", &erf, doc::erf},
      {"reciprocal", &reciprocal, doc::reciprocal},
      {"square", &square, doc::square},
      {"logical_not", &logical_not, doc::logical_not},
  };
  for (const Unary& u : unary) def_both(m, u.name, u.fn, u.doc);
}

}  // namespace

void bind_ops(nb::module_& m) {
  nb::class_<Tensor> c = tensor_class();
  nb::object vi = nb::module_::import_("collections").attr("namedtuple")("ValuesIndices", nb::make_tuple("values", "indices"));
  vi.attr("__module__") = "ember";
  vi.attr("__doc__") = doc::ValuesIndices;
  m.attr("ValuesIndices") = vi;
  g_values_indices = vi;

  bind_operators(c);
  bind_in_place_methods(c);
  bind_math(m);

  // ---- elementwise with arguments
  def_both(m, "gelu",
           [](const Tensor& x, const std::string& approximate) {
             if (approximate != "none" && approximate != "tanh")
               throw ValueError("gelu: approximate must be 'none' or 'tanh', got '" + approximate + "'");
             return gelu(x, approximate == "tanh");
           },
           "approximate"_a = "none", doc::gelu);
  def_both(m, "clamp", &clamp_any, "min"_a = nb::none(), "max"_a = nb::none(), doc::clamp);
  def_both(m, "clip", &clamp_any, "min"_a = nb::none(), "max"_a = nb::none(), "Alias of clamp.");
  def_both(m, "pow", [](const Tensor& x, const Tensor& e) { return pow(x, e); }, "exponent"_a, doc::pow);
  def_both(m, "pow", [](const Tensor& x, Scalar e) { return pow(x, e); }, "exponent"_a, doc::pow);

  // ---- binary, each with a tensor or a number as the second operand
  def_both(m, "add",
           [](const Tensor& a, const Tensor& b, Scalar alpha) { return alpha.to_double() == 1.0 ? add(a, b) : add(a, b, alpha); },
           "other"_a, nb::kw_only(), "alpha"_a = 1, doc::add);
  def_both(m, "add", [](const Tensor& a, Scalar b) { return add(a, b); }, "other"_a, doc::add);
  def_both(m, "sub",
           [](const Tensor& a, const Tensor& b, Scalar alpha) { return alpha.to_double() == 1.0 ? sub(a, b) : sub(a, b, alpha); },
           "other"_a, nb::kw_only(), "alpha"_a = 1, doc::sub);
  def_both(m, "sub", [](const Tensor& a, Scalar b) { return sub(a, b); }, "other"_a, doc::sub);
  def_both(m, "mul", [](const Tensor& a, const Tensor& b) { return mul(a, b); }, "other"_a, doc::mul);
  def_both(m, "mul", [](const Tensor& a, Scalar b) { return mul(a, b); }, "other"_a, doc::mul);
  const auto rounding = [](const std::optional<std::string>& mode) -> std::optional<RoundingMode> {
    if (!mode) return std::nullopt;
    if (*mode == "floor") return RoundingMode::floor;
    if (*mode == "trunc") return RoundingMode::trunc;
    throw ValueError("div: rounding_mode must be None, 'trunc' or 'floor', got '" + *mode + "'");
  };
  def_both(m, "div",
           [rounding](const Tensor& a, const Tensor& b, std::optional<std::string> mode) {
             const auto r = rounding(mode);
             return r ? div(a, b, *r) : div(a, b);
           },
           "other"_a, nb::kw_only(), "rounding_mode"_a = nb::none(), doc::div);
  def_both(m, "div",
           [rounding](const Tensor& a, Scalar b, std::optional<std::string> mode) {
             const auto r = rounding(mode);
             return r ? div(a, b, *r) : div(a, b);
           },
           "other"_a, nb::kw_only(), "rounding_mode"_a = nb::none(), doc::div);
  def_both(m, "true_divide", [](const Tensor& a, const Tensor& b) { return div(a, b); }, "other"_a, "a / b.");
  def_both(m, "floor_divide", [](const Tensor& a, const Tensor& b) { return div(a, b, RoundingMode::floor); }, "other"_a,
           "a // b (rounded down).");
  def_both(m, "floor_divide", [](const Tensor& a, Scalar b) { return div(a, b, RoundingMode::floor); }, "other"_a,
           "a // b (rounded down).");
  def_both(m, "remainder", [](const Tensor& a, const Tensor& b) { return remainder(a, b); }, "other"_a,
           "a % b with the sign of b (Python's and torch's remainder).");
  def_both(m, "remainder", [](const Tensor& a, Scalar b) { return remainder(a, b); }, "other"_a, "a % b.");
  def_both(m, "maximum", [](const Tensor& a, const Tensor& b) { return maximum(a, b); }, "other"_a, doc::maximum);
  def_both(m, "minimum", [](const Tensor& a, const Tensor& b) { return minimum(a, b); }, "other"_a, doc::minimum);
  struct Compare {
    const char* name;
    Tensor (*tt)(const Tensor&, const Tensor&);
    Tensor (*ts)(const Tensor&, Scalar);
    const char* doc;
  };
  static const Compare compares[] = {{"eq", &eq, &eq, doc::eq}, {"ne", &ne, &ne, doc::ne}, {"lt", &lt, &lt, doc::lt},
                                     {"le", &le, &le, doc::le}, {"gt", &gt, &gt, doc::gt}, {"ge", &ge, &ge, doc::ge}};
  for (const Compare& cmp : compares) {
    def_both(m, cmp.name, cmp.tt, "other"_a, cmp.doc);
    def_both(m, cmp.name, cmp.ts, "other"_a, cmp.doc);
  }
  def_both(m, "logical_and", &logical_and, "other"_a, "a and b elementwise (nonzero is true), as a bool tensor.");
  def_both(m, "logical_or", &logical_or, "other"_a, "a or b elementwise, as a bool tensor.");
  def_both(m, "logical_xor", &logical_xor, "other"_a, "a xor b elementwise, as a bool tensor.");
  m.def("where",
        [](const Tensor& cond, const Operand& a, const Operand& b) {
          return where(cond, a.as_tensor(cond.device()), b.as_tensor(cond.device()));
        },
        "condition"_a, "input"_a, "other"_a, doc::where);
  c.def("where",
        [](const Tensor& self, const Tensor& cond, const Operand& other) {
          return where(cond, self, other.as_tensor(self.device()));
        },
        "condition"_a, "other"_a, "self where condition is true, else other (torch's Tensor.where).");
  def_both(m, "masked_fill",
           [](const Tensor& x, const Tensor& mask, const Operand& v) {
             return v.tensor ? masked_fill(x, mask, *v.tensor) : masked_fill(x, mask, v.scalar);
           },
           "mask"_a, "value"_a, doc::masked_fill);
  def_both(m, "equal", [](const Tensor& a, const Tensor& b) { return equal(a, b); }, "other"_a, doc::equal);
  def_both(m, "allclose",
           [](const Tensor& a, const Tensor& b, double rtol, double atol) { return allclose(a, b, rtol, atol); },
           "other"_a, "rtol"_a = 1e-5, "atol"_a = 1e-8, doc::allclose);
  def_both(m, "isfinite_all", [](const Tensor& x) { return all_finite(x); }, doc::all_finite);

  // ---- reductions
  def_both(m, "sum",
           [](const Tensor& x, std::optional<DimList> dim, bool keepdim, std::optional<DType> dtype) {
             return sum(x, all_dims_if_none(dim), keepdim, dtype);
           },
           "dim"_a = nb::none(), "keepdim"_a = false, nb::kw_only(), "dtype"_a = nb::none(),
           "The sum over dim (all dims by default).");
  def_both(m, "mean",
           [](const Tensor& x, std::optional<DimList> dim, bool keepdim, std::optional<DType> dtype) {
             return mean(dtype ? x.to(*dtype) : x, all_dims_if_none(dim), keepdim);
           },
           "dim"_a = nb::none(), "keepdim"_a = false, nb::kw_only(), "dtype"_a = nb::none(),
           "The mean over dim (floating tensors only).");
  def_both(m, "prod",
           [](const Tensor& x, std::optional<DimList> dim, bool keepdim, std::optional<DType> dtype) {
             return prod(x, all_dims_if_none(dim), keepdim, dtype);
           },
           "dim"_a = nb::none(), "keepdim"_a = false, nb::kw_only(), "dtype"_a = nb::none(), "The product over dim.");
  def_both(m, "amax",
           [](const Tensor& x, std::optional<DimList> dim, bool keepdim) { return amax(x, all_dims_if_none(dim), keepdim); },
           "dim"_a = nb::none(), "keepdim"_a = false, "The maximum over dim.");
  def_both(m, "amin",
           [](const Tensor& x, std::optional<DimList> dim, bool keepdim) { return amin(x, all_dims_if_none(dim), keepdim); },
           "dim"_a = nb::none(), "keepdim"_a = false, "The minimum over dim.");
  for (const bool is_max : {true, false}) {
    const char* name = is_max ? "max" : "min";
    def_both(m, name, [is_max](const Tensor& x) { return is_max ? max(x) : min(x); },
             is_max ? "The maximum over all elements." : "The minimum over all elements.");
    def_both(m, name, [is_max](const Tensor& x, const Tensor& o) { return is_max ? maximum(x, o) : minimum(x, o); },
             "other"_a, "The elementwise maximum (max) or minimum (min) of two tensors.");
    def_both(m, name,
             [is_max](const Tensor& x, int64_t dim, bool keepdim) {
               return values_indices(is_max ? max(x, dim, keepdim) : min(x, dim, keepdim));
             },
             "dim"_a, "keepdim"_a = false, "(values, indices) of the extreme along dim (the first on ties).");
  }
  def_both(m, "argmax",
           [](const Tensor& x, std::optional<int64_t> dim, bool keepdim) { return argmax(x, dim, keepdim); },
           "dim"_a = nb::none(), "keepdim"_a = false, doc::argmax);
  def_both(m, "argmin",
           [](const Tensor& x, std::optional<int64_t> dim, bool keepdim) { return argmin(x, dim, keepdim); },
           "dim"_a = nb::none(), "keepdim"_a = false, doc::argmin);
  // ember's sort is always stable; `stable` and `sorted` are accepted as PyTorch's signatures have them.
  def_both(m, "sort",
           [](const Tensor& x, int64_t dim, bool descending, bool) { return values_indices(sort(x, dim, descending)); },
           "dim"_a = -1, "descending"_a = false, nb::kw_only(), "stable"_a = false, doc::sort);
  def_both(m, "argsort",
           [](const Tensor& x, int64_t dim, bool descending, bool) { return argsort(x, dim, descending); }, "dim"_a = -1,
           "descending"_a = false, nb::kw_only(), "stable"_a = false, doc::argsort);
  def_both(m, "topk",
           [](const Tensor& x, int64_t k, int64_t dim, bool largest, bool) { return values_indices(topk(x, k, dim, largest)); },
           "k"_a, "dim"_a = -1, "largest"_a = true, "sorted"_a = true, doc::topk);
  def_both(m, "var",
           [](const Tensor& x, std::optional<DimList> dim, std::optional<bool> unbiased, bool keepdim,
              std::optional<double> correction) {
             return var(x, all_dims_if_none(dim), correction_of(unbiased, correction), keepdim);
           },
           "dim"_a = nb::none(), "unbiased"_a = nb::none(), "keepdim"_a = false, nb::kw_only(), "correction"_a = nb::none(),
           "The variance over dim, divided by N - correction (1 by default, Bessel's).");
  def_both(m, "std",
           [](const Tensor& x, std::optional<DimList> dim, std::optional<bool> unbiased, bool keepdim,
              std::optional<double> correction) {
             return ember::std(x, all_dims_if_none(dim), correction_of(unbiased, correction), keepdim);
           },
           "dim"_a = nb::none(), "unbiased"_a = nb::none(), "keepdim"_a = false, nb::kw_only(), "correction"_a = nb::none(),
           "The standard deviation over dim.");
  def_both(m, "logsumexp",
           [](const Tensor& x, const DimList& dim, bool keepdim) { return logsumexp(x, dim.dims, keepdim); }, "dim"_a,
           "keepdim"_a = false, doc::logsumexp);
  def_both(m, "norm",
           [](const Tensor& x, nb::handle p, std::optional<DimList> dim, bool keepdim) {
             return norm(x, norm_order(p), all_dims_if_none(dim), keepdim);
           },
           "p"_a = 2.0, "dim"_a = nb::none(), "keepdim"_a = false, "The p-norm over dim (p='fro' is 2, inf is max |x|).");
  def_both(m, "any",
           [](const Tensor& x, std::optional<DimList> dim, bool keepdim) { return any(x, all_dims_if_none(dim), keepdim); },
           "dim"_a = nb::none(), "keepdim"_a = false, "Whether any element over dim is nonzero (a bool tensor).");
  def_both(m, "all",
           [](const Tensor& x, std::optional<DimList> dim, bool keepdim) { return all(x, all_dims_if_none(dim), keepdim); },
           "dim"_a = nb::none(), "keepdim"_a = false, "Whether every element over dim is nonzero (a bool tensor).");
  def_both(m, "softmax",
           [](const Tensor& x, int64_t dim, std::optional<DType> dtype) { return softmax(x, dim, dtype); }, "dim"_a,
           "dtype"_a = nb::none(), doc::softmax);
  def_both(m, "log_softmax",
           [](const Tensor& x, int64_t dim, std::optional<DType> dtype) { return log_softmax(x, dim, dtype); }, "dim"_a,
           "dtype"_a = nb::none(), doc::log_softmax);
  def_both(m, "cumsum", [](const Tensor& x, int64_t dim, std::optional<DType> dtype) { return cumsum(x, dim, dtype); },
           "dim"_a, nb::kw_only(), "dtype"_a = nb::none(), doc::cumsum);
  def_both(m, "cumprod", [](const Tensor& x, int64_t dim, std::optional<DType> dtype) { return cumprod(x, dim, dtype); },
           "dim"_a, nb::kw_only(), "dtype"_a = nb::none(), doc::cumprod);

  // ---- linear algebra; the GIL is released, as these run long
  // Operands by value: with the GIL released, another thread could rebind a Python tensor's handle.
  def_both(m, "matmul", [](Tensor a, Tensor b) { return matmul(a, b); }, "other"_a,
           nb::call_guard<nb::gil_scoped_release>(), doc::matmul);
  def_both(m, "mm", [](Tensor a, Tensor b) { return mm(a, b); }, "mat2"_a,
           nb::call_guard<nb::gil_scoped_release>(), doc::mm);
  def_both(m, "bmm", [](Tensor a, Tensor b) { return bmm(a, b); }, "mat2"_a,
           nb::call_guard<nb::gil_scoped_release>(), doc::bmm);
  m.def("linear",
        [](Tensor x, Tensor w, std::optional<Tensor> b) { return linear(x, w, b ? *b : Tensor()); },
        "input"_a, "weight"_a, "bias"_a = nb::none(), nb::call_guard<nb::gil_scoped_release>(), doc::linear);

  // ---- views and shape ops
  c.def("view", [](const Tensor& x, nb::args shape) { return x.view(shape_from_args(shape, "view")); },
        doc::view)
      .def("reshape", [](const Tensor& x, nb::args shape) { return x.reshape(shape_from_args(shape, "reshape")); },
           doc::reshape)
      .def("view_as", [](const Tensor& x, const Tensor& o) { return x.view(o.shape()); }, "other"_a, "x.view(other.shape).")
      .def("reshape_as", [](const Tensor& x, const Tensor& o) { return x.reshape(o.shape()); }, "other"_a,
           "x.reshape(other.shape).")
      .def("permute", [](const Tensor& x, nb::args dims) { return x.permute(shape_from_args(dims, "permute")); },
           doc::permute)
      .def("expand", [](const Tensor& x, nb::args shape) { return x.expand(shape_from_args(shape, "expand")); },
           doc::expand)
      .def("expand_as", [](const Tensor& x, const Tensor& o) { return x.expand(o.shape()); }, "other"_a,
           "x.expand(other.shape).")
      .def("repeat", [](const Tensor& x, nb::args sizes) { return repeat(x, shape_from_args(sizes, "repeat")); },
           "The tensor tiled sizes[i] times along each dim (a copy).")
      .def("t", [](const Tensor& x) { return x.t(); }, doc::Tensor_t)
      .def_prop_ro("T",
                   [](const Tensor& x) {
                     Shape rev;
                     for (int d = x.dim() - 1; d >= 0; --d) rev.push_back(d);
                     return x.permute(rev);
                   },
                   "The tensor with its dims reversed.")
      .def_prop_ro("mT", [](const Tensor& x) { return x.transpose(-2, -1); }, "The last two dims swapped.")
      .def("unbind",
           [](const Tensor& x, int64_t dim) {
             std::vector<Tensor> out;
             for (int64_t i = 0; i < x.size(dim); ++i) out.push_back(x.select(dim, i));
             return to_tuple(out);
           },
           "dim"_a = 0, "The slices along dim, as a tuple of views.");
  m.def("broadcast_to", [](const Tensor& x, const Shape& s) { return broadcast_to(x, s); }, "input"_a, "size"_a,
        doc::broadcast_to);
  c.def("broadcast_to", [](const Tensor& x, const Shape& s) { return broadcast_to(x, s); }, "size"_a,
        doc::broadcast_to);
  def_both(m, "transpose", [](const Tensor& x, int64_t a, int64_t b) { return transpose(x, a, b); }, "dim0"_a, "dim1"_a,
           doc::transpose);
  def_both(m, "swapaxes", [](const Tensor& x, int64_t a, int64_t b) { return transpose(x, a, b); }, "axis0"_a, "axis1"_a,
           "Alias of transpose.");
  def_both(m, "unsqueeze", [](const Tensor& x, int64_t d) { return unsqueeze(x, d); }, "dim"_a,
           doc::unsqueeze);
  def_both(m, "squeeze", &squeeze_any, "dim"_a = nb::none(), doc::squeeze);
  def_both(m, "flatten", [](const Tensor& x, int64_t s, int64_t e) { return flatten(x, s, e); }, "start_dim"_a = 0,
           "end_dim"_a = -1, doc::flatten);
  def_both(m, "narrow", [](const Tensor& x, int64_t d, int64_t s, int64_t l) { return narrow(x, d, s, l); }, "dim"_a,
           "start"_a, "length"_a, doc::narrow);
  def_both(m, "select", [](const Tensor& x, int64_t d, int64_t i) { return select(x, d, i); }, "dim"_a, "index"_a,
           doc::select);
  def_both(m, "split",
           [](const Tensor& x, nb::handle size, int64_t dim) {
             if (PyIndex_Check(size.ptr())) return to_tuple(split(x, nb::cast<int64_t>(size), dim));
             return to_tuple(split_with_sizes(x, nb::cast<std::vector<int64_t>>(size), dim));
           },
           "split_size_or_sections"_a, "dim"_a = 0,
           "Views of split_size elements along dim each, or of the given sizes (a list).");
  def_both(m, "chunk", [](const Tensor& x, int64_t chunks, int64_t dim) { return to_tuple(chunk(x, chunks, dim)); },
           "chunks"_a, "dim"_a = 0, doc::chunk);
  def_both(m, "index_select", [](const Tensor& x, int64_t d, const Tensor& i) { return index_select(x, d, i); }, "dim"_a,
           "index"_a, doc::index_select);
  def_both(m, "gather", [](const Tensor& x, int64_t d, const Tensor& i) { return gather(x, d, i); }, "dim"_a, "index"_a,
           doc::gather);
  def_both(m, "scatter_add",
           [](const Tensor& x, int64_t d, const Tensor& i, const Tensor& s) { return scatter_add(x, d, i, s); }, "dim"_a,
           "index"_a, "src"_a, doc::scatter_add);
  def_both(m, "index_add",
           [](const Tensor& x, int64_t d, const Tensor& i, const Tensor& s, Scalar alpha) {
             return index_add(x, d, i, s, alpha);
           },
           "dim"_a, "index"_a, "source"_a, nb::kw_only(), "alpha"_a = 1, doc::index_add);
  c.def("sum_to_size", [](const Tensor& x, nb::args shape) { return sum_to(x, shape_from_args(shape, "sum_to_size")); },
        doc::sum_to);
  m.def("cat", [](const std::vector<Tensor>& ts, int64_t dim) { return cat(ts, dim); }, "tensors"_a, "dim"_a = 0,
        doc::cat);
  m.def("concat", [](const std::vector<Tensor>& ts, int64_t dim) { return cat(ts, dim); }, "tensors"_a, "dim"_a = 0,
        "Alias of cat.");
  m.def("stack", [](const std::vector<Tensor>& ts, int64_t dim) { return stack(ts, dim); }, "tensors"_a, "dim"_a = 0,
        doc::stack);
  m.def("einsum", &einsum_from_args, doc::einsum);
  m.def("result_type", [](const Tensor& a, const Tensor& b) { return result_type(a, b); }, "tensor1"_a, "tensor2"_a,
        doc::result_type);
}

}  // namespace ember::python
