// Shared pieces of the ember._ember extension: the type casters that let bound functions take
// Python numbers, dtypes, shapes and dim lists as typed C++ arguments, the GIL-safe reference that
// C++ callbacks (hooks, custom backward) keep to Python objects, and the entry points of each
// bind_*.cpp file, which NB_MODULE in _core.cpp calls in order.
#pragma once

#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "python/ember/docstrings.h"  // doc::<name>: the header comment of ember::<name>, made by tools/docstrings.py
#include "python/ember/ember_headers.h"

namespace nb = nanobind;

namespace ember::python {

using namespace nb::literals;

// ---- registry of Python objects the casters hand out (filled by bind_dtype.cpp)

/// The ember.dtype object of each DType: one per dtype, so `t.dtype is ember.float32` holds.
PyObject* dtype_object(DType d);
/// The DType an ember.dtype object stands for; false when `o` is not one.
bool dtype_from_object(PyObject* o, DType* out);
/// ember.Size(shape): the tuple subclass .shape returns.
nb::object make_size(const Shape& s);

/// A parsed `dim=` argument: one dim or several.
struct DimList {
  Shape dims;
};

/// A tensor or a number (where, clamp, masked_fill take either).
struct Operand {
  std::optional<Tensor> tensor;
  Scalar scalar = 0;
  /// The tensor, or the number as a wrapped 0-dim tensor on `device` (lowest rank in type promotion).
  Tensor as_tensor(Device device) const { return tensor ? *tensor : wrapped_scalar(scalar, device); }
};

/// An owning reference to a Python object that may be released on a thread without the GIL (the
/// autograd engine drops hooks and custom backwards with it released) or after the interpreter
/// finished: the last copy takes the GIL to decrement, and leaks quietly at shutdown.
class PyRef {
 public:
  PyRef() = default;
  explicit PyRef(nb::handle h);
  PyObject* get() const { return obj_.get(); }
  nb::handle handle() const { return nb::handle(obj_.get()); }

 private:
  std::shared_ptr<PyObject> obj_;
};

/// The Python object of a tensor handle, or None for an undefined tensor (an absent .grad).
nb::object tensor_or_none(const Tensor& t);
/// The device of a `device=` argument: None means the CPU.
inline Device device_or_cpu(const std::optional<Device>& d) { return d ? *d : kCPU; }
/// Factory options from the keyword arguments every factory takes.
TensorOptions make_options(std::optional<DType> dtype, const std::optional<Device>& device, bool requires_grad,
                           DType fallback = kDefaultFloat);
/// A shape given as varargs (zeros(2, 3)) or as one sequence (zeros((2, 3))).
Shape shape_from_args(const nb::args& args, const char* fn);
/// A number as an ember::Scalar (bool, int, float, or anything with __index__ / __float__ that is not a
/// tensor); false when `o` is none of these.
bool scalar_from_object(PyObject* o, bool convert, Scalar* out);
/// ember.tensor(data, ...): a new tensor holding a copy of Python data (bind_factory.cpp).
Tensor tensor_from(nb::handle data, std::optional<DType> dtype, std::optional<Device> device, bool requires_grad);
/// The Python type of ember.Tensor (set once bind_tensor registered it).
PyTypeObject* tensor_type();
/// Whether `o` is an ember.Tensor (or a subclass).
bool is_tensor(PyObject* o);
/// One tensor or a sequence of them as a list (None entries as undefined tensors when allow_none);
/// TypeError naming `what` otherwise (bind_autograd.cpp).
std::vector<Tensor> tensor_list(nb::handle h, const char* what, bool allow_none);
/// A Python function of tensors as a C++ one (gradcheck's function, a checkpointed region): called
/// with the GIL, its result (a Tensor or a sequence of them) checked under the name `what`.
std::function<std::vector<Tensor>(const std::vector<Tensor>&)> tensor_function(nb::handle fn, std::string what);

// ---- the parts of the module, in the order _core.cpp calls them
void bind_errors(nb::module_& m);
void bind_dtype(nb::module_& m);
void bind_tensor_class(nb::module_& m);  // creates ember.Tensor: every later part adds to it
void bind_tensor_attributes(nb::module_& m);
void bind_ops(nb::module_& m);
void bind_composed_ops(nb::module_& m);  // flip, roll, tril, triu, meshgrid: PyTorch ops composed of ember's
void bind_factory(nb::module_& m);
void bind_index(nb::module_& m);
void bind_interop(nb::module_& m);
void bind_cuda(nb::module_& m);         // devices, memory figures, streams, events, the CUDA switches
void bind_autograd(nb::module_& m);
void bind_nn(nb::module_& m);          // C++ modules, the Python-module bridge, nn.init, checkpointing
void bind_functional(nb::module_& m);  // ember.nn.functional's C++ half
void bind_optim(nb::module_& m);       // optimizers, schedulers, clipping, autocast, GradScaler
void bind_precision(nb::module_& m);   // the training precision modes (fp32 ... naive_fp16, pure_bf16)
void bind_compiled_step(nb::module_& m);  // whole-step capture (ember.compile_step)
void bind_io(nb::module_& m);          // safetensors files and training checkpoints
void bind_data(nb::module_& m);        // built-in data sets and the C++ DataLoader
void bind_dist(nb::module_& m);        // process groups, DDP, ZeRO

/// The class object of ember.Tensor (the module owns it), for the parts that add methods to it.
nb::class_<Tensor> tensor_class();

/// Buffer protocol slots of ember.Tensor (bind_interop.cpp), given to the class when it is created.
extern PyType_Slot tensor_buffer_slots[];

/// Registers f as the method `name` of Tensor and as the module function ember.`name`(input, ...):
/// `extra` names the parameters after the tensor.
template <class F, class... Extra>
void def_both(nb::module_& m, const char* name, F&& f, const Extra&... extra) {
  tensor_class().def(name, f, extra...);
  m.def(name, std::forward<F>(f), "input"_a, extra...);
}

}  // namespace ember::python

// ---- type casters
namespace nanobind::detail {

// ember.dtype <-> DType. Also accepts the Python types float, int and bool (as torch does) and the
// dtype names as strings ("float32").
template <>
struct type_caster<ember::DType> {
  NB_TYPE_CASTER(ember::DType, const_name("ember.dtype"))
  bool from_python(handle src, uint32_t, cleanup_list*) noexcept {
    return ember::python::dtype_from_object(src.ptr(), &value);
  }
  static handle from_cpp(ember::DType d, rv_policy, cleanup_list*) noexcept {
    PyObject* o = ember::python::dtype_object(d);
    Py_XINCREF(o);
    return o;
  }
};

// Python numbers -> Scalar (bool first: it is an int subclass). Tensors never convert, so overloads
// taking a Tensor and a Scalar resolve by the argument's type.
template <>
struct type_caster<ember::Scalar> {
  NB_TYPE_CASTER(ember::Scalar, const_name("int | float | bool"))
  type_caster() : value(0) {}
  bool from_python(handle src, uint32_t flags, cleanup_list*) noexcept {
    return ember::python::scalar_from_object(src.ptr(), (flags & (uint32_t)cast_flags::convert) != 0, &value);
  }
  static handle from_cpp(const ember::Scalar& s, rv_policy, cleanup_list*) noexcept {
    if (s.is_floating()) return PyFloat_FromDouble(s.to_double());
    if (s.is_bool()) return PyBool_FromLong(s.to_int());
    return PyLong_FromLongLong(s.to_int());
  }
};

// Sequences of ints <-> Shape (and Strides). Returned shapes become ember.Size.
template <>
struct type_caster<ember::Dims> {
  NB_TYPE_CASTER(ember::Dims, const_name("collections.abc.Sequence[int]"))
  bool from_python(handle src, uint32_t flags, cleanup_list*) noexcept;
  static handle from_cpp(const ember::Dims& d, rv_policy, cleanup_list*) noexcept {
    try {
      return ember::python::make_size(d).release();
    } catch (...) {
      return handle();
    }
  }
};

// A `dim=` argument: an int or a sequence of ints.
template <>
struct type_caster<ember::python::DimList> {
  NB_TYPE_CASTER(ember::python::DimList, const_name("int | collections.abc.Sequence[int]"))
  bool from_python(handle src, uint32_t flags, cleanup_list* cleanup) noexcept;
  static handle from_cpp(const ember::python::DimList& d, rv_policy p, cleanup_list* c) noexcept {
    return type_caster<ember::Dims>::from_cpp(d.dims, p, c);
  }
};

// A tensor or a number.
template <>
struct type_caster<ember::python::Operand> {
  NB_TYPE_CASTER(ember::python::Operand, const_name("ember.Tensor | int | float | bool"))
  bool from_python(handle src, uint32_t flags, cleanup_list*) noexcept {
    if (ember::python::is_tensor(src.ptr())) {
      value.tensor = nanobind::cast<ember::Tensor>(src);
      return true;
    }
    return ember::python::scalar_from_object(src.ptr(), (flags & (uint32_t)cast_flags::convert) != 0, &value.scalar);
  }
  static handle from_cpp(const ember::python::Operand& o, rv_policy p, cleanup_list* c) noexcept {
    if (o.tensor) return nanobind::cast(*o.tensor).release();
    return type_caster<ember::Scalar>::from_cpp(o.scalar, p, c);
  }
};

}  // namespace nanobind::detail
