// ember.Tensor itself: the class (created once, with the buffer protocol slots of bind_interop.cpp), its
// metadata (shape, dtype, device, strides), host access (item, tolist, repr), conversions (to, cpu,
// cuda, float ...) and the Python protocols a number-like object has (len, bool, int, float, hash).
#include <cstring>

#include "python/ember/bind.h"

namespace ember::python {

namespace {

PyTypeObject* g_tensor_type = nullptr;  // borrowed: the module holds ember.Tensor

// Nested lists of a tensor's values, read once in row-major order.
template <class T>
nb::object nested_list(const std::vector<T>& values, const Shape& shape, int dim, size_t& pos) {
  if (dim == shape.size()) return nb::cast(values[pos++]);
  nb::list out;
  for (int64_t i = 0; i < shape[dim]; ++i) out.append(nested_list(values, shape, dim + 1, pos));
  return out;
}

template <class T>
nb::object to_list(const Tensor& t) {
  std::vector<T> values;
  {
    nb::gil_scoped_release release;  // a CUDA tensor waits for its device here
    values = t.to_vector<T>();
  }
  size_t pos = 0;
  return nested_list(values, t.shape(), 0, pos);
}

// The one element of a tensor as a Python number of its kind.
nb::object item(const Tensor& t) {
  if (t.dtype() == DType::boolean) return nb::bool_(t.item<bool>());
  if (is_floating(t.dtype())) return nb::float_(t.item<double>());
  return nb::int_(t.item<int64_t>());
}

// Python's repr: ember's printer, with the dtype spelled as the module attribute (dtype=ember.float64).
std::string tensor_repr(const Tensor& t) {
  std::string s = t.str();
  const std::string key = ", dtype=";
  const size_t at = s.rfind(key);
  if (at != std::string::npos) s.insert(at + key.size(), "ember.");
  return s;
}

// PyTorch's memory formats (torch.contiguous_format, torch.channels_last, torch.preserve_format): the
// layouts to(), contiguous() and is_contiguous() are asked for.
enum class MemoryFormat { contiguous_format, channels_last, preserve_format };

// PyTorch's test for channels-last: NHWC strides, size-1 dims' strides ignored (so a tensor may be
// contiguous both ways). ember's is_channels_last() answers which layout to compute in, and says no then.
bool strides_are_nhwc(const Tensor& t) {
  if (t.dim() != 4) return false;
  int64_t expected = 1;
  for (int d : {1, 3, 2, 0}) {
    if (t.size(d) == 1) continue;
    if (t.stride(d) != expected) return false;
    expected *= t.size(d);
  }
  return true;
}

// t laid out as `format` asks (itself when it already is).
Tensor in_format(const Tensor& t, MemoryFormat format, const char* op) {
  switch (format) {
    case MemoryFormat::preserve_format: return t;
    case MemoryFormat::contiguous_format: return t.contiguous();
    case MemoryFormat::channels_last:
      if (t.dim() != 4)
        throw ShapeError(std::string(op) + ": channels_last needs a 4-D tensor (N, C, H, W), got shape " + to_string(t.shape()));
      return strides_are_nhwc(t) ? t : to_channels_last(t);
  }
  return t;
}

// to(dtype) returns the tensor itself when nothing changes, as torch; copy=True forces a new tensor.
Tensor convert(const Tensor& t, std::optional<Device> device, std::optional<DType> dtype, bool non_blocking,
               bool copy, MemoryFormat format = MemoryFormat::preserve_format) {
  Tensor out = t;
  if (device && out.device() != *device) {
    nb::gil_scoped_release release;
    out = out.to(*device, non_blocking);
  }
  if (dtype) out = out.to(*dtype);
  out = in_format(out, format, "to");
  if (copy && out.is_same(t)) out = out.clone();
  return out;
}

void check_one_element(const Tensor& t, const char* what) {
  if (t.numel() != 1)
    throw ValueError(std::string(what) + ": only a one-element tensor has a single value; this one has shape " +
                     to_string(t.shape()));
}

}  // namespace

nb::class_<Tensor> tensor_class() { return nb::borrow<nb::class_<Tensor>>(reinterpret_cast<PyObject*>(g_tensor_type)); }
PyTypeObject* tensor_type() { return g_tensor_type; }
bool is_tensor(PyObject* o) { return g_tensor_type && PyObject_TypeCheck(o, g_tensor_type); }

nb::object tensor_or_none(const Tensor& t) { return t.defined() ? nb::cast(t) : nb::none(); }

void bind_tensor_class(nb::module_& m) {
  nb::class_<Tensor> cls(
      m, "Tensor", nb::type_slots(tensor_buffer_slots), nb::is_weak_referenceable(),
      "An n-dimensional array of one dtype on one device, with reverse-mode autograd.\n\n"
      "A Python Tensor is a handle: two Tensors may share the same elements (views, detach()).");
  g_tensor_type = reinterpret_cast<PyTypeObject*>(cls.ptr());
  nb::enum_<MemoryFormat>(m, "memory_format",
                          "A tensor's layout in memory, as torch.memory_format: ember.contiguous_format (row-major), "
                          "ember.channels_last (NHWC, for 4-D tensors) or ember.preserve_format (as it is).")
      .value("contiguous_format", MemoryFormat::contiguous_format, "Row-major: NCHW for images.")
      .value("channels_last", MemoryFormat::channels_last, "4-D (N, C, H, W) stored as NHWC.")
      .value("preserve_format", MemoryFormat::preserve_format, "As the tensor is (what to() keeps by default).")
      .export_values()
      .def("__repr__", [](nb::handle self) { return "ember." + nb::cast<std::string>(self.attr("name")); });
}

void bind_tensor_attributes(nb::module_&) {  // methods of Tensor only
  nb::class_<Tensor> c = tensor_class();
  c.def(
       "__init__",
       [](Tensor* self, std::optional<Tensor> data) {
         new (self) Tensor(data ? data->detach() : empty({0}));
       },
       "data"_a = nb::none(),
       "A tensor sharing `data`'s elements without its history (data.detach()); an empty float32 vector "
       "without data. Subclasses (nn.Parameter) build on this; use ember.tensor() to convert Python data.")
      .def_prop_ro("shape", [](const Tensor& t) { return make_size(t.shape()); }, doc::Tensor_shape)
      .def_prop_ro("dtype", &Tensor::dtype, doc::Tensor_dtype)
      .def_prop_ro("device", &Tensor::device, doc::Tensor_device)
      .def_prop_ro("ndim", &Tensor::dim, doc::Tensor_dim)
      .def_prop_ro("is_cuda", [](const Tensor& t) { return t.device().is_cuda(); }, "Whether the tensor is on a GPU.")
      .def_prop_ro("is_cpu", [](const Tensor& t) { return t.device().is_cpu(); }, "Whether the tensor is on the host.")
      .def("is_floating_point", &Tensor::is_floating_point, doc::Tensor_is_floating_point)
      .def("dim", &Tensor::dim, doc::Tensor_dim)
      .def("ndimension", &Tensor::dim, doc::Tensor_dim)
      .def("numel", &Tensor::numel, doc::Tensor_numel)
      .def("nelement", &Tensor::numel, doc::Tensor_numel)
      .def(
          "size",
          [](const Tensor& t, std::optional<int64_t> dim) -> nb::object {
            if (dim) return nb::int_(t.size(*dim));
            return make_size(t.shape());
          },
          "dim"_a = nb::none(), "The shape, or the size of one dim (negative dims count from the end).")
      .def(
          "stride",
          [](const Tensor& t, std::optional<int64_t> dim) -> nb::object {
            if (dim) return nb::int_(t.stride(*dim));
            return nb::tuple(make_size(t.strides()));
          },
          "dim"_a = nb::none(), "The strides in elements, or the stride of one dim.")
      .def("storage_offset", &Tensor::offset, doc::Tensor_offset)
      .def(
          "is_contiguous",
          [](const Tensor& t, MemoryFormat format) {
            if (format == MemoryFormat::preserve_format)
              throw ValueError("is_contiguous: memory_format must be contiguous_format or channels_last, got preserve_format");
            return format == MemoryFormat::channels_last ? strides_are_nhwc(t) : t.is_contiguous();
          },
          "memory_format"_a = MemoryFormat::contiguous_format, doc::Tensor_is_contiguous)  // NHWC for channels_last
      .def("element_size", [](const Tensor& t) { return dtype_size(t.dtype()); }, doc::dtype_size)
      .def_prop_ro("itemsize", [](const Tensor& t) { return dtype_size(t.dtype()); }, doc::dtype_size)
      .def_prop_ro("nbytes", [](const Tensor& t) { return t.numel() * dtype_size(t.dtype()); },
                   "Bytes the elements take (numel * itemsize).")
      .def("data_ptr", [](const Tensor& t) { return reinterpret_cast<uintptr_t>(t.raw_data()); },
           "The address of the first element (a device address for a CUDA tensor).")
      .def("item", &item, "The value of a one-element tensor as a Python number.")
      .def(
          "tolist",
          [](const Tensor& t) -> nb::object {
            if (t.dtype() == DType::boolean) return to_list<bool>(t);
            if (is_floating(t.dtype())) return to_list<double>(t);
            return to_list<int64_t>(t);
          },
          "The elements as (nested) Python lists of numbers; a number for a 0-dim tensor.")
      .def("__repr__", &tensor_repr)
      .def("__str__", &tensor_repr)
      .def(
          "to", [](const Tensor& t, DType dtype, bool non_blocking, bool copy, MemoryFormat format) {
            return convert(t, std::nullopt, dtype, non_blocking, copy, format);
          },
          "dtype"_a, "non_blocking"_a = false, "copy"_a = false, nb::kw_only(),
          "memory_format"_a = MemoryFormat::preserve_format,
          "The tensor converted to `dtype` (itself when it already has it, unless copy), laid out as memory_format asks.")
      .def(
          "to",
          [](const Tensor& t, std::optional<Device> device, std::optional<DType> dtype, bool non_blocking, bool copy,
             MemoryFormat format) { return convert(t, device, dtype, non_blocking, copy, format); },
          "device"_a = nb::none(), "dtype"_a = nb::none(), "non_blocking"_a = false, "copy"_a = false, nb::kw_only(),
          "memory_format"_a = MemoryFormat::preserve_format,
          "The tensor on `device` and of `dtype` (itself when nothing changes, unless copy), laid out as memory_format "
          "asks (ember.channels_last: NHWC).")
      .def(
          "to",
          [](const Tensor& t, const Tensor& other, bool non_blocking, bool copy, MemoryFormat format) {
            return convert(t, other.device(), other.dtype(), non_blocking, copy, format);
          },
          "other"_a, "non_blocking"_a = false, "copy"_a = false, nb::kw_only(),
          "memory_format"_a = MemoryFormat::preserve_format, "The tensor with other's device and dtype.")
      .def("cpu", [](const Tensor& t) { return convert(t, kCPU, std::nullopt, false, false); },
           "The tensor on the host (itself when already there).")
      .def(
          "cuda",
          [](const Tensor& t, std::optional<Device> device, bool non_blocking) {
            Device d = device.value_or(Device(DeviceType::cuda, 0));
            if (!d.is_cuda()) throw DeviceError("cuda(): " + d.str() + " is not a CUDA device");
            return convert(t, d, std::nullopt, non_blocking, false);
          },
          "device"_a = nb::none(), "non_blocking"_a = false, "The tensor on a GPU (cuda:0 by default).")
      .def("float", [](const Tensor& t) { return t.to(DType::f32); }, "The tensor as float32.")
      .def("double", [](const Tensor& t) { return t.to(DType::f64); }, "The tensor as float64.")
      .def("half", [](const Tensor& t) { return t.to(DType::f16); }, "The tensor as float16.")
      .def("bfloat16", [](const Tensor& t) { return t.to(DType::bf16); }, "The tensor as bfloat16.")
      .def("long", [](const Tensor& t) { return t.to(DType::i64); }, "The tensor as int64.")
      .def("int", [](const Tensor& t) { return t.to(DType::i32); }, "The tensor as int32.")
      .def("byte", [](const Tensor& t) { return t.to(DType::u8); }, "The tensor as uint8.")
      .def("bool", [](const Tensor& t) { return t.to(DType::boolean); }, "The tensor as bool.")
      .def("type_as", [](const Tensor& t, const Tensor& o) { return t.to(o.dtype()); }, "other"_a,
           "The tensor converted to other's dtype.")
      .def("detach", &Tensor::detach, doc::Tensor_detach)
      .def(
          "detach_",
          [](nb::handle self) {
            // No C++ detach_: the Python object takes a detached handle on the same elements.
            Tensor& t = nb::cast<Tensor&>(self);
            t = t.detach();
            return nb::borrow(self);
          },
          "Detaches this Python tensor in place (it gets a new handle without history).")
      .def("clone", [](const Tensor& t) { return t.clone(); }, doc::clone)
      .def(
          "contiguous",
          [](const Tensor& t, MemoryFormat format) {
            if (format == MemoryFormat::preserve_format)
              throw ValueError("contiguous: memory_format must be contiguous_format or channels_last, got preserve_format");
            return in_format(t, format, "contiguous");
          },
          "memory_format"_a = MemoryFormat::contiguous_format,
          "The tensor itself when laid out as memory_format asks (row-major by default, NHWC for ember.channels_last), "
          "else a dense copy.")
      .def("pin_memory", [](const Tensor& t) { return t.pin_memory(); }, doc::pin_memory)
      .def("is_pinned", &Tensor::is_pinned, "Whether the memory is page-locked.")
      .def("is_same", &Tensor::is_same, "other"_a, doc::Tensor_is_same)
      .def("__len__",
           [](const Tensor& t) {
             if (t.dim() == 0) throw nb::type_error("len() of a 0-d tensor");
             return t.size(0);
           })
      .def("__bool__",
           [](const Tensor& t) {
             check_one_element(t, "bool(tensor)");
             return t.item<bool>();
           })
      .def("__float__",
           [](const Tensor& t) {
             check_one_element(t, "float(tensor)");
             return t.item<double>();
           })
      .def("__int__",
           [](const Tensor& t) {
             check_one_element(t, "int(tensor)");
             return t.item<int64_t>();
           })
      .def("__index__",
           [](const Tensor& t) {
             if (is_floating(t.dtype()) || t.numel() != 1)
               throw nb::type_error("only integer tensors of a single element can be converted to an index");
             return t.item<int64_t>();
           })
      // Tensors compare elementwise (__eq__ returns a tensor), so hashing is by identity, as in torch.
      .def("__hash__", [](nb::handle self) { return reinterpret_cast<intptr_t>(self.ptr()) >> 4; })
      .def_prop_ro("_version", &Tensor::version, doc::Tensor_version)
      .def("_use_count", &Tensor::use_count, doc::Tensor_use_count);
}

}  // namespace ember::python
