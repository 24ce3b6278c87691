// ember.dtype (one object per element type, as torch.float32), ember.device, ember.Size, the argument
// casters declared in bind.h, and process-wide settings (seed, threads, determinism, CUDA presence).
#include <nanobind/eval.h>

#include <array>
#include <cstring>
#include <limits>

#include "python/ember/bind.h"

namespace ember::python {

namespace {

// What an ember.dtype object holds. The eight objects are made once; every dtype the module hands
// out is one of them.
struct DTypeObject {
  DType value;
};

constexpr std::array<DType, 8> kAllDTypes = {DType::f32, DType::f16, DType::bf16, DType::f64,
                                             DType::i32, DType::i64, DType::u8,  DType::boolean};
// Borrowed references: the module's attributes hold these objects.
std::array<PyObject*, 8> g_dtype_objects{};
PyObject* g_size_type = nullptr;

struct NamedDType {
  const char* name;
  DType dtype;
};
// Names accepted where a dtype is expected (the canonical ones first: they name the module attributes).
constexpr NamedDType kDTypeNames[] = {
    {"float32", DType::f32}, {"float16", DType::f16}, {"bfloat16", DType::bf16}, {"float64", DType::f64},
    {"int32", DType::i32},   {"int64", DType::i64},   {"uint8", DType::u8},      {"bool", DType::boolean},
    {"float", DType::f32},   {"half", DType::f16},    {"double", DType::f64},    {"int", DType::i32},
    {"long", DType::i64},    {"bool_", DType::boolean}};

bool dtype_from_name(const char* name, DType* out) {
  for (const NamedDType& n : kDTypeNames)
    if (std::strcmp(n.name, name) == 0) {
      *out = n.dtype;
      return true;
    }
  return false;
}

std::string device_repr(const Device& d) {
  return d.is_cpu() ? "device(type='cpu')" : "device(type='cuda', index=" + std::to_string(d.index) + ")";
}

// Two CUDA devices are the same when their indices match; "cuda" means cuda:0 in ember.
bool device_equals(const Device& a, nb::handle b) {
  Device other;
  if (nb::try_cast<Device>(b, other, false)) return a == other;
  if (nb::isinstance<nb::str>(b)) return a == Device::parse(nb::cast<std::string>(b));
  return false;
}

}  // namespace

PyObject* dtype_object(DType d) { return g_dtype_objects[static_cast<size_t>(d)]; }

bool dtype_from_object(PyObject* o, DType* out) {
  DTypeObject* d = nullptr;
  if (nb::try_cast<DTypeObject*>(nb::handle(o), d, false) && d) {
    *out = d->value;
    return true;
  }
  // As torch: dtype=float is float64, int is int64, bool is bool.
  if (o == reinterpret_cast<PyObject*>(&PyFloat_Type)) return *out = DType::f64, true;
  if (o == reinterpret_cast<PyObject*>(&PyLong_Type)) return *out = DType::i64, true;
  if (o == reinterpret_cast<PyObject*>(&PyBool_Type)) return *out = DType::boolean, true;
  if (PyUnicode_Check(o)) {
    const char* s = PyUnicode_AsUTF8(o);
    if (!s) {
      PyErr_Clear();
      return false;
    }
    if (std::strncmp(s, "ember.", 6) == 0) s += 6;
    return dtype_from_name(s, out);
  }
  // NumPy dtypes and scalar types (np.float32, np.dtype("int64")) by their name.
  nb::handle h(o);
  if (nb::hasattr(h, "__module__") && nb::hasattr(h, "__name__") && PyType_Check(o)) {
    nb::object mod = h.attr("__module__");
    if (nb::isinstance<nb::str>(mod) && nb::cast<std::string>(mod) == "numpy")
      return dtype_from_name(nb::cast<std::string>(h.attr("__name__")).c_str(), out);
  }
  if (nb::hasattr(h, "kind") && nb::hasattr(h, "itemsize") && nb::hasattr(h, "name")) {
    nb::object name = h.attr("name");
    if (nb::isinstance<nb::str>(name)) return dtype_from_name(nb::cast<std::string>(name).c_str(), out);
  }
  return false;
}

nb::object make_size(const Shape& s) {
  nb::tuple t = nb::steal<nb::tuple>(PyTuple_New(s.size()));
  for (int i = 0; i < s.size(); ++i) PyTuple_SET_ITEM(t.ptr(), i, PyLong_FromLongLong(s[i]));
  if (!g_size_type) return t;
  return nb::handle(g_size_type)(t);
}

PyRef::PyRef(nb::handle h) {
  Py_XINCREF(h.ptr());
  obj_ = std::shared_ptr<PyObject>(h.ptr(), [](PyObject* o) {
    if (!o) return;
    // Holding the GIL (also while the interpreter tears down the modules): release at once.
    if (PyGILState_Check()) {
      Py_DECREF(o);
      return;
    }
    nb::gil_scoped_acquire gil;  // invalid once the interpreter is finalizing: the reference is then leaked
    if (gil.is_valid()) Py_DECREF(o);
  });
}

TensorOptions make_options(std::optional<DType> dtype, const std::optional<Device>& device, bool requires_grad,
                           DType fallback) {
  TensorOptions o(dtype.value_or(fallback));
  o.device = device_or_cpu(device);
  o.requires_grad = requires_grad;
  return o;
}

bool scalar_from_object(PyObject* o, bool convert, Scalar* out) {
  if (PyBool_Check(o)) {
    *out = Scalar(o == Py_True);
    return true;
  }
  if (PyLong_Check(o)) {
    int overflow = 0;
    const long long v = PyLong_AsLongLongAndOverflow(o, &overflow);
    if (overflow || (v == -1 && PyErr_Occurred())) {
      PyErr_Clear();
      return false;
    }
    *out = Scalar(static_cast<int64_t>(v));
    return true;
  }
  if (PyFloat_Check(o)) {
    *out = Scalar(PyFloat_AS_DOUBLE(o));
    return true;
  }
  // NumPy scalars and other number types; never a tensor, whose overloads come first.
  if (!convert || is_tensor(o)) return false;
  const char* tp = Py_TYPE(o)->tp_name;
  if (std::strcmp(tp, "numpy.bool") == 0 || std::strcmp(tp, "numpy.bool_") == 0) {
    const int b = PyObject_IsTrue(o);
    if (b < 0) return PyErr_Clear(), false;
    *out = Scalar(b != 0);
    return true;
  }
  if (PyIndex_Check(o)) {
    nb::object i = nb::steal(PyNumber_Index(o));
    if (!i.is_valid()) return PyErr_Clear(), false;
    return scalar_from_object(i.ptr(), false, out);
  }
  if (Py_TYPE(o)->tp_as_number && Py_TYPE(o)->tp_as_number->nb_float) {
    const double v = PyFloat_AsDouble(o);
    if (v == -1.0 && PyErr_Occurred()) return PyErr_Clear(), false;
    *out = Scalar(v);
    return true;
  }
  return false;
}

namespace {
// One int of a shape or dim list: ints and objects with __index__, never a tensor or a float.
bool index_from_object(PyObject* o, int64_t* out) {
  // A bool is an int to Python, but not a size or a dim (PyTorch refuses zeros(True) the same way).
  if (is_tensor(o) || PyFloat_Check(o) || PyBool_Check(o) || !PyIndex_Check(o)) return false;
  nb::object i = nb::steal(PyNumber_Index(o));
  if (!i.is_valid()) return PyErr_Clear(), false;
  int overflow = 0;
  const long long v = PyLong_AsLongLongAndOverflow(i.ptr(), &overflow);
  if (overflow || (v == -1 && PyErr_Occurred())) return PyErr_Clear(), false;
  *out = v;
  return true;
}

bool dims_from_sequence(PyObject* o, Shape* out) {
  if (PyUnicode_Check(o) || PyBytes_Check(o) || is_tensor(o) || !PySequence_Check(o)) return false;
  nb::object seq = nb::steal(PySequence_Fast(o, ""));
  if (!seq.is_valid()) return PyErr_Clear(), false;
  const Py_ssize_t n = PySequence_Fast_GET_SIZE(seq.ptr());
  if (n > kMaxDims) return false;
  PyObject** items = PySequence_Fast_ITEMS(seq.ptr());
  Shape s;
  for (Py_ssize_t i = 0; i < n; ++i) {
    int64_t v;
    if (!index_from_object(items[i], &v)) return false;
    s.push_back(v);
  }
  *out = s;
  return true;
}
}  // namespace

Shape shape_from_args(const nb::args& args, const char* fn) {
  Shape s;
  if (args.size() == 1 && !PyIndex_Check(args[0].ptr())) {
    if (dims_from_sequence(args[0].ptr(), &s)) return s;
  } else {
    bool ok = args.size() <= static_cast<size_t>(kMaxDims);
    for (size_t i = 0; ok && i < args.size(); ++i) {
      int64_t v;
      ok = index_from_object(args[i].ptr(), &v);
      if (ok) s.push_back(v);
    }
    if (ok) return s;
  }
  throw nb::type_error((std::string(fn) + "(): the size must be ints or one sequence of ints (at most " +
                        std::to_string(kMaxDims) + "), got " + nb::cast<std::string>(nb::repr(args)))
                           .c_str());
}

void bind_dtype(nb::module_& m) {
  nb::class_<DTypeObject>(m, "dtype", "An element type: ember.float32, ember.int64, ... (one object per type).")
      .def_prop_ro(
          "is_floating_point", [](const DTypeObject& d) { return is_floating(d.value); },
          "Whether this is float32, float16, bfloat16 or float64.")
      .def_prop_ro(
          "itemsize", [](const DTypeObject& d) { return dtype_size(d.value); }, doc::dtype_size)
      .def_prop_ro(
          "is_signed", [](const DTypeObject& d) { return d.value != DType::u8 && d.value != DType::boolean; },
          "Whether values may be negative.")
      .def("__repr__", [](const DTypeObject& d) { return std::string("ember.") + dtype_name(d.value); })
      .def("__reduce__", [](const DTypeObject& d) { return std::string(dtype_name(d.value)); });

  for (DType d : kAllDTypes) {
    nb::object o = nb::cast(DTypeObject{d});
    g_dtype_objects[static_cast<size_t>(d)] = o.ptr();  // borrowed: the module attribute below holds it
    m.attr(dtype_name(d)) = o;
  }
  for (const NamedDType& n : kDTypeNames)
    if (std::strcmp(n.name, "int") != 0 && std::strcmp(n.name, "bool_") != 0)
      m.attr(n.name) = nb::handle(dtype_object(n.dtype));
  // ember.int is int32 as torch.int; ember.bool is the bool dtype (shadowing the builtin only inside ember.*).
  m.attr("int") = nb::handle(dtype_object(DType::i32));

  nb::class_<Device>(m, "device", doc::Device)
      .def("__init__", [](Device* d, const std::string& spec) { new (d) Device(Device::parse(spec)); },
           "spec"_a, doc::Device_parse)
      .def(
          "__init__",
          [](Device* d, const std::string& type, int index) {
            if (type != "cuda" && type != "cpu")
              throw DeviceError("device(" + type + ", " + std::to_string(index) + "): unknown device type '" + type +
                                "' (ember has 'cpu' and 'cuda')");
            if (type == "cpu" && index != 0)
              throw DeviceError("device(" + type + ", " + std::to_string(index) + "): only CUDA devices have an index");
            if (index < 0 || index > std::numeric_limits<int8_t>::max())
              throw DeviceError("device(" + type + ", " + std::to_string(index) + "): a device index is from 0 to " +
                                std::to_string(std::numeric_limits<int8_t>::max()));
            new (d) Device(type == "cuda" ? DeviceType::cuda : DeviceType::cpu, index);
          },
          "type"_a, "index"_a)
      .def_prop_ro(
          "type", [](const Device& d) { return d.is_cpu() ? "cpu" : "cuda"; }, "'cpu' or 'cuda'.")
      .def_prop_ro(
          "index", [](const Device& d) -> std::optional<int> { return d.is_cpu() ? std::nullopt : std::optional<int>(d.index); },
          "The GPU's index, None for the CPU.")
      .def("__repr__", &device_repr)
      .def("__str__", &Device::str)
      .def("__eq__", &device_equals)
      .def("__ne__", [](const Device& a, nb::handle b) { return !device_equals(a, b); })
      .def("__hash__", [](const Device& d) { return static_cast<int>(d.type) * 256 + d.index; })
      .def("__reduce__", [](const Device& d) { return nb::make_tuple(nb::type<Device>(), nb::make_tuple(d.str())); });

  // Wherever a device is expected, a string will do: zeros(2, device="cuda:0").
  nb::implicitly_convertible<std::string, Device>();

  // ember.Size: the tuple .shape returns, as torch.Size.
  nb::dict scope;
  scope["__builtins__"] = nb::module_::import_("builtins");
  nb::exec(R"PY(
class Size(tuple):
    """A tensor's shape: a tuple of ints (t.shape), as torch.Size."""

    __slots__ = ()
    __module__ = "ember"

    def numel(self):
        """The number of elements a tensor of this shape holds."""
        n = 1
        for s in self:
            n *= s
        return n

    def __getitem__(self, i):
        r = tuple.__getitem__(self, i)
        return Size(r) if isinstance(i, slice) else r

    def __repr__(self):
        return "ember.Size([" + ", ".join(str(s) for s in self) + "])"
)PY",
           scope);
  nb::object size_type = scope["Size"];
  g_size_type = size_type.ptr();  // borrowed: the module holds it
  m.attr("Size") = size_type;

  m.def("manual_seed", [](uint64_t seed) { manual_seed(seed); }, "seed"_a, doc::manual_seed);
  m.def("initial_seed", [] { return default_generator().seed(); }, "The default generator's seed.");
  m.def("set_num_threads", &set_num_threads, "n"_a, doc::set_num_threads);
  m.def("get_num_threads", &get_num_threads, doc::get_num_threads);
  m.def("use_deterministic_algorithms", &set_deterministic, "mode"_a, doc::set_deterministic);
  m.def("are_deterministic_algorithms_enabled", &is_deterministic, doc::is_deterministic);
  m.def("promote_types", &promote_types, "a"_a, "b"_a, doc::promote_types);
}

}  // namespace ember::python

namespace nanobind::detail {

bool type_caster<ember::Dims>::from_python(handle src, uint32_t, cleanup_list*) noexcept {
  return ember::python::dims_from_sequence(src.ptr(), &value);
}

bool type_caster<ember::python::DimList>::from_python(handle src, uint32_t, cleanup_list*) noexcept {
  int64_t d;
  if (ember::python::index_from_object(src.ptr(), &d)) {
    value.dims = ember::Shape{d};
    return true;
  }
  return ember::python::dims_from_sequence(src.ptr(), &value.dims);
}

}  // namespace nanobind::detail
