// Front ends, shape checks and vjps of the joining and indexing primitives: cat, index_select /
// index_add, gather / scatter_add. Each pair is the other's backward.
#include "tensor/autocast.h"
#include "tensor/ops.h"
#include "tensor/primitives/index.h"

namespace ember {

namespace {

// Zeros of x's shape that index_select's and gather's vjps add their gradients into, in the
// gradient's opmath dtype: f32 for 16-bit ones, whose repeated indices would otherwise stop adding
// up once the 16-bit sum's spacing passes each term (2048 + 1 is 2048 in f16, 256 + 1 is 256 in bf16).
Tensor accumulator(const autograd::TensorMeta& x, DType dtype) {
  return zeros(x.shape, TensorOptions(dtype).with_device(x.device));
}

void check_index_dtype(const char* op, const Tensor& index) {
  if (index.dtype() != DType::i64 && index.dtype() != DType::i32)
    throw DTypeError(std::string(op) + ": index must be int64 or int32, got " + dtype_name(index.dtype()));
}

// index_select and index_add take one index per slice: a 1-D tensor (or a 0-dim one, as PyTorch allows).
void check_index_vector(const char* op, const Tensor& index) {
  check_index_dtype(op, index);
  if (index.dim() > 1)
    throw ShapeError(std::string(op) + ": index must be 1-D, got shape " + to_string(index.shape()));
}

void check_same_dtype(const char* op, const Tensor& self, const Tensor& src) {
  if (self.dtype() != src.dtype())
    throw DTypeError(std::string(op) + ": src is " + dtype_name(src.dtype()) + " but self is " +
                     dtype_name(self.dtype()) + "; they must match");
}

// The indexed ops address a dim of their input, so a 0-dim input has nothing to index.
int indexed_dim(const char* op, const Tensor& x, int64_t dim) {
  if (x.dim() == 0) throw ShapeError(std::string(op) + ": expects a tensor with at least one dim, got a 0-dim tensor");
  return wrap_dim(dim, x.dim(), op);
}

// A 0-dim operand of an indexing op is its one element as a 1-D tensor, along dim 0 or -1 (PyTorch
// lets a scalar be indexed so); the caller gives the result the 0-dim shape back.
Tensor as_vector(const char* op, const Tensor& t, int64_t dim) {
  if (dim != 0 && dim != -1)
    throw IndexError(std::string(op) + ": dim " + std::to_string(dim) + " is out of range for a 0-dim tensor (expected 0 or -1)");
  return reshape(t, {1});
}

// "(2, *, 3)": the shape every cat input must have, any size along dim.
std::string shape_except(const Shape& s, int dim) {
  std::string out = "(";
  for (int i = 0; i < s.size(); ++i) {
    if (i) out += ", ";
    out += i == dim ? "*" : std::to_string(s[i]);
  }
  return out + (s.size() == 1 ? ",)" : ")");
}

// Zero-pads t at the end of each dim up to `shape`: scatter_add's src may be larger than its index,
// and the elements the index never reaches get no gradient.
Tensor zero_pad_to(Tensor t, const Shape& shape) {
  for (int d = 0; d < shape.size(); ++d) {
    if (t.shape()[d] == shape[d]) continue;
    Shape pad = t.shape();
    pad[d] = shape[d] - t.shape()[d];
    t = cat({t, zeros(pad, TensorOptions(t.dtype()).with_device(t.device()))}, d);
  }
  return t;
}

}  // namespace

// ---- cat

std::vector<OutputSpec> Cat::infer(const std::vector<Tensor>& in) const {
  const Shape& first = in[0].shape();
  Shape out = first;
  for (size_t i = 1; i < in.size(); ++i) {
    const Shape& s = in[i].shape();
    bool fits = s.size() == first.size();
    for (int d = 0; fits && d < s.size(); ++d) fits = d == dim_ || s[d] == first[d];
    if (!fits)
      throw ShapeError("cat: tensor " + std::to_string(i) + " has shape " + to_string(s) + ", expected " +
                       shape_except(first, dim_) + " except along dim " + std::to_string(dim_));
    if (in[i].dtype() != in[0].dtype())
      throw DTypeError("cat: tensor " + std::to_string(i) + " is " + dtype_name(in[i].dtype()) + ", tensor 0 is " +
                       dtype_name(in[0].dtype()) + "; the cat primitive takes one dtype");
    out[dim_] += s[dim_];
  }
  return {{out, in[0].dtype()}};
}

std::vector<Tensor> Cat::vjp(const std::vector<Tensor>& g, const std::vector<Tensor>&, const std::vector<Tensor>&) {
  // Input i's gradient is its slice of g along dim.
  std::vector<Tensor> grads(next_edges().size());
  int64_t start = 0;
  for (size_t i = 0; i < grads.size(); ++i) {
    const int64_t length = input_meta(i).shape[dim_];
    if (input_needs_grad(i)) grads[i] = narrow(g[0], dim_, start, length);
    start += length;
  }
  return grads;
}

// Inputs of shape (0,) are skipped, PyTorch's legacy rule, so that a result can be grown from an
// empty tensor; they still take part in choosing the result dtype.
Tensor cat(const std::vector<Tensor>& tensors_in, int64_t dim) {
  const amp::OpArgList args = amp::autocast_args("cat", tensors_in);
  const std::vector<Tensor>& tensors = args.tensors();
  if (tensors.empty()) throw ValueError("cat: expects a non-empty list of tensors");
  DType dtype = tensors[0].dtype();
  std::vector<Tensor> parts;
  parts.reserve(tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    if (t.dim() == 0)
      throw ShapeError("cat: zero-dimensional tensor (at position " + std::to_string(i) + ") cannot be concatenated");
    dtype = promote_types(dtype, t.dtype());
    const bool legacy_empty = t.dim() == 1 && t.shape()[0] == 0;
    if (!legacy_empty) parts.push_back(t);
  }
  if (parts.empty()) return empty({0}, TensorOptions(dtype).with_device(tensors[0].device()));
  const int d = wrap_dim(dim, parts[0].dim(), "cat");
  for (Tensor& p : parts) p = p.to(dtype);
  return run1(Cat(d), parts);
}

// ---- index_select / index_add

std::vector<OutputSpec> IndexSelect::infer(const std::vector<Tensor>& in) const {
  check_index_vector(name(), in[1]);
  Shape s = in[0].shape();
  s[dim_] = in[1].numel();
  return {{s, in[0].dtype()}};
}

std::vector<Tensor> IndexSelect::vjp(const std::vector<Tensor>& g, const std::vector<Tensor>& in,
                                     const std::vector<Tensor>&) {
  // Each selected slice sends its gradient back to the slice it came from; repeats add up.
  const DType ct = opmath_dtype(g[0].dtype());
  return {index_add(accumulator(input_meta(0), ct), dim_, in[1], g[0].to(ct)), Tensor()};
}

Tensor index_select(const Tensor& x_in, int64_t dim, const Tensor& index_in) {
  const auto [x, index] = amp::autocast_args("index_select", x_in, index_in);
  if (x.dim() == 0) {  // a scalar: index holds one position, 0, and the result is the scalar
    check_index_vector("index_select", index);
    if (index.numel() != 1)
      throw ShapeError("index_select: a 0-dim input takes one index, got " + std::to_string(index.numel()));
    return reshape(index_select(as_vector("index_select", x, dim), 0, reshape(index, {1})), {});
  }
  return run1(IndexSelect(indexed_dim("index_select", x, dim)), {x, index});
}

std::vector<OutputSpec> IndexAdd::infer(const std::vector<Tensor>& in) const {
  const Tensor &self = in[0], &index = in[1], &src = in[2];
  check_index_vector(name(), index);
  check_same_dtype(name(), self, src);
  bool fits = src.dim() == self.dim();
  for (int d = 0; fits && d < self.dim(); ++d) fits = d == dim_ || src.shape()[d] == self.shape()[d];
  if (!fits)
    throw ShapeError("index_add: src has shape " + to_string(src.shape()) + ", expected " +
                     shape_except(self.shape(), dim_) + " like self " + to_string(self.shape()) +
                     " except along dim " + std::to_string(dim_));
  if (src.shape()[dim_] != index.numel())
    throw ShapeError("index_add: src has " + std::to_string(src.shape()[dim_]) + " slices along dim " +
                     std::to_string(dim_) + " but index has " + std::to_string(index.numel()) + " entries");
  return {{self.shape(), self.dtype()}};
}

std::vector<Tensor> IndexAdd::vjp(const std::vector<Tensor>& g, const std::vector<Tensor>& in,
                                  const std::vector<Tensor>&) {
  // out = self + (src's slices placed at index): self's gradient passes through, src's is read back.
  return {g[0], Tensor(), input_needs_grad(2) ? index_select(g[0], dim_, in[1]) : Tensor()};
}

Tensor index_add(const Tensor& self_in, int64_t dim, const Tensor& index_in, const Tensor& src_in) {
  const auto [self, index, src] = amp::autocast_args("index_add", self_in, index_in, src_in);
  return run1(IndexAdd(indexed_dim("index_add", self, dim)), {self, index, src});
}

// self + alpha * (src placed at index). 16-bit tensors scale and add in f32 and round once.
Tensor index_add(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src, Scalar alpha) {
  check_alpha("index_add", self.dtype(), alpha);
  if (alpha.to_double() == 1) return index_add(self, dim, index, src);
  const DType ct = opmath_dtype(self.dtype());
  return index_add(self.to(ct), dim, index, mul(src.to(ct), alpha)).to(self.dtype());
}

// ---- gather / scatter_add

std::vector<OutputSpec> Gather::infer(const std::vector<Tensor>& in) const {
  const Tensor &x = in[0], &index = in[1];
  check_index_dtype(name(), index);
  if (index.dim() != x.dim())
    throw ShapeError("gather: index has shape " + to_string(index.shape()) + " but input has " +
                     to_string(x.shape()) + "; their ranks must match");
  for (int d = 0; d < x.dim(); ++d)
    if (d != dim_ && index.shape()[d] > x.shape()[d])
      throw ShapeError("gather: index " + to_string(index.shape()) + " is larger than input " + to_string(x.shape()) +
                       " at dim " + std::to_string(d) + " (only dim " + std::to_string(dim_) + " may be larger)");
  return {{index.shape(), x.dtype()}};
}

std::vector<Tensor> Gather::vjp(const std::vector<Tensor>& g, const std::vector<Tensor>& in,
                                const std::vector<Tensor>&) {
  const DType ct = opmath_dtype(g[0].dtype());
  return {scatter_add(accumulator(input_meta(0), ct), dim_, in[1], g[0].to(ct)), Tensor()};
}

// uint8 positions (PyTorch's samples pass them) are widened to int64 here; the kernels take int64/int32.
Tensor gather(const Tensor& x_in, int64_t dim, const Tensor& index_in) {
  const auto [x, index_any] = amp::autocast_args("gather", x_in, index_in);
  const Tensor index = index_any.dtype() == DType::u8 ? index_any.to(DType::i64) : index_any;
  if (x.dim() == 0) {
    if (index.dim() != 0)
      throw ShapeError("gather: index has shape " + to_string(index.shape()) + " but input is 0-dim; their ranks must match");
    return reshape(gather(as_vector("gather", x, dim), 0, reshape(index, {1})), {});
  }
  return run1(Gather(indexed_dim("gather", x, dim)), {x, index});
}

std::vector<OutputSpec> ScatterAdd::infer(const std::vector<Tensor>& in) const {
  const Tensor &self = in[0], &index = in[1], &src = in[2];
  check_index_dtype(name(), index);
  check_same_dtype(name(), self, src);
  if (index.dim() != self.dim() || src.dim() != self.dim())
    throw ShapeError("scatter_add: self " + to_string(self.shape()) + ", index " + to_string(index.shape()) +
                     " and src " + to_string(src.shape()) + " must have the same rank");
  for (int d = 0; d < self.dim(); ++d) {
    if (index.shape()[d] > src.shape()[d])
      throw ShapeError("scatter_add: index " + to_string(index.shape()) + " is larger than src " +
                       to_string(src.shape()) + " at dim " + std::to_string(d));
    if (d != dim_ && index.shape()[d] > self.shape()[d])
      throw ShapeError("scatter_add: index " + to_string(index.shape()) + " is larger than self " +
                       to_string(self.shape()) + " at dim " + std::to_string(d) + " (only dim " +
                       std::to_string(dim_) + " may be larger)");
  }
  return {{self.shape(), self.dtype()}};
}

std::vector<Tensor> ScatterAdd::vjp(const std::vector<Tensor>& g, const std::vector<Tensor>& in,
                                    const std::vector<Tensor>&) {
  // Each src element went to one place of out: it reads its gradient back from there.
  Tensor src_grad;
  if (input_needs_grad(2)) src_grad = zero_pad_to(gather(g[0], dim_, in[1]), input_meta(2).shape);
  return {g[0], Tensor(), src_grad};
}

Tensor scatter_add(const Tensor& self_in, int64_t dim, const Tensor& index_in, const Tensor& src_in) {
  const auto [self, index, src] = amp::autocast_args("scatter_add", self_in, index_in, src_in);
  if (self.dim() == 0) {
    if (index.dim() != 0 || src.dim() != 0)
      throw ShapeError("scatter_add: self is 0-dim but index has shape " + to_string(index.shape()) + " and src " +
                       to_string(src.shape()) + "; their ranks must match");
    const Tensor one = as_vector("scatter_add", self, dim);
    return reshape(scatter_add(one, 0, reshape(index, {1}), reshape(src, {1})), {});
  }
  return run1(ScatterAdd(indexed_dim("scatter_add", self, dim)), {self, index, src});
}

}  // namespace ember
