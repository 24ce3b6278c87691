// Creating tensors from Python: ember.tensor(data) from nested sequences, numbers, tensors and anything
// with the buffer protocol (NumPy arrays: always a copy, as torch.tensor), the shape-taking factories
// (zeros(2, 3) or zeros((2, 3))), ranges, random tensors and the *_like / new_* forms.
#include <nanobind/stl/pair.h>

#include <cstring>

#include "python/ember/bind.h"

namespace ember::python {

namespace {

// ---- nested Python sequences

enum class Kind { boolean, integer, floating };

struct Nested {
  Shape shape;
  bool shape_known = false;
  Kind kind = Kind::boolean;
  bool any_element = false;
  std::vector<double> floats;   // every element as a double (used when the result is floating)
  std::vector<int64_t> ints;    // and as an int64 (exact for integer results)
};

bool is_sequence(PyObject* o) {
  return (PyList_Check(o) || PyTuple_Check(o) || (PySequence_Check(o) && !PyUnicode_Check(o) && !PyBytes_Check(o) &&
                                                  !is_tensor(o) && !PyObject_CheckBuffer(o)));
}

// A Python number the dtype cannot take (ember::fits: PyTorch's rule) is an OverflowError, as Python's
// own conversions raise.
void check_fits(Scalar v, DType dt) {
  if (fits(v, dt)) return;
  const std::string text = v.is_floating() ? nb::cast<std::string>(nb::repr(nb::float_(v.to_double())))
                                           : std::to_string(v.to_int());
  PyErr_SetString(PyExc_OverflowError, ("tensor(): the value " + text + " does not fit in " + dtype_name(dt)).c_str());
  throw nb::python_error();
}

[[noreturn]] void ragged(const std::string& where) {
  throw ValueError("tensor(): the nested sequences are not rectangular (" + where + ")");
}

void add_element(PyObject* o, Nested& n) {
  Scalar s(0);
  if (is_tensor(o)) {
    const Tensor& t = nb::cast<const Tensor&>(nb::handle(o));
    if (t.numel() != 1) throw ValueError("tensor(): only one-element tensors can be elements of a nested sequence");
    if (t.dtype() == DType::boolean) s = Scalar(t.item<bool>());
    else if (is_floating(t.dtype())) s = Scalar(t.item<double>());
    else s = Scalar(t.item<int64_t>());
  } else if (!scalar_from_object(o, true, &s)) {
    if (PyLong_Check(o)) {
      PyErr_SetString(PyExc_OverflowError, "tensor(): an int of the data does not fit in int64");
      throw nb::python_error();
    }
    throw nb::type_error(("tensor(): cannot convert an element of type " + std::string(Py_TYPE(o)->tp_name) +
                          " to a number")
                             .c_str());
  }
  const Kind k = s.is_floating() ? Kind::floating : s.is_bool() ? Kind::boolean : Kind::integer;
  if (static_cast<int>(k) > static_cast<int>(n.kind)) n.kind = k;
  n.any_element = true;
  n.floats.push_back(s.to_double());
  n.ints.push_back(s.to_int());
}

void walk(PyObject* o, int depth, Shape& path_shape, Nested& n) {
  if (!is_sequence(o)) {
    if (n.shape_known && depth != n.shape.size()) ragged("a number where a sequence was expected");
    if (!n.shape_known) {
      n.shape = path_shape;
      n.shape_known = true;
    }
    add_element(o, n);
    return;
  }
  nb::object seq = nb::steal(PySequence_Fast(o, "tensor(): expected a sequence"));
  if (!seq.is_valid()) throw nb::python_error();
  const Py_ssize_t len = PySequence_Fast_GET_SIZE(seq.ptr());
  if (n.shape_known) {
    if (depth >= n.shape.size()) ragged("a sequence where a number was expected");
    if (n.shape[depth] != len) ragged("lengths " + std::to_string(n.shape[depth]) + " and " + std::to_string(len));
  }
  path_shape.push_back(len);
  if (len == 0 && !n.shape_known) {
    n.shape = path_shape;
    n.shape_known = true;
  }
  PyObject** items = PySequence_Fast_ITEMS(seq.ptr());
  for (Py_ssize_t i = 0; i < len; ++i) walk(items[i], depth + 1, path_shape, n);
  path_shape.erase(path_shape.size() - 1);
}

Tensor from_nested(PyObject* o, std::optional<DType> dtype) {
  Nested n;
  Shape path;
  walk(o, 0, path, n);
  const DType inferred = !n.any_element                 ? kDefaultFloat
                         : n.kind == Kind::floating      ? kDefaultFloat
                         : n.kind == Kind::integer       ? DType::i64
                                                         : DType::boolean;
  const DType dt = dtype.value_or(inferred);
  if (!is_floating(dt) && dt != DType::boolean)
    for (size_t i = 0; i < n.ints.size(); ++i)
      check_fits(n.kind == Kind::floating ? Scalar(n.floats[i]) : Scalar(n.ints[i]), dt);
  // Integers go through int64 so that large values stay exact; the rest through double.
  if (n.kind != Kind::floating && !is_floating(dt)) return from_vector(n.ints, n.shape, TensorOptions(dt));
  return from_vector(n.floats, n.shape, TensorOptions(dt));
}

// ---- the buffer protocol (NumPy arrays, memoryviews, array.array)

// The dtype of a struct-module format; DTypeError for what ember cannot hold.
DType dtype_of_format(const char* format, Py_ssize_t itemsize) {
  std::string f = format ? format : "B";
  if (!f.empty() && (f[0] == '@' || f[0] == '=' || f[0] == '<')) f.erase(0, 1);
  else if (!f.empty() && (f[0] == '>' || f[0] == '!'))
    throw DTypeError("tensor(): big-endian buffers (format '" + std::string(format) + "') are not supported");
  if (f.size() == 1) {
    switch (f[0]) {
      case 'f': return DType::f32;
      case 'd': return DType::f64;
      case 'e': return DType::f16;
      case '?': return DType::boolean;
      case 'B': return DType::u8;
      case 'i':
      case 'l':
      case 'q':
        if (itemsize == 4) return DType::i32;
        if (itemsize == 8) return DType::i64;
        break;
      default: break;
    }
  }
  // Name the type as NumPy would, so the message says what to convert from.
  std::string kind = "an unknown type";
  if (f.size() == 1) {
    const char c = f[0];
    const bool is_signed = c == 'b' || c == 'h' || c == 'i' || c == 'l' || c == 'q';
    const bool is_unsigned = c == 'B' || c == 'H' || c == 'I' || c == 'L' || c == 'Q';
    if (is_signed || is_unsigned) kind = std::string(is_signed ? "int" : "uint") + std::to_string(itemsize * 8);
    else if (c == 'f' || c == 'd' || c == 'e' || c == 'g') kind = "float" + std::to_string(itemsize * 8);
  } else if (f.size() == 2 && f[0] == 'Z') {
    kind = "complex" + std::to_string(itemsize * 8);
  }
  throw DTypeError("tensor(): ember has no dtype for buffer format '" + std::string(format ? format : "") + "' (" +
                   kind + "); ember holds float32, float16, bfloat16, float64, int32, int64, uint8 and bool: "
                   "convert first, e.g. np.asarray(x, dtype=np.int64)");
}

// Copies a strided n-d block into dense row-major memory; the innermost dim as one run when contiguous.
void copy_strided(char* dst, const char* src, const Py_ssize_t* shape, const Py_ssize_t* strides, int ndim,
                  size_t itemsize, size_t& written) {
  if (ndim == 0) {
    std::memcpy(dst + written, src, itemsize);
    written += itemsize;
    return;
  }
  if (ndim == 1 && strides[0] == static_cast<Py_ssize_t>(itemsize)) {
    std::memcpy(dst + written, src, shape[0] * itemsize);
    written += shape[0] * itemsize;
    return;
  }
  for (Py_ssize_t i = 0; i < shape[0]; ++i) copy_strided(dst, src + i * strides[0], shape + 1, strides + 1, ndim - 1, itemsize, written);
}

Tensor from_buffer(PyObject* o) {
  Py_buffer view;
  if (PyObject_GetBuffer(o, &view, PyBUF_STRIDES | PyBUF_FORMAT) != 0) throw nb::python_error();
  struct Release {
    Py_buffer* v;
    ~Release() { PyBuffer_Release(v); }
  } release{&view};
  const DType dt = dtype_of_format(view.format, view.itemsize);
  if (dtype_size(dt) != view.itemsize)
    throw DTypeError("tensor(): buffer items of " + std::to_string(view.itemsize) + " bytes for format '" +
                     std::string(view.format) + "'");
  Shape shape;
  for (int d = 0; d < view.ndim; ++d) shape.push_back(view.shape[d]);
  Tensor t = empty(shape, TensorOptions(dt));
  if (t.numel() == 0) return t;
  // An exporter may leave strides out (ctypes arrays do, a 0-dim buffer has none): its memory is then
  // C-contiguous.
  std::vector<Py_ssize_t> row_major(std::max(view.ndim, 1), view.itemsize);
  for (int d = view.ndim - 2; d >= 0; --d) row_major[d] = row_major[d + 1] * view.shape[d + 1];
  nb::gil_scoped_release unlocked;  // the view keeps the exporter alive
  size_t written = 0;
  copy_strided(static_cast<char*>(t.raw_data()), static_cast<const char*>(view.buf), view.shape,
               view.strides ? view.strides : row_major.data(), view.ndim, view.itemsize, written);
  return t;
}

}  // namespace

Tensor tensor_from(nb::handle data, std::optional<DType> dtype, std::optional<Device> device, bool requires_grad) {
  PyObject* o = data.ptr();
  Tensor t;
  if (is_tensor(o)) {
    NoGradGuard no_grad;  // a copy of the values: no history, as torch.tensor(t)
    t = nb::cast<const Tensor&>(data).detach().clone();
  } else if (PyObject_CheckBuffer(o) && !PyBytes_Check(o) && !PyByteArray_Check(o)) {
    t = from_buffer(o);
  } else if (!PyBool_Check(o) && !PyLong_Check(o) && !PyFloat_Check(o) && nb::hasattr(data, "__dlpack__")) {
    // Another library's array (a torch.Tensor, which also has __float__): import it without a copy,
    // then copy with ember.
    nb::object imported = nb::module_::import_("ember").attr("from_dlpack")(data);
    t = nb::cast<const Tensor&>(imported).clone();
  } else if (PyBool_Check(o) || PyLong_Check(o) || PyFloat_Check(o) || PyIndex_Check(o) ||
             (Py_TYPE(o)->tp_as_number && Py_TYPE(o)->tp_as_number->nb_float && !is_sequence(o))) {
    Scalar s(0);
    if (!scalar_from_object(o, true, &s)) {
      if (PyLong_Check(o)) {
        PyErr_SetString(PyExc_OverflowError, "tensor(): the int does not fit in int64");
        throw nb::python_error();
      }
      throw nb::type_error(("tensor(): cannot convert " + std::string(Py_TYPE(o)->tp_name) + " to a tensor").c_str());
    }
    const DType inferred = s.is_floating() ? kDefaultFloat : s.is_bool() ? DType::boolean : DType::i64;
    check_fits(s, dtype.value_or(inferred));
    t = scalar_tensor(s, TensorOptions(dtype.value_or(inferred)));
  } else if (is_sequence(o)) {
    t = from_nested(o, dtype);
  } else {
    throw nb::type_error(("tensor(): cannot convert " + std::string(Py_TYPE(o)->tp_name) + " to a tensor").c_str());
  }
  if (dtype) t = t.to(*dtype);
  if (device && t.device() != *device) {
    nb::gil_scoped_release release;
    t = t.to(*device);
  }
  if (requires_grad) t.requires_grad_(true);
  return t;
}

namespace {

DType dtype_of_fill(Scalar v) { return v.is_floating() ? kDefaultFloat : v.is_bool() ? DType::boolean : DType::i64; }

// linspace (ember has none): the first half counted up from start and the second down from end, as
// PyTorch, so both ends are exact.
Tensor linspace(double start, double end, int64_t steps, TensorOptions opts) {
  if (steps < 0) throw ValueError("linspace: steps must be at least 0, got " + std::to_string(steps));
  const bool rg = opts.requires_grad;
  Tensor out;
  {
    NoGradGuard no_grad;
    if (steps <= 1) {
      out = full({steps}, start, TensorOptions(DType::f64).with_device(opts.device));
    } else {
      const double step = (end - start) / static_cast<double>(steps - 1);
      Tensor idx = arange(steps, DType::f64, opts.device);
      Tensor lo = add(mul(idx, step), start);
      Tensor hi = rsub(mul(rsub(idx, static_cast<double>(steps - 1)), step), end);
      out = where(lt(idx, static_cast<double>(steps / 2)), lo, hi);
    }
    out = out.to(opts.dtype);
  }
  if (rg) out.requires_grad_(true);
  return out;
}

// eye (ember has none): where the row index equals the column index.
Tensor eye(int64_t n, std::optional<int64_t> m, TensorOptions opts) {
  if (n < 0 || m.value_or(0) < 0)
    throw ValueError("eye: the sizes must be at least 0, got n=" + std::to_string(n) + ", m=" + std::to_string(m.value_or(n)));
  const bool rg = opts.requires_grad;
  Tensor out;
  {
    NoGradGuard no_grad;
    Tensor rows = arange(n, DType::i64, opts.device).unsqueeze(1);
    Tensor cols = arange(m.value_or(n), DType::i64, opts.device).unsqueeze(0);
    out = eq(rows, cols).to(opts.dtype).contiguous();
  }
  if (rg) out.requires_grad_(true);
  return out;
}

// Shared keyword arguments of the factories.
#define EMBER_FACTORY_KWARGS nb::kw_only(), "dtype"_a = nb::none(), "device"_a = nb::none(), "requires_grad"_a = false

}  // namespace

void bind_factory(nb::module_& m) {
  nb::class_<Generator>(m, "Generator", doc::Generator)
      .def(nb::init<uint64_t>(), "seed"_a = 0, doc::Generator_Generator)
      .def("manual_seed",
           [](nb::handle self, uint64_t seed) {
             nb::cast<Generator&>(self).manual_seed(seed);
             return nb::borrow(self);
           },
           "seed"_a, "Restarts at the start of the stream of seed; returns self.")
      .def("initial_seed", &Generator::seed, doc::Generator_seed)
      .def("get_state", [](const Generator& g) { return nb::make_tuple(g.state().seed, g.state().offset); },
           "The state (seed, offset), to restore with set_state.")
      .def("set_state",
           [](Generator& g, std::pair<uint64_t, uint64_t> s) { g.set_state(GeneratorState{s.first, s.second}); },
           "state"_a, doc::Generator_set_state);
  m.attr("default_generator") = nb::cast(&default_generator(), nb::rv_policy::reference);

  m.def("tensor", &tensor_from, "data"_a.none(), EMBER_FACTORY_KWARGS,
        "A new tensor holding a copy of data: nested sequences of numbers, a number, a tensor, or anything with the "
        "buffer protocol (NumPy arrays keep their dtype). Floats become float32 and ints int64 unless dtype says.");
  m.def("scalar_tensor",
        [](Scalar v, std::optional<DType> dtype, std::optional<Device> device, bool rg) {
          return scalar_tensor(v, make_options(dtype, device, rg));
        },
        "value"_a, EMBER_FACTORY_KWARGS, "A 0-dim tensor (float32 unless dtype says).");

  struct Fill {
    const char* name;
    Tensor (*fn)(const Shape&, TensorOptions);
    const char* doc;
  };
  static const Fill fills[] = {
      {"zeros", &zeros, doc::zeros}, {"ones", &ones, doc::ones}, {"empty", &empty, doc::empty}};
  for (const Fill& f : fills) {
    const auto fn = f.fn;
    const char* name = f.name;
    m.def(f.name,
          [fn, name](nb::args size, std::optional<DType> dtype, std::optional<Device> device, bool rg) {
            return fn(shape_from_args(size, name), make_options(dtype, device, rg));
          },
          "size"_a, EMBER_FACTORY_KWARGS, f.doc);
  }
  m.def("full",
        [](const Shape& size, Scalar value, std::optional<DType> dtype, std::optional<Device> device, bool rg) {
          return full(size, value, make_options(dtype, device, rg, dtype_of_fill(value)));
        },
        "size"_a, "fill_value"_a, EMBER_FACTORY_KWARGS,
        "A new tensor of size filled with fill_value (its dtype follows the value: float32, int64 or bool).");
  m.def("arange",
        [](Scalar start, std::optional<Scalar> end, Scalar step, std::optional<DType> dtype, std::optional<Device> device,
           bool rg) {
          Tensor t = end ? arange(start, *end, step, dtype, device_or_cpu(device)) : arange(start, dtype, device_or_cpu(device));
          if (rg) t.requires_grad_(true);
          return t;
        },
        "start"_a, "end"_a = nb::none(), "step"_a = 1, EMBER_FACTORY_KWARGS, doc::arange);
  m.def("linspace",
        [](double start, double end, int64_t steps, std::optional<DType> dtype, std::optional<Device> device, bool rg) {
          return linspace(start, end, steps, make_options(dtype, device, rg));
        },
        "start"_a, "end"_a, "steps"_a, EMBER_FACTORY_KWARGS, "steps values evenly spaced from start to end (both included).");
  m.def("eye",
        [](int64_t n, std::optional<int64_t> cols, std::optional<DType> dtype, std::optional<Device> device, bool rg) {
          return eye(n, cols, make_options(dtype, device, rg));
        },
        "n"_a, "m"_a = nb::none(), EMBER_FACTORY_KWARGS, "The n x m identity matrix (m = n by default).");

  // ---- random
  m.def("rand",
        [](nb::args size, Generator* gen, std::optional<DType> dtype, std::optional<Device> device, bool rg) {
          return rand(shape_from_args(size, "rand"), make_options(dtype, device, rg), gen);
        },
        "size"_a, nb::kw_only(), "generator"_a = nb::none(), "dtype"_a = nb::none(), "device"_a = nb::none(),
        "requires_grad"_a = false, doc::rand);
  m.def("randn",
        [](nb::args size, Generator* gen, std::optional<DType> dtype, std::optional<Device> device, bool rg) {
          return randn(shape_from_args(size, "randn"), make_options(dtype, device, rg), gen);
        },
        "size"_a, nb::kw_only(), "generator"_a = nb::none(), "dtype"_a = nb::none(), "device"_a = nb::none(),
        "requires_grad"_a = false, doc::randn);
  m.def("randint",
        [](int64_t high, const Shape& size, Generator* gen, std::optional<DType> dtype, std::optional<Device> device) {
          return randint(0, high, size, make_options(dtype, device, false, DType::i64), gen);
        },
        "high"_a, "size"_a, nb::kw_only(), "generator"_a = nb::none(), "dtype"_a = nb::none(), "device"_a = nb::none(),
        "Uniform integers in [0, high) (int64 unless dtype says).");
  m.def("randint",
        [](int64_t low, int64_t high, const Shape& size, Generator* gen, std::optional<DType> dtype,
           std::optional<Device> device) {
          return randint(low, high, size, make_options(dtype, device, false, DType::i64), gen);
        },
        "low"_a, "high"_a, "size"_a, nb::kw_only(), "generator"_a = nb::none(), "dtype"_a = nb::none(),
        "device"_a = nb::none(), "Uniform integers in [low, high).");

  // ---- *_like: the shape, dtype and device of another tensor unless given
  const auto like_options = [](const Tensor& t, std::optional<DType> dtype, std::optional<Device> device, bool rg) {
    TensorOptions o(dtype.value_or(t.dtype()));
    o.device = device.value_or(t.device());
    o.requires_grad = rg;
    return o;
  };
  m.def("zeros_like",
        [like_options](const Tensor& t, std::optional<DType> dt, std::optional<Device> dev, bool rg) {
          return zeros(t.shape(), like_options(t, dt, dev, rg));
        },
        "input"_a, EMBER_FACTORY_KWARGS, "Zeros of input's shape (and dtype and device unless given).");
  m.def("ones_like",
        [like_options](const Tensor& t, std::optional<DType> dt, std::optional<Device> dev, bool rg) {
          return ones(t.shape(), like_options(t, dt, dev, rg));
        },
        "input"_a, EMBER_FACTORY_KWARGS, "Ones of input's shape.");
  m.def("empty_like",
        [like_options](const Tensor& t, std::optional<DType> dt, std::optional<Device> dev, bool rg) {
          return empty(t.shape(), like_options(t, dt, dev, rg));
        },
        "input"_a, EMBER_FACTORY_KWARGS, "An uninitialised tensor of input's shape.");
  m.def("full_like",
        [like_options](const Tensor& t, Scalar v, std::optional<DType> dt, std::optional<Device> dev, bool rg) {
          return full(t.shape(), v, like_options(t, dt, dev, rg));
        },
        "input"_a, "fill_value"_a, EMBER_FACTORY_KWARGS, "fill_value in input's shape.");
  m.def("rand_like",
        [like_options](const Tensor& t, std::optional<DType> dt, std::optional<Device> dev, bool rg) {
          return rand(t.shape(), like_options(t, dt, dev, rg));
        },
        "input"_a, EMBER_FACTORY_KWARGS, "Uniform values in [0, 1) in input's shape.");
  m.def("randn_like",
        [like_options](const Tensor& t, std::optional<DType> dt, std::optional<Device> dev, bool rg) {
          return randn(t.shape(), like_options(t, dt, dev, rg));
        },
        "input"_a, EMBER_FACTORY_KWARGS, "Standard normal values in input's shape.");

  // ---- Tensor.new_*: a new tensor with this one's dtype and device unless given
  nb::class_<Tensor> c = tensor_class();
  c.def("new_zeros",
        [like_options](const Tensor& t, nb::args size, std::optional<DType> dt, std::optional<Device> dev, bool rg) {
          return zeros(shape_from_args(size, "new_zeros"), like_options(t, dt, dev, rg));
        },
        "size"_a, EMBER_FACTORY_KWARGS, "Zeros of size with this tensor's dtype and device.")
      .def("new_ones",
           [like_options](const Tensor& t, nb::args size, std::optional<DType> dt, std::optional<Device> dev, bool rg) {
             return ones(shape_from_args(size, "new_ones"), like_options(t, dt, dev, rg));
           },
           "size"_a, EMBER_FACTORY_KWARGS, "Ones of size with this tensor's dtype and device.")
      .def("new_empty",
           [like_options](const Tensor& t, nb::args size, std::optional<DType> dt, std::optional<Device> dev, bool rg) {
             return empty(shape_from_args(size, "new_empty"), like_options(t, dt, dev, rg));
           },
           "size"_a, EMBER_FACTORY_KWARGS, "An uninitialised tensor of size with this tensor's dtype and device.")
      .def("new_full",
           [like_options](const Tensor& t, const Shape& size, Scalar v, std::optional<DType> dt, std::optional<Device> dev,
                          bool rg) { return full(size, v, like_options(t, dt, dev, rg)); },
           "size"_a, "fill_value"_a, EMBER_FACTORY_KWARGS, "fill_value in size with this tensor's dtype and device.")
      .def("new_tensor",
           [](const Tensor& t, nb::handle data, std::optional<DType> dt, std::optional<Device> dev, bool rg) {
             return tensor_from(data, dt.value_or(t.dtype()), dev.value_or(t.device()), rg);
           },
           "data"_a, EMBER_FACTORY_KWARGS, "ember.tensor(data) with this tensor's dtype and device unless given.");
}

}  // namespace ember::python
