// t[index] and t[index] = value with NumPy's rules: ints, slices (positive steps), None, Ellipsis,
// integer tensors or lists (advanced indexing, broadcast together) and bool masks.
//
// Basic indexing makes views (select, slice, unsqueeze), so t[1:, 0] = v writes into t. ember has no
// index_put or nonzero, so advanced indexing is built from what it has: the indexed dims are moved
// next to each other and merged, the index tensors become one linear index into the merged dim, and
// index_select reads it (differentiable); a mask becomes integer indices on the host. Assignment
// through advanced indices writes with masked_fill_ / copy_ of a where(), so it stays one in-place
// write into the original tensor.
#include <algorithm>
#include <cstring>

#include "python/ember/bind.h"

namespace ember::python {

namespace {

// One advanced index: where it applies in the partly indexed tensor, and the (int64) positions.
struct Advanced {
  int dim;
  Tensor index;
};

struct Indexed {
  Tensor view;                    // the tensor after the basic (view) items
  std::vector<Advanced> advanced;  // the integer-array items, in order
};

// The index items: a tuple is a list of items; anything else one item. A list is one advanced index,
// not a tuple of items (NumPy's current rule).
std::vector<nb::handle> items_of(nb::handle index, nb::object& keep) {
  std::vector<nb::handle> items;
  if (PyTuple_Check(index.ptr())) {
    keep = nb::borrow(index);
    for (nb::handle h : nb::borrow<nb::tuple>(index)) items.push_back(h);
  } else {
    items.push_back(index);
  }
  return items;
}

// An index item as a tensor (lists, NumPy arrays), or an empty handle when it is not array-like.
std::optional<Tensor> as_index_tensor(nb::handle item, Device device) {
  PyObject* o = item.ptr();
  if (is_tensor(o)) return nb::cast<Tensor>(item);
  if (PyList_Check(o) || (PyTuple_Check(o)) || (PyObject_CheckBuffer(o) && !PyBytes_Check(o)))
    return tensor_from(item, std::nullopt, device, false);
  return std::nullopt;
}

void check_index_dtype(const Tensor& t) {
  const DType d = t.dtype();
  if (d != DType::i64 && d != DType::i32 && d != DType::u8 && d != DType::boolean)
    throw IndexError(std::string("tensors used as indices must be int64, int32, uint8 or bool tensors, got ") +
                     dtype_name(d));
}

// An int index (Python ints, NumPy integer scalars); nothing for tensors and arrays, whose __index__
// works for one element only: they index as arrays.
std::optional<int64_t> as_int(PyObject* o) {
  if (is_tensor(o) || !PyIndex_Check(o) || std::strcmp(Py_TYPE(o)->tp_name, "numpy.ndarray") == 0) return std::nullopt;
  nb::object i = nb::steal(PyNumber_Index(o));
  if (!i.is_valid()) {
    PyErr_Clear();
    return std::nullopt;
  }
  const long long v = PyLong_AsLongLong(i.ptr());
  if (v == -1 && PyErr_Occurred()) throw nb::python_error();
  return v;
}

// How many dims of the indexed tensor an item consumes; `array` is the item as a tensor when it is
// array-like (a tensor, a list, a NumPy array).
int consumed(nb::handle item, const std::optional<Tensor>& array) {
  PyObject* o = item.ptr();
  if (o == Py_None || o == Py_Ellipsis || PyBool_Check(o)) return 0;
  if (array) {  // a mask consumes one dim per mask dim (none for a 0-dim one)
    const DType d = array->dtype();
    return (d == DType::boolean || d == DType::u8) ? array->dim() : 1;
  }
  return 1;  // an int or a slice
}

// The positions where a mask is true, one int64 tensor per mask dim (NumPy's nonzero), computed on the host.
std::vector<Tensor> mask_to_indices(const Tensor& mask_in, const Tensor& x, int dim) {
  const Tensor mask = mask_in.dtype() == DType::boolean ? mask_in : ne(mask_in, 0);
  const int k = mask.dim();
  for (int i = 0; i < k; ++i)
    if (dim + i >= x.dim() || mask.shape()[i] != x.shape()[dim + i])
      throw IndexError("the shape of the mask " + to_string(mask.shape()) + " at index " + std::to_string(dim) +
                       " does not match the shape of the indexed tensor " + to_string(x.shape()));
  const std::vector<bool> values = mask.to_vector<bool>();
  std::vector<std::vector<int64_t>> coords(k);
  const Strides strides = contiguous_strides(mask.shape());
  for (size_t flat = 0; flat < values.size(); ++flat) {
    if (!values[flat]) continue;
    int64_t rest = static_cast<int64_t>(flat);
    for (int i = 0; i < k; ++i) {
      coords[i].push_back(rest / strides[i]);
      rest %= strides[i];
    }
  }
  std::vector<Tensor> out;
  for (int i = 0; i < k; ++i) {
    const int64_t n = static_cast<int64_t>(coords[i].size());
    out.push_back(from_vector(coords[i], {n}, TensorOptions(DType::i64).with_device(x.device())));
  }
  return out;
}

[[noreturn]] void out_of_bounds(int64_t index, int dim, int64_t size) {
  throw IndexError("index " + std::to_string(index) + " is out of bounds for dimension " + std::to_string(dim) +
                   " with size " + std::to_string(size));
}

// Applies the basic items (views) and collects the advanced ones.
Indexed apply_basic(const Tensor& self, nb::handle index) {
  nb::object keep;
  const std::vector<nb::handle> items = items_of(index, keep);
  // Array-like items become tensors once, before their dims are counted.
  std::vector<std::optional<Tensor>> arrays(items.size());
  int specified = 0, ellipses = 0;
  for (size_t i = 0; i < items.size(); ++i) {
    PyObject* o = items[i].ptr();
    if (o != Py_None && o != Py_Ellipsis && !PyBool_Check(o) && !PySlice_Check(o) && !as_int(o))
      arrays[i] = as_index_tensor(items[i], self.device());
    specified += consumed(items[i], arrays[i]);
    if (o == Py_Ellipsis) ++ellipses;
  }
  if (ellipses > 1) throw IndexError("an index can only have a single ellipsis ('...')");
  if (specified > self.dim())
    throw IndexError("too many indices for tensor of dimension " + std::to_string(self.dim()) + " (got " +
                     std::to_string(specified) + ")");

  Indexed r{self, {}};
  int dim = 0;     // where the item applies in the view made so far
  int source = 0;  // which dim of self it indexes (an int removes its dim from the view): for messages
  for (size_t item = 0; item < items.size(); ++item) {
    const nb::handle it = items[item];
    PyObject* o = it.ptr();
    Tensor& v = r.view;
    const int at_source = source;
    source += o == Py_Ellipsis ? self.dim() - specified : consumed(it, arrays[item]);
    if (o == Py_None) {
      v = v.unsqueeze(dim++);
    } else if (o == Py_Ellipsis) {
      dim += self.dim() - specified;
    } else if (PyBool_Check(o)) {
      // x[True] adds a dim of size 1, x[False] one of size 0 (NumPy).
      v = v.unsqueeze(dim);
      if (o == Py_False) v = v.narrow(dim, 0, 0);
      ++dim;
    } else if (PySlice_Check(o)) {
      Py_ssize_t start, stop, step;
      if (PySlice_Unpack(o, &start, &stop, &step) < 0) throw nb::python_error();
      if (step <= 0) throw ValueError("slice step must be positive, got " + std::to_string(step));
      const int64_t size = v.size(dim);
      PySlice_AdjustIndices(size, &start, &stop, step);
      if (!(start == 0 && stop == size && step == 1)) v = v.slice(dim, start, std::max(start, stop), step);
      ++dim;
    } else if (std::optional<int64_t> i_opt = as_int(o)) {
      const int64_t i = *i_opt;
      const int64_t size = v.size(dim);
      if (i < -size || i >= size) out_of_bounds(i, at_source, size);
      v = v.select(dim, i);
    } else if (const std::optional<Tensor>& t = arrays[item]) {
      check_index_dtype(*t);
      if (t->dtype() == DType::boolean || t->dtype() == DType::u8) {
        if (t->dim() == 0) {  // a 0-dim mask acts like x[True] / x[False]
          v = v.unsqueeze(dim);
          if (!t->item<bool>()) v = v.narrow(dim, 0, 0);
          ++dim;
          continue;
        }
        for (Tensor& idx : mask_to_indices(*t, v, dim)) r.advanced.push_back({dim++, idx});
      } else if (t->dim() == 0 && t->device().is_cpu()) {
        // A 0-dim integer tensor selects, as an int does (torch keeps it a view too).
        const int64_t i = t->item<int64_t>();
        const int64_t size = v.size(dim);
        if (i < -size || i >= size) out_of_bounds(i, at_source, size);
        v = v.select(dim, i);
      } else {
        r.advanced.push_back({dim++, t->to(DType::i64)});
      }
    } else {
      throw IndexError(std::string("only integers, slices, ellipsis ('...'), None, and integer or bool tensors are "
                                   "valid indices, got ") +
                       Py_TYPE(o)->tp_name);
    }
  }
  return r;
}

// The advanced part, prepared: the view with the indexed dims moved together at `at`, their sizes,
// the broadcast index shape and the linear index into those dims merged (int64, broadcast shape).
struct Prepared {
  Tensor moved;      // view with the indexed dims at [at, at + k)
  int at = 0;
  Shape indexed;     // the sizes of those dims
  Shape broadcast;   // the shape the index tensors broadcast to
  Tensor linear;     // sum_j idx_j * prod(indexed[j+1:]), in range [0, prod(indexed))
};

Prepared prepare(const Indexed& r) {
  Prepared p;
  const std::vector<Advanced>& adv = r.advanced;
  const int k = static_cast<int>(adv.size());
  bool adjacent = true;
  for (int j = 1; j < k; ++j) adjacent = adjacent && adv[j].dim == adv[j - 1].dim + 1;
  // NumPy: adjacent advanced indices keep their place; separated ones go first.
  p.at = adjacent ? adv[0].dim : 0;
  if (adjacent) {
    p.moved = r.view;
  } else {
    Shape order;
    for (const Advanced& a : adv) order.push_back(a.dim);
    for (int d = 0; d < r.view.dim(); ++d)
      if (std::none_of(adv.begin(), adv.end(), [d](const Advanced& a) { return a.dim == d; })) order.push_back(d);
    p.moved = r.view.permute(order);
  }
  for (int j = 0; j < k; ++j) {
    p.indexed.push_back(p.moved.size(p.at + j));
    p.broadcast = j == 0 ? adv[0].index.shape() : broadcast_shapes(p.broadcast, adv[j].index.shape(), "indexing");
  }
  NoGradGuard no_grad;  // index arithmetic never needs a gradient
  for (int j = 0; j < k; ++j) {
    const int64_t size = p.indexed[j];
    Tensor idx = adv[j].index;
    if (idx.numel() > 0) {
      // Bounds first: a wrapped negative or a linear sum could hide an index out of range.
      const Tensor bad = add(lt(idx, -size).to(DType::i64), ge(idx, size).to(DType::i64));
      if (sum(bad).item<int64_t>() > 0) {
        const std::vector<int64_t> values = idx.to_vector<int64_t>();
        for (int64_t v : values)
          if (v < -size || v >= size) out_of_bounds(v, adv[j].dim, size);
      }
      idx = where(lt(idx, 0), add(idx, size), idx);
    }
    idx = idx.broadcast_to(p.broadcast);
    p.linear = j == 0 ? idx : add(mul(p.linear, size), idx);
  }
  return p;
}

Tensor getitem(const Tensor& self, nb::handle index) {
  Indexed r = apply_basic(self, index);
  if (r.advanced.empty()) return r.view;
  const Prepared p = prepare(r);
  const int k = static_cast<int>(r.advanced.size());
  // Merge the indexed dims (a view when their strides allow, else a copy: reading needs no view).
  Shape merged_shape, out_shape;
  for (int d = 0; d < p.at; ++d) merged_shape.push_back(p.moved.size(d)), out_shape.push_back(p.moved.size(d));
  merged_shape.push_back(numel(p.indexed));
  for (int64_t b : p.broadcast) out_shape.push_back(b);
  for (int d = p.at + k; d < p.moved.dim(); ++d) merged_shape.push_back(p.moved.size(d)), out_shape.push_back(p.moved.size(d));
  const Tensor merged = p.moved.reshape(merged_shape);
  const Tensor picked = index_select(merged, p.at, p.linear.reshape({-1}));
  return picked.reshape(out_shape);
}

// The value to assign as a tensor on self's device (numbers stay numbers: masked_fill_ / fill_ take them).
Operand value_of(nb::handle value, const Tensor& self) {
  Operand v;
  if (is_tensor(value.ptr())) {
    v.tensor = nb::cast<Tensor>(value);
  } else if (!scalar_from_object(value.ptr(), true, &v.scalar)) {
    v.tensor = tensor_from(value, self.dtype(), self.device(), false);
  }
  return v;
}

void setitem(const Tensor& self, nb::handle index, nb::handle value_obj) {
  const Operand value = value_of(value_obj, self);
  Indexed r = apply_basic(self, index);
  if (r.advanced.empty()) {
    // A view of self: writing it writes self.
    if (value.tensor) r.view.copy_(*value.tensor);
    else r.view.fill_(value.scalar);
    return;
  }
  const Prepared p = prepare(r);
  const int k = static_cast<int>(r.advanced.size());
  const int64_t positions = numel(p.indexed);
  // Where the index points, deduplicated on the host (the last write wins, as NumPy).
  const std::vector<int64_t> linear = p.linear.contiguous().to_vector<int64_t>();
  std::vector<int64_t> last_source(positions, -1);
  for (size_t i = 0; i < linear.size(); ++i) last_source[linear[i]] = static_cast<int64_t>(i);
  std::vector<bool> hit(positions, false);
  std::vector<int64_t> targets, sources;
  for (int64_t pos = 0; pos < positions; ++pos)
    if (last_source[pos] >= 0) {
      hit[pos] = true;
      targets.push_back(pos);
      sources.push_back(last_source[pos]);
    }
  const TensorOptions on_device = TensorOptions(DType::boolean).with_device(self.device());
  // The mask over the indexed dims, with size-1 dims around it so that it broadcasts over moved.
  Shape mask_shape;
  for (int d = 0; d < p.moved.dim(); ++d)
    mask_shape.push_back(d >= p.at && d < p.at + k ? p.indexed[d - p.at] : 1);
  const Tensor mask = from_vector(hit, mask_shape, on_device);
  if (!value.tensor) {
    p.moved.masked_fill_(mask, value.scalar);
    return;
  }
  // Tensor values: spread them to their targets in a dense tensor of moved's layout, then write
  // where(mask, spread, moved) into moved in place.
  Shape pre, post, result_shape;
  for (int d = 0; d < p.at; ++d) pre.push_back(p.moved.size(d));
  for (int d = p.at + k; d < p.moved.dim(); ++d) post.push_back(p.moved.size(d));
  for (int64_t s : pre) result_shape.push_back(s);
  for (int64_t s : p.broadcast) result_shape.push_back(s);
  for (int64_t s : post) result_shape.push_back(s);
  Shape flat_values = pre, merged = pre;
  flat_values.push_back(numel(p.broadcast));
  merged.push_back(positions);
  for (int64_t s : post) flat_values.push_back(s), merged.push_back(s);
  // Bool has no arithmetic for index_add: spread it as uint8.
  const DType work = self.dtype() == DType::boolean ? DType::u8 : self.dtype();
  const Tensor values = value.tensor->to(self.device()).to(work).broadcast_to(result_shape).reshape(flat_values);
  const int64_t n = static_cast<int64_t>(targets.size());
  const Tensor target_index = from_vector(targets, {n}, TensorOptions(DType::i64).with_device(self.device()));
  const Tensor source_index = from_vector(sources, {n}, TensorOptions(DType::i64).with_device(self.device()));
  const Tensor spread = index_add(zeros(merged, TensorOptions(work).with_device(self.device())), p.at, target_index,
                                  index_select(values, p.at, source_index));
  p.moved.copy_(where(mask, spread.reshape(p.moved.shape()).to(self.dtype()), p.moved));
}

}  // namespace

// torch.nonzero: the (n, x.dim()) int64 positions of x's nonzero elements in row-major order, or with
// as_tuple one 1-D tensor per dim (what x[x != 0] indexes with). Found on the host, as masks are.
nb::object nonzero(const Tensor& x, bool as_tuple) {
  if (x.dim() == 0) {  // as PyTorch: (1, 0) or (0, 0) positions; as_tuple as if of shape (1,)
    if (as_tuple) return nonzero(x.reshape({1}), true);
    const int64_t n = ne(x, 0).item<bool>() ? 1 : 0;
    return nb::cast(zeros({n, 0}, TensorOptions(DType::i64).with_device(x.device())));
  }
  std::vector<Tensor> per_dim = mask_to_indices(x, x, 0);
  if (as_tuple) {
    nb::list out;
    for (const Tensor& t : per_dim) out.append(nb::cast(t));
    return nb::tuple(out);
  }
  for (Tensor& t : per_dim) t = t.unsqueeze(1);
  return nb::cast(cat(per_dim, 1));
}

// torch.masked_select: the elements of x where the bool mask is true, x and mask broadcast together,
// as a 1-D tensor (differentiable in x, through the same gather as x[mask]).
Tensor masked_select(const Tensor& x, const Tensor& mask) {
  if (mask.dtype() != DType::boolean)
    throw DTypeError(std::string("masked_select: the mask must be a bool tensor, got ") + dtype_name(mask.dtype()));
  const Shape shape = broadcast_shapes(x.shape(), mask.shape(), "masked_select");
  const Tensor xb = broadcast_to(x, shape), mb = broadcast_to(mask, shape);
  return getitem(xb, nb::cast(mb));
}

void bind_index(nb::module_& m) {
  m.def("nonzero", &nonzero, "input"_a, nb::kw_only(), "as_tuple"_a = false,
        "The positions of the nonzero elements: an (n, input.dim()) int64 tensor in row-major order, or "
        "with as_tuple one 1-D tensor per dim (torch.nonzero). Computed on the host.");
  m.def("masked_select", &masked_select, "input"_a, "mask"_a,
        "The elements of input where the bool mask is true (both broadcast), as a 1-D tensor.");
  tensor_class()
      .def("nonzero", &nonzero, nb::kw_only(), "as_tuple"_a = false,
           "The positions of this tensor's nonzero elements (see ember.nonzero).")
      .def("masked_select", &masked_select, "mask"_a, "The elements where the bool mask is true, as a 1-D tensor.")
      .def("__getitem__", &getitem, "index"_a.none(),  // x[None] adds a dim
           "Indexing as NumPy: ints, slices, None, ..., integer tensors or lists, bool masks. Basic indexing "
           "returns views.")
      .def("__setitem__", &setitem, "index"_a.none(), "value"_a.none(),
           "Writes value (a number, tensor or nested list, broadcast) into the indexed elements of this tensor.");
}

}  // namespace ember::python
