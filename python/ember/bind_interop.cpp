// Zero-copy exchange with other array libraries.
//
// Out of ember: the buffer protocol and __array_interface__ (CPU tensors; NumPy sees the same memory)
// and DLPack (__dlpack__ / __dlpack_device__, CPU and CUDA). Each export keeps the tensor alive through
// the consumer's handle (the buffer's object, the capsule's manager context), and non-contiguous tensors
// export with their strides. Into ember: from_dlpack accepts any object with __dlpack__ or a capsule;
// the memory stays the producer's (a borrowed Storage) and is returned when no ember tensor uses it.
#include <nanobind/stl/pair.h>

#include <sys/mman.h>
#include <sys/stat.h>

#include <atomic>
#include <cerrno>
#include <cstring>

#include "python/ember/bind.h"
#include "python/ember/dlpack.h"

namespace ember::python {

namespace {

using namespace dlpack;

// Imported buffers not yet handed back: a test sees each returned as soon as its last view is gone.
std::atomic<int64_t> g_borrowed_buffers{0};

// ---- tensor -> consumers

const char* buffer_format(DType d) {
  switch (d) {
    case DType::f32: return "f";
    case DType::f64: return "d";
    case DType::f16: return "e";
    case DType::i32: return "i";
    case DType::i64: return "q";
    case DType::u8: return "B";
    case DType::boolean: return "?";
    case DType::bf16: return nullptr;  // the struct module has no bfloat16
  }
  return nullptr;
}

const char* typestr(DType d) {
  switch (d) {
    case DType::f32: return "<f4";
    case DType::f64: return "<f8";
    case DType::f16: return "<f2";
    case DType::i32: return "<i4";
    case DType::i64: return "<i8";
    case DType::u8: return "|u1";
    case DType::boolean: return "|b1";
    case DType::bf16: return nullptr;
  }
  return nullptr;
}

// Why a tensor cannot be exported to the host protocols, or null when it can.
std::string host_export_problem(const Tensor& t, const char* what) {
  if (!t.device().is_cpu())
    return std::string(what) + ": the tensor is on " + t.device().str() +
           "; NumPy reads host memory only: call .cpu() first, or exchange it through DLPack";
  if (t.dtype() == DType::bf16)
    return std::string(what) +
           ": NumPy has no bfloat16 dtype; convert with .float() first, or exchange the tensor through DLPack "
           "(which has kDLBfloat)";
  if (t.requires_grad())
    return std::string(what) +
           ": the tensor requires grad, and writes through NumPy would bypass autograd; export t.detach() instead";
  return "";
}

// What a Py_buffer of a tensor owns: the tensor (so the memory outlives a later change of the Python
// object's handle) and the shape and strides arrays the view points to.
struct BufferOwner {
  Tensor tensor;
  std::vector<Py_ssize_t> shape, strides;
};

int get_buffer(PyObject* exporter, Py_buffer* view, int flags) {
  try {
    const Tensor& t = nb::cast<const Tensor&>(nb::handle(exporter));
    const std::string problem = host_export_problem(t, "buffer protocol");
    if (!problem.empty()) {
      PyErr_SetString(PyExc_BufferError, problem.c_str());
      return -1;
    }
    const bool contiguous = t.is_contiguous();
    const bool wants_contiguous = (flags & PyBUF_C_CONTIGUOUS) == PyBUF_C_CONTIGUOUS ||
                                  (flags & PyBUF_ANY_CONTIGUOUS) == PyBUF_ANY_CONTIGUOUS ||
                                  (flags & PyBUF_STRIDES) != PyBUF_STRIDES;
    if (!contiguous && wants_contiguous) {
      PyErr_SetString(PyExc_BufferError, "the tensor is not contiguous; call .contiguous() first, or ask for strides");
      return -1;
    }
    if ((flags & PyBUF_F_CONTIGUOUS) == PyBUF_F_CONTIGUOUS && t.dim() > 1 && !(flags & PyBUF_ANY_CONTIGUOUS)) {
      PyErr_SetString(PyExc_BufferError, "ember tensors are row-major; a Fortran-contiguous buffer was asked for");
      return -1;
    }
    auto* owner = new BufferOwner{t, {}, {}};
    const int64_t item = dtype_size(t.dtype());
    for (int d = 0; d < t.dim(); ++d) {
      owner->shape.push_back(t.shape()[d]);
      owner->strides.push_back(t.strides()[d] * item);
    }
    view->obj = Py_NewRef(exporter);
    view->buf = t.numel() ? t.raw_data() : nullptr;
    view->len = t.numel() * item;
    view->readonly = 0;
    view->itemsize = item;
    view->format = (flags & PyBUF_FORMAT) ? const_cast<char*>(buffer_format(t.dtype())) : nullptr;
    view->ndim = t.dim();
    view->shape = (flags & PyBUF_ND) == PyBUF_ND ? owner->shape.data() : nullptr;
    view->strides = (flags & PyBUF_STRIDES) == PyBUF_STRIDES ? owner->strides.data() : nullptr;
    view->suboffsets = nullptr;
    view->internal = owner;
    return 0;
  } catch (const std::exception& e) {
    PyErr_SetString(PyExc_BufferError, e.what());
    return -1;
  }
}

void release_buffer(PyObject*, Py_buffer* view) { delete static_cast<BufferOwner*>(view->internal); }

nb::dict array_interface(const Tensor& t) {
  const std::string problem = host_export_problem(t, "__array_interface__");
  if (!problem.empty()) throw nb::type_error(problem.c_str());
  const int64_t item = dtype_size(t.dtype());
  nb::list shape, strides;
  for (int d = 0; d < t.dim(); ++d) {
    shape.append(t.shape()[d]);
    strides.append(t.strides()[d] * item);
  }
  nb::dict d;
  d["shape"] = nb::tuple(shape);
  d["typestr"] = typestr(t.dtype());
  d["data"] = nb::make_tuple(reinterpret_cast<uintptr_t>(t.numel() ? t.raw_data() : nullptr), false);
  d["strides"] = t.is_contiguous() ? nb::object(nb::none()) : nb::object(nb::tuple(strides));
  d["version"] = 3;
  return d;
}

DLDataType dl_dtype(DType d) {
  switch (d) {
    case DType::f32: return {kDLFloat, 32, 1};
    case DType::f64: return {kDLFloat, 64, 1};
    case DType::f16: return {kDLFloat, 16, 1};
    case DType::bf16: return {kDLBfloat, 16, 1};
    case DType::i32: return {kDLInt, 32, 1};
    case DType::i64: return {kDLInt, 64, 1};
    case DType::u8: return {kDLUInt, 8, 1};
    case DType::boolean: return {kDLBool, 8, 1};
  }
  return {kDLFloat, 32, 1};
}

DLDevice dl_device(Device d) { return d.is_cpu() ? DLDevice{kDLCPU, 0} : DLDevice{kDLCUDA, d.index}; }

// What an exported capsule owns: the tensor and the shape and strides arrays of its DLTensor.
struct ExportContext {
  Tensor tensor;
  std::vector<int64_t> shape, strides;
  DLManagedTensor legacy{};
  DLManagedTensorVersioned versioned{};
};

void delete_legacy(DLManagedTensor* m) { delete static_cast<ExportContext*>(m->manager_ctx); }
void delete_versioned(DLManagedTensorVersioned* m) { delete static_cast<ExportContext*>(m->manager_ctx); }

// A capsule nobody consumed still owns its tensor (the DLPack rule for capsule destructors). It may be
// dropped with an exception pending (a consumer that refused it, as NumPy refuses bfloat16): that
// exception stays as it was.
void capsule_destructor(PyObject* capsule) {
  PyObject *type = nullptr, *value = nullptr, *traceback = nullptr;
  PyErr_Fetch(&type, &value, &traceback);
  if (PyCapsule_IsValid(capsule, "dltensor")) {
    auto* m = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(capsule, "dltensor"));
    if (m && m->deleter) m->deleter(m);
  } else if (PyCapsule_IsValid(capsule, "dltensor_versioned")) {
    auto* m = static_cast<DLManagedTensorVersioned*>(PyCapsule_GetPointer(capsule, "dltensor_versioned"));
    if (m && m->deleter) m->deleter(m);
  }
  PyErr_Restore(type, value, traceback);  // a consumed capsule has another name: nothing else to do
}

nb::object to_capsule(const Tensor& t, bool versioned) {
  auto* ctx = new ExportContext{t.detach(), {}, {}, {}, {}};
  for (int d = 0; d < t.dim(); ++d) {
    ctx->shape.push_back(t.shape()[d]);
    ctx->strides.push_back(t.strides()[d]);
  }
  DLTensor dl{};
  dl.data = t.numel() ? t.raw_data() : nullptr;
  dl.device = dl_device(t.device());
  dl.ndim = t.dim();
  dl.dtype = dl_dtype(t.dtype());
  dl.shape = ctx->shape.data();
  dl.strides = ctx->strides.data();
  dl.byte_offset = 0;
  PyObject* capsule;
  if (versioned) {
    ctx->versioned = DLManagedTensorVersioned{{kMajorVersion, kMinorVersion}, ctx, &delete_versioned, 0, dl};
    capsule = PyCapsule_New(&ctx->versioned, "dltensor_versioned", &capsule_destructor);
  } else {
    ctx->legacy = DLManagedTensor{dl, ctx, &delete_legacy};
    capsule = PyCapsule_New(&ctx->legacy, "dltensor", &capsule_destructor);
  }
  if (!capsule) {
    delete ctx;
    throw nb::python_error();
  }
  return nb::steal(capsule);
}

// t.__dlpack__(stream=None, max_version=None, dl_device=None, copy=None) of the array API standard.
nb::object dlpack_export(const Tensor& self, nb::handle stream, std::optional<std::pair<int, int>> max_version,
                         std::optional<std::pair<int, int>> dl_device, std::optional<bool> copy) {
  if (self.requires_grad())
    throw AutogradError("__dlpack__: the tensor requires grad; export t.detach() (the consumer sees no history)");
  Tensor t = self;
  if (dl_device) {
    const Device want = dl_device->first == kDLCPU ? kCPU
                        : dl_device->first == kDLCUDA ? Device(ember::DeviceType::cuda, dl_device->second)
                                                      : throw nb::buffer_error("__dlpack__: unsupported dl_device");
    if (want != t.device()) {
      if (copy && !*copy) throw nb::buffer_error("__dlpack__: another device asked for with copy=False");
      nb::gil_scoped_release release;
      t = t.to(want);
    }
  }
  if (copy && *copy && t.is_same(self)) t = t.clone();
  if (t.device().is_cuda() && !(nb::isinstance<nb::int_>(stream) && nb::cast<int64_t>(stream) == -1)) {
    // The consumer will read on its own stream: the work queued on ember's stream must be done first.
    // (A host wait: ember has no public handle to make a foreign stream wait on an event.)
    nb::gil_scoped_release release;
    cuda::Event done;
    done.record(t.device().index);
    done.synchronize();
  }
  const bool versioned = max_version && max_version->first >= 1;
  return to_capsule(t, versioned);
}

// ---- producers -> ember

Device device_of(const DLDevice& d) {
  switch (d.device_type) {
    case kDLCPU:
    case kDLCUDAHost: return kCPU;
    case kDLCUDA:
    case kDLCUDAManaged: return Device(ember::DeviceType::cuda, d.device_id);
    default:
      throw DeviceError("from_dlpack: DLPack device type " + std::to_string(d.device_type) +
                        " is not one ember supports (CPU, CUDA)");
  }
}

DType dtype_of(const DLDataType& t) {
  if (t.lanes != 1) throw DTypeError("from_dlpack: vector dtypes (lanes " + std::to_string(t.lanes) + ") are not supported");
  if (t.code == kDLFloat && t.bits == 32) return DType::f32;
  if (t.code == kDLFloat && t.bits == 64) return DType::f64;
  if (t.code == kDLFloat && t.bits == 16) return DType::f16;
  if (t.code == kDLBfloat && t.bits == 16) return DType::bf16;
  if (t.code == kDLInt && t.bits == 32) return DType::i32;
  if (t.code == kDLInt && t.bits == 64) return DType::i64;
  if (t.code == kDLUInt && t.bits == 8) return DType::u8;
  if (t.code == kDLBool && t.bits == 8) return DType::boolean;
  throw DTypeError("from_dlpack: ember has no dtype for DLPack type code " + std::to_string(t.code) + " with " +
                   std::to_string(t.bits) + " bits");
}

// The tensor a DLTensor describes, its checks first: `release` (which returns the producer's memory)
// moves into the tensor's storage only once nothing is left to refuse.
Tensor view_of(const DLTensor& dl, std::function<void()>& release) {
  const Device device = device_of(dl.device);
  const DType dtype = dtype_of(dl.dtype);
  const int64_t item = dtype_size(dtype);
  if (dl.ndim < 0 || dl.ndim > kMaxDims)
    throw ShapeError("from_dlpack: " + std::to_string(dl.ndim) + " dims (ember supports up to " + std::to_string(kMaxDims) + ")");
  if (dl.ndim > 0 && !dl.shape) throw ValueError("from_dlpack: the DLTensor has " + std::to_string(dl.ndim) + " dims but no shape");
  Shape shape;
  for (int d = 0; d < dl.ndim; ++d) {
    if (dl.shape[d] < 0) throw ShapeError("from_dlpack: dim " + std::to_string(d) + " has size " + std::to_string(dl.shape[d]));
    shape.push_back(dl.shape[d]);
  }
  int64_t elements = 1;
  for (const int64_t n : shape)
    if (__builtin_mul_overflow(elements, n, &elements))
      throw ShapeError("from_dlpack: shape " + to_string(shape) + " has more elements than an int64 counts");
  const Strides strides = dl.strides ? Strides(std::span<const int64_t>(dl.strides, dl.ndim)) : contiguous_strides(shape);
  // The span of memory the view reaches, from its first element, in elements and then bytes.
  int64_t extent = elements == 0 ? 0 : 1, extent_bytes = 0;
  for (int d = 0; d < dl.ndim && extent; ++d) {
    if (strides[d] < 0) throw ValueError("from_dlpack: negative strides are not supported");
    int64_t reach = 0;
    if (__builtin_mul_overflow(shape[d] - 1, strides[d], &reach) || __builtin_add_overflow(extent, reach, &extent))
      throw ShapeError("from_dlpack: shape " + to_string(shape) + " with strides " + to_string(strides) +
                       " reaches past what an int64 counts");
  }
  if (__builtin_mul_overflow(extent, item, &extent_bytes))
    throw ShapeError("from_dlpack: shape " + to_string(shape) + " spans more bytes than an int64 counts");
  if (extent_bytes > 0 && !dl.data)
    throw ValueError("from_dlpack: the DLTensor has " + std::to_string(elements) + " elements but a null data pointer");
  if (dl.byte_offset % item)
    throw ValueError("from_dlpack: a byte offset of " + std::to_string(dl.byte_offset) + " is not a whole number of " +
                     dtype_name(dtype) + " elements");
  char* first = static_cast<char*>(dl.data) + dl.byte_offset;
  ++g_borrowed_buffers;
  auto give_back = [release = std::exchange(release, nullptr)] {
    --g_borrowed_buffers;
    if (release) release();
  };
  auto storage = make_intrusive<Storage>(first, static_cast<size_t>(extent_bytes), device, std::move(give_back));
  return Tensor(make_intrusive<TensorImpl>(std::move(storage), 0, shape, strides, dtype));
}

// Builds the tensor a DLTensor describes. A refused one returns the producer's memory at once: the
// capsule, renamed "used_*" already, would never call the deleter.
Tensor import_dltensor(const DLTensor& dl, std::function<void()> release) {
  try {
    return view_of(dl, release);
  } catch (...) {
    if (release) release();
    throw;
  }
}

// Consumes a DLPack capsule (renaming it "used_*" as the protocol says) into a tensor.
Tensor from_capsule(nb::handle capsule) {
  PyObject* c = capsule.ptr();
  if (PyCapsule_IsValid(c, "dltensor_versioned")) {
    auto* m = static_cast<DLManagedTensorVersioned*>(PyCapsule_GetPointer(c, "dltensor_versioned"));
    if (m->version.major > kMajorVersion)
      throw nb::buffer_error(("from_dlpack: DLPack version " + std::to_string(m->version.major) + "." +
                              std::to_string(m->version.minor) + " is newer than ember's (1.0)")
                                 .c_str());
    if (PyCapsule_SetName(c, "used_dltensor_versioned") != 0) throw nb::python_error();
    if (m->deleter == &delete_versioned) {  // one of ours: the same storage, no registry
      const Tensor src = static_cast<ExportContext*>(m->manager_ctx)->tensor;
      m->deleter(m);
      return src.detach();
    }
    const bool read_only = m->flags & kFlagReadOnly;
    Tensor t = import_dltensor(m->dl_tensor, [m] {
      nb::gil_scoped_acquire gil;  // producers' deleters may touch Python objects
      if (gil.is_valid() && m->deleter) m->deleter(m);
    });
    // ember has no read-only tensors: memory the producer marked read-only is copied instead of shared.
    return read_only ? t.clone() : t;
  }
  if (PyCapsule_IsValid(c, "dltensor")) {
    auto* m = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(c, "dltensor"));
    if (PyCapsule_SetName(c, "used_dltensor") != 0) throw nb::python_error();
    if (m->deleter == &delete_legacy) {
      const Tensor src = static_cast<ExportContext*>(m->manager_ctx)->tensor;
      m->deleter(m);
      return src.detach();
    }
    return import_dltensor(m->dl_tensor, [m] {
      nb::gil_scoped_acquire gil;
      if (gil.is_valid() && m->deleter) m->deleter(m);
    });
  }
  throw nb::type_error("from_dlpack: expected an object with __dlpack__ or a DLPack capsule ('dltensor'); "
                       "this capsule was consumed already or is of another kind");
}

Tensor from_dlpack(nb::handle obj, std::optional<Device> device, std::optional<bool> copy) {
  Tensor t;
  if (is_tensor(obj.ptr())) {
    t = nb::cast<const Tensor&>(obj).detach();
  } else if (PyCapsule_CheckExact(obj.ptr())) {
    t = from_capsule(obj);
  } else if (nb::hasattr(obj, "__dlpack__")) {
    // CUDA producers order their work before the stream we name: ember computes on the legacy default
    // stream unless a user stream is current (then synchronize that stream first).
    nb::object stream = nb::none();
    if (nb::hasattr(obj, "__dlpack_device__")) {
      nb::tuple dev = nb::cast<nb::tuple>(obj.attr("__dlpack_device__")());
      const int type = nb::cast<int>(dev[0]);
      if (type == kDLCUDA || type == kDLCUDAManaged) stream = nb::int_(1);
    }
    nb::object capsule;
    try {
      capsule = obj.attr("__dlpack__")("stream"_a = stream, "max_version"_a = nb::make_tuple(kMajorVersion, kMinorVersion));
    } catch (nb::python_error& e) {
      if (!e.matches(PyExc_TypeError)) throw;  // an older producer without max_version
      capsule = stream.is_none() ? obj.attr("__dlpack__")() : obj.attr("__dlpack__")("stream"_a = stream);
    }
    t = from_capsule(capsule);
  } else {
    throw nb::type_error(("from_dlpack: " + std::string(Py_TYPE(obj.ptr())->tp_name) +
                          " has no __dlpack__ and is not a DLPack capsule")
                             .c_str());
  }
  if (device && *device != t.device()) {
    if (copy && !*copy) throw nb::buffer_error("from_dlpack: another device asked for with copy=False");
    nb::gil_scoped_release release;
    t = t.to(*device);
  } else if (copy && *copy) {
    t = t.clone();
  }
  return t;
}

// torch.frombuffer: a 1-D tensor over the bytes of any object with the buffer protocol (bytearray,
// mmap, array.array, NumPy). The object is kept alive through its buffer until no tensor uses the
// memory. ember has no read-only tensors: read-only memory (bytes) is copied, as from_dlpack does.
Tensor frombuffer(nb::handle buffer, DType dtype, int64_t count, int64_t offset, bool requires_grad) {
  if (!PyObject_CheckBuffer(buffer.ptr()))
    throw nb::type_error(("frombuffer: " + std::string(Py_TYPE(buffer.ptr())->tp_name) +
                          " does not support the buffer protocol").c_str());
  auto* view = new Py_buffer{};
  bool read_only = false;
  if (PyObject_GetBuffer(buffer.ptr(), view, PyBUF_WRITABLE) != 0) {
    PyErr_Clear();
    read_only = true;
    if (PyObject_GetBuffer(buffer.ptr(), view, PyBUF_SIMPLE) != 0) {
      delete view;
      throw nb::python_error();
    }
  }
  auto release = [view] {
    nb::gil_scoped_acquire gil;  // the last tensor may go on a thread Python did not create
    if (gil.is_valid()) PyBuffer_Release(view);
    delete view;
  };
  const int64_t length = view->len, item = dtype_size(dtype);
  std::string problem;
  if (offset < 0 || (offset > 0 && offset >= length))
    problem = "offset " + std::to_string(offset) + " is outside the buffer's " + std::to_string(length) + " bytes";
  else if (count == 0 || count < -1)
    problem = "count must be positive or -1 (all the elements after offset), got " + std::to_string(count);
  else if (count == -1 && (length - offset) % item != 0)
    problem = "the buffer's " + std::to_string(length - offset) + " bytes after offset " + std::to_string(offset) +
              " are not a whole number of " + dtype_name(dtype) + " elements (" + std::to_string(item) + " bytes)";
  else if (count == -1 && length - offset == 0)
    problem = "the buffer has no bytes after offset " + std::to_string(offset);
  else if (count > 0 && count > (length - offset) / item)
    problem = std::to_string(count) + " " + dtype_name(dtype) + " elements of " + std::to_string(item) +
              " bytes do not fit in the buffer's " + std::to_string(length - offset) + " bytes after offset " +
              std::to_string(offset);
  else if (reinterpret_cast<uintptr_t>(static_cast<char*>(view->buf) + offset) % item != 0)
    problem = "offset " + std::to_string(offset) + " leaves the data misaligned for " + dtype_name(dtype) +
              " elements (" + std::to_string(item) + "-byte alignment)";
  if (!problem.empty()) {
    release();
    throw ValueError("frombuffer: " + problem);
  }
  const int64_t n = count == -1 ? (length - offset) / item : count;
  if (dtype == DType::boolean) {  // ember's kernels read a bool's byte as its value: only 0 and 1 are bools
    const auto* bytes = static_cast<const unsigned char*>(view->buf) + offset;
    for (int64_t i = 0; i < n; ++i)
      if (bytes[i] > 1) {
        const std::string value = std::to_string(bytes[i]);
        release();
        throw ValueError("frombuffer: byte " + std::to_string(offset + i) + " is " + value + ", not a bool (0 or 1)");
      }
  }
  DLTensor dl{};
  dl.data = static_cast<char*>(view->buf) + offset;
  dl.device = DLDevice{kDLCPU, 0};
  dl.ndim = 1;
  dl.dtype = dl_dtype(dtype);
  dl.shape = const_cast<int64_t*>(&n);
  Tensor t = import_dltensor(dl, release);
  if (read_only) t = t.clone();
  if (requires_grad) t.requires_grad_(true);
  return t;
}

// ---- shared-memory files

// A file mapped into this process (the DataLoader's workers pass batches in shared-memory files): its
// bytes as a writable buffer for frombuffer, unmapped when the last tensor over it is gone. Python's
// mmap would also do, but it keeps a duplicate of the file's descriptor open for its whole life: one
// descriptor per batch alive, where a training loop that keeps its batches runs out of them.
struct MappedFile {
  void* data = nullptr;
  size_t size = 0;
  MappedFile(int fd, int64_t bytes) : size(static_cast<size_t>(bytes)) {
    if (bytes <= 0) throw ValueError("_MappedFile: a size of " + std::to_string(bytes) + " bytes; expected a positive one");
    // Pages past the file's end would raise SIGBUS on first touch: refuse them here.
    struct stat file_status {};
    if (fstat(fd, &file_status) != 0) {
      const int error = errno;
      PyErr_Format(PyExc_OSError, "_MappedFile: descriptor %d: %s", fd, std::strerror(error));
      throw nb::python_error();
    }
    if (file_status.st_size < bytes)
      throw ValueError("_MappedFile: descriptor " + std::to_string(fd) + " holds " + std::to_string(file_status.st_size) +
                       " bytes, fewer than the " + std::to_string(bytes) + " to map");
    data = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (data == MAP_FAILED) {
      const int error = errno;
      PyErr_Format(PyExc_OSError, "_MappedFile: mapping %lld bytes of descriptor %d failed: %s",
                   static_cast<long long>(bytes), fd, std::strerror(error));
      throw nb::python_error();
    }
  }
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile() { munmap(data, size); }
};

int mapped_file_get_buffer(PyObject* self, Py_buffer* view, int flags) {
  const MappedFile& file = nb::cast<const MappedFile&>(nb::handle(self));
  return PyBuffer_FillInfo(view, self, file.data, static_cast<Py_ssize_t>(file.size), 0, flags);
}

PyType_Slot mapped_file_slots[] = {
    {Py_bf_getbuffer, reinterpret_cast<void*>(&mapped_file_get_buffer)},
    {0, nullptr},
};

}  // namespace

PyType_Slot tensor_buffer_slots[] = {
    {Py_bf_getbuffer, reinterpret_cast<void*>(&get_buffer)},
    {Py_bf_releasebuffer, reinterpret_cast<void*>(&release_buffer)},
    {0, nullptr},
};

void bind_interop(nb::module_& m) {
  tensor_class()
      .def_prop_ro("__array_interface__", &array_interface,
                   "NumPy's array interface over this CPU tensor's memory (TypeError for bfloat16, CUDA or a "
                   "tensor that requires grad).")
      // stream may come positionally, as consumers written against the first DLPack Python API pass it.
      .def("__dlpack__", &dlpack_export, "stream"_a = nb::none(), nb::kw_only(), "max_version"_a = nb::none(),
           "dl_device"_a = nb::none(), "copy"_a = nb::none(),
           "A DLPack capsule over this tensor's memory (versioned when the consumer's max_version allows). A CUDA "
           "tensor's pending work is finished first unless stream is -1.")
      .def("__dlpack_device__",
           [](const Tensor& t) {
             const DLDevice d = dl_device(t.device());
             return nb::make_tuple(d.device_type, d.device_id);
           },
           "(device type, device id) as DLPack numbers them: (1, 0) for the CPU, (2, n) for cuda:n.");
  m.def("from_dlpack", &from_dlpack, "ext_tensor"_a, nb::kw_only(), "device"_a = nb::none(), "copy"_a = nb::none(),
        "A tensor sharing the memory of any object with __dlpack__ (NumPy, CuPy, PyTorch, JAX) or of a DLPack "
        "capsule. The producer's memory is returned once no ember tensor uses it. Read-only memory is copied.");
  m.def("frombuffer", &frombuffer, "buffer"_a, nb::kw_only(), "dtype"_a, "count"_a = -1, "offset"_a = 0,
        "requires_grad"_a = false,
        "A 1-D CPU tensor over the bytes of an object with the buffer protocol (bytearray, mmap, array.array, "
        "NumPy), from byte offset on: count elements, or all that follow. The memory is shared and the object "
        "kept alive while a tensor uses it; read-only buffers (bytes) are copied, as ember has no read-only "
        "tensors. ValueError when the bytes do not hold the elements or the offset misaligns them.");
  nb::class_<MappedFile>(m, "_MappedFile", nb::type_slots(mapped_file_slots), nb::is_weak_referenceable(),
                         "A file mapped into memory (read and write, shared), as a buffer; unmapped when unused.")
      .def(nb::init<int, int64_t>(), "fd"_a, "size"_a,
           "Maps the first size bytes of the open file fd (which may be closed afterwards).");
  m.def("to_dlpack", [](const Tensor& t) { return to_capsule(t.detach(), false); }, "tensor"_a,
        "A legacy DLPack capsule ('dltensor') over the tensor's memory.");
  m.def("_foreign_memory_count", [] { return g_borrowed_buffers.load(); },
        "How many imported buffers ember still holds (tests).");
}

}  // namespace ember::python
