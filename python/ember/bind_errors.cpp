// ember's C++ exceptions as Python exceptions. Each ember error class gets a Python class that derives
// from ember.Error (itself a RuntimeError, as PyTorch raises RuntimeError for most failures) and from the
// builtin a Python caller would catch for that kind of failure: ShapeError is a ValueError, DTypeError a
// TypeError, IndexError an IndexError (so iteration and `in` stop correctly), and so on.
#include "python/ember/bind.h"

#pragma GCC visibility push(default)
#include "data/data_file.h"
#include "dist/error.h"
#pragma GCC visibility pop

namespace ember::python {

namespace {

struct ErrorTypes {
  PyObject* error = nullptr;
  PyObject* shape = nullptr;
  PyObject* dtype = nullptr;
  PyObject* device = nullptr;
  PyObject* index = nullptr;
  PyObject* value = nullptr;
  PyObject* autograd = nullptr;
  PyObject* not_implemented = nullptr;
  PyObject* not_deterministic = nullptr;
  PyObject* state = nullptr;
  PyObject* undefined = nullptr;
  PyObject* capture = nullptr;
  PyObject* cuda = nullptr;
  PyObject* oom = nullptr;
  PyObject* io = nullptr;
  PyObject* format = nullptr;
  PyObject* data = nullptr;
  PyObject* distributed = nullptr;
  PyObject* collective_mismatch = nullptr;
};
ErrorTypes g_errors;  // borrowed: the module's attributes hold the classes

PyObject* make_error(nb::module_& m, const char* name, std::initializer_list<PyObject*> bases, const char* doc) {
  nb::tuple base_tuple = nb::steal<nb::tuple>(PyTuple_New(static_cast<Py_ssize_t>(bases.size())));
  Py_ssize_t i = 0;
  for (PyObject* b : bases) {
    Py_INCREF(b);
    PyTuple_SET_ITEM(base_tuple.ptr(), i++, b);
  }
  const std::string qualified = std::string("ember.") + name;
  PyObject* type = PyErr_NewExceptionWithDoc(qualified.c_str(), doc, base_tuple.ptr(), nullptr);
  if (!type) throw nb::python_error();
  m.attr(name) = nb::steal(type);
  return type;  // borrowed by the translator: the module holds the class
}

void raise(PyObject* type, const std::exception& e) { PyErr_SetString(type, e.what()); }

// Most derived first: a NotDeterministicError is also a NotImplementedError.
void translate(const std::exception_ptr& p, void*) {
  try {
    std::rethrow_exception(p);
  } catch (const ShapeError& e) {
    raise(g_errors.shape, e);
  } catch (const DTypeError& e) {
    raise(g_errors.dtype, e);
  } catch (const DeviceError& e) {
    raise(g_errors.device, e);
  } catch (const IndexError& e) {
    raise(g_errors.index, e);
  } catch (const ValueError& e) {
    raise(g_errors.value, e);
  } catch (const AutogradError& e) {
    raise(g_errors.autograd, e);
  } catch (const NotDeterministicError& e) {
    raise(g_errors.not_deterministic, e);
  } catch (const NotImplementedError& e) {
    raise(g_errors.not_implemented, e);
  } catch (const StateError& e) {
    raise(g_errors.state, e);
  } catch (const UndefinedTensorError& e) {
    raise(g_errors.undefined, e);
  } catch (const CaptureError& e) {
    raise(g_errors.capture, e);
  } catch (const CudaError& e) {
    raise(g_errors.cuda, e);
  } catch (const OutOfMemoryError& e) {
    raise(g_errors.oom, e);
  } catch (const IOError& e) {
    raise(g_errors.io, e);
  } catch (const FormatError& e) {
    raise(g_errors.format, e);
  } catch (const data::DataError& e) {
    raise(g_errors.data, e);
  } catch (const dist::CollectiveMismatchError& e) {
    raise(g_errors.collective_mismatch, e);
  } catch (const dist::DistributedError& e) {
    raise(g_errors.distributed, e);
  } catch (const Error& e) {
    // Kinds this module does not name: the common base keeps the message.
    raise(g_errors.error, e);
  }
  // Anything else is rethrown by the try above and handled by nanobind's own translators.
}

}  // namespace

void bind_errors(nb::module_& m) {
  ErrorTypes& t = g_errors;
  t.error = make_error(m, "Error", {PyExc_RuntimeError},
                       "Base of every error ember raises; the message says what was wrong, with the values.");
  t.shape = make_error(m, "ShapeError", {t.error, PyExc_ValueError}, "Incompatible or invalid shapes.");
  t.dtype = make_error(m, "DTypeError", {t.error, PyExc_TypeError}, doc::DTypeError);
  t.device = make_error(m, "DeviceError", {t.error}, "Mismatched, unknown or absent devices.");
  t.index = make_error(m, "IndexError", {t.error, PyExc_IndexError}, doc::IndexError);
  t.value = make_error(m, "ValueError", {t.error, PyExc_ValueError}, doc::ValueError);
  t.autograd = make_error(m, "AutogradError", {t.error}, "Misuse of the autograd graph, or a failed gradient check.");
  t.not_implemented = make_error(m, "NotImplementedError", {t.error, PyExc_NotImplementedError},
                                 doc::NotImplementedError);
  t.not_deterministic = make_error(m, "NotDeterministicError", {t.not_implemented},
                                   "An op without a deterministic implementation, asked for in deterministic mode.");
  t.state = make_error(m, "StateError", {t.error}, doc::StateError);
  t.undefined = make_error(m, "UndefinedTensorError", {t.error}, "A tensor read through an undefined handle.");
  t.capture = make_error(m, "CaptureError", {t.error}, doc::CaptureError);
  t.cuda = make_error(m, "CudaError", {t.error}, "A failed CUDA, cuBLAS, cuDNN or NCCL call.");
  t.oom = make_error(m, "OutOfMemoryError", {t.error}, "Memory exhausted on a device.");
  t.io = make_error(m, "IOError", {t.error, PyExc_OSError}, doc::IOError);
  t.format = make_error(m, "FormatError", {t.error, PyExc_ValueError}, doc::FormatError);
  t.data = make_error(m, "DataError", {t.error, PyExc_OSError}, doc::data_DataError);
  t.distributed = make_error(m, "DistributedError", {t.error},
                             "A failed or timed-out collective, store or peer (the message names the rank and operation).");
  t.collective_mismatch = make_error(m, "CollectiveMismatchError", {t.distributed},
                                     doc::dist_CollectiveMismatchError);
  nb::register_exception_translator(translate);
}

}  // namespace ember::python
