// Views (shared storage, no copy) and the shape ops composed from them.
#include <algorithm>
#include <numeric>
#include <optional>
#include <vector>

#include "tensor/autocast.h"
#include "tensor/ops.h"
#include "tensor/primitives/index.h"
#include "tensor/primitives/view.h"

namespace ember {

namespace {

// Refuses a shape a view would take whose elements, counting a zero size as 1 (strides still
// multiply the other sizes), overflow int64: its indexing would wrap. Sizes are non-negative here.
void check_span(const Shape& shape, const char* op) {
  int64_t span = 1;
  for (int64_t s : shape)
    if (__builtin_mul_overflow(span, std::max<int64_t>(s, 1), &span))
      throw ShapeError(std::string(op) + ": shape " + to_string(shape) + " spans more than 2^63 - 1 elements");
}

// Replaces a single -1 in `shape` by the size that keeps numel; checks the total.
Shape infer_size(const Shape& shape, int64_t total, const char* op) {
  Shape out = shape;
  int infer = -1;
  for (int i = 0; i < out.size(); ++i) {
    if (out[i] == -1) {
      if (infer >= 0) throw ShapeError(std::string(op) + ": only one dimension can be -1, got " + to_string(shape));
      infer = i;
    } else if (out[i] < 0) {
      throw ShapeError(std::string(op) + ": invalid size " + std::to_string(out[i]) + " in shape " + to_string(shape));
    }
  }
  if (infer >= 0) out[infer] = 1;
  check_span(out, op);
  const int64_t known = numel(out);
  if (infer >= 0) {
    if (known == 0)
      throw ShapeError(std::string(op) + ": shape " + to_string(shape) + " has a 0 beside the -1, which any size " +
                       "would then fit (input of size " + std::to_string(total) + ")");
    if (total % known == 0) out[infer] = total / known;
  }
  if (numel(out) != total)
    throw ShapeError(std::string(op) + ": shape " + to_string(shape) + " is invalid for input of size " +
                     std::to_string(total));
  return out;
}

// Strides that read a tensor of (shape, strides) as `target` without copying, if they exist.
// Dims are grouped into runs that are contiguous among themselves; each run of the old shape
// must map onto whole dims of the new one (the rule behind PyTorch's view).
std::optional<Strides> view_strides(const Shape& shape, const Strides& strides, const Shape& target) {
  if (shape.empty() || numel(shape) == 0) return contiguous_strides(target);
  Strides out = Dims::filled(target.size(), 1);
  int view_d = target.size() - 1;
  int64_t chunk_stride = strides.back(), tensor_numel = 1, view_numel = 1;
  for (int d = shape.size() - 1; d >= 0; --d) {
    tensor_numel *= shape[d];
    const bool chunk_ends = d == 0 || (shape[d - 1] != 1 && strides[d - 1] != tensor_numel * chunk_stride);
    if (!chunk_ends) continue;
    while (view_d >= 0 && (view_numel < tensor_numel || target[view_d] == 1)) {
      out[view_d] = view_numel * chunk_stride;
      view_numel *= target[view_d];
      --view_d;
    }
    if (view_numel != tensor_numel) return std::nullopt;
    if (d > 0) {
      chunk_stride = strides[d - 1];
      tensor_numel = 1;
      view_numel = 1;
    }
  }
  if (view_d != -1) return std::nullopt;
  return out;
}

Tensor alias(const Tensor& x, const Shape& shape, const Strides& strides, int64_t offset) {
  return Tensor(make_intrusive<TensorImpl>(x.storage(), offset, shape, strides, x.dtype()));
}

}  // namespace

// ---- view primitives

Tensor Reshape::make_view(const Tensor& x) const {
  auto st = view_strides(x.shape(), x.strides(), shape_);
  if (!st)
    throw ShapeError("view: shape " + to_string(shape_) + " is not compatible with the input's shape " +
                     to_string(x.shape()) + " and strides " + to_string(x.strides()) + "; use reshape()");
  return alias(x, shape_, *st, x.offset());
}
std::vector<Tensor> Reshape::vjp(const std::vector<Tensor>& g, const std::vector<Tensor>&, const std::vector<Tensor>&) {
  return {reshape(g[0], input_meta(0).shape)};
}

Tensor Permute::make_view(const Tensor& x) const {
  Shape s;
  Strides st;
  for (int64_t d : dims_) {
    s.push_back(x.shape()[d]);
    st.push_back(x.strides()[d]);
  }
  return alias(x, s, st, x.offset());
}
std::vector<Tensor> Permute::vjp(const std::vector<Tensor>& g, const std::vector<Tensor>&, const std::vector<Tensor>&) {
  Shape inverse = Dims::filled(dims_.size(), 0);
  for (int i = 0; i < dims_.size(); ++i) inverse[dims_[i]] = i;
  return {permute(g[0], inverse)};
}

Tensor Slice::make_view(const Tensor& x) const {
  Shape s = x.shape();
  Strides st = x.strides();
  s[dim_] = length_;
  // One element or none: the stride is never used, and a huge step would overflow it.
  if (length_ > 1) st[dim_] *= step_;
  return alias(x, s, st, x.offset() + start_ * x.strides()[dim_]);
}
std::vector<Tensor> Slice::vjp(const std::vector<Tensor>& g, const std::vector<Tensor>&, const std::vector<Tensor>&) {
  // Scatter the gradient back into a zero tensor of the input's shape.
  const auto& m = input_meta(0);
  // The positions start + i * step for i < length; the end bound stays in range at any step.
  const Tensor index = length_ == 0 ? zeros({0}, TensorOptions(DType::i64).with_device(m.device))
                                    : arange(start_, start_ + (length_ - 1) * step_ + 1, step_, DType::i64, m.device);
  return {index_add(zeros(m.shape, TensorOptions(g[0].dtype()).with_device(m.device)), dim_, index, g[0])};
}

Tensor Expand::make_view(const Tensor& x) const {
  return alias(x, shape_, broadcast_strides(x.shape(), x.strides(), shape_), x.offset());
}
std::vector<Tensor> Expand::vjp(const std::vector<Tensor>& g, const std::vector<Tensor>&, const std::vector<Tensor>&) {
  return {sum_to(g[0], input_meta(0).shape)};
}

// ---- front ends

Tensor view(const Tensor& x, const Shape& shape) {
  const Shape s = infer_size(shape, x.numel(), "view");
  return run_view(Reshape(s), x);
}

Tensor reshape(const Tensor& x, const Shape& shape) {
  const Shape s = infer_size(shape, x.numel(), "reshape");
  if (s == x.shape()) return x;
  if (view_strides(x.shape(), x.strides(), s)) return run_view(Reshape(s), x);
  return run_view(Reshape(s), x.contiguous());
}

Tensor permute(const Tensor& x, const Shape& dims) {
  if (dims.size() != x.dim())
    throw ShapeError("permute: " + std::to_string(dims.size()) + " dims given for a tensor of shape " +
                     to_string(x.shape()));
  Shape wrapped;
  std::vector<bool> seen(x.dim(), false);
  for (int64_t d : dims) {
    const int w = wrap_dim(d, x.dim(), "permute");
    if (seen[w]) throw ShapeError("permute: dim " + std::to_string(d) + " repeated in " + to_string(dims));
    seen[w] = true;
    wrapped.push_back(w);
  }
  return run_view(Permute(wrapped), x);
}

Tensor transpose(const Tensor& x, int64_t dim0, int64_t dim1) {
  if (x.dim() == 0) return x;
  Shape dims;
  for (int i = 0; i < x.dim(); ++i) dims.push_back(i);
  std::swap(dims[wrap_dim(dim0, x.dim(), "transpose")], dims[wrap_dim(dim1, x.dim(), "transpose")]);
  return run_view(Permute(dims), x);
}

Tensor slice(const Tensor& x, int64_t dim, int64_t start, int64_t end, int64_t step) {
  if (x.dim() == 0) throw ShapeError("slice: cannot slice a 0-dim tensor");
  const int d = wrap_dim(dim, x.dim(), "slice");
  if (step <= 0) throw ValueError("slice: step must be positive, got " + std::to_string(step));
  const int64_t size = x.shape()[d];
  auto clip = [size](int64_t i) { return std::clamp<int64_t>(i < 0 ? i + size : i, 0, size); };
  const int64_t s = clip(start), e = std::max(clip(end), clip(start));
  return run_view(Slice(d, s, e == s ? 0 : (e - s - 1) / step + 1, step), x);  // no e - s + step: it may overflow
}

Tensor narrow(const Tensor& x, int64_t dim, int64_t start, int64_t length) {
  if (x.dim() == 0) throw ShapeError("narrow: cannot narrow a 0-dim tensor");
  const int d = wrap_dim(dim, x.dim(), "narrow");
  const int64_t size = x.shape()[d];
  const int64_t s = start < 0 ? start + size : start;
  if (s < 0 || s > size || length < 0 || length > size - s)
    throw IndexError("narrow: start " + std::to_string(start) + " + length " + std::to_string(length) +
                     " exceeds dimension " + std::to_string(d) + " of size " + std::to_string(size));
  return run_view(Slice(d, s, length, 1), x);
}

Tensor select(const Tensor& x, int64_t dim, int64_t index) {
  if (x.dim() == 0) throw ShapeError("select: cannot select from a 0-dim tensor");
  const int d = wrap_dim(dim, x.dim(), "select");
  const int64_t size = x.shape()[d];
  if (index < -size || index >= size)
    throw IndexError("select: index " + std::to_string(index) + " out of range for dimension " + std::to_string(d) +
                     " of size " + std::to_string(size));
  return squeeze(narrow(x, d, index < 0 ? index + size : index, 1), d);
}

Tensor expand(const Tensor& x, const Shape& shape) {
  if (shape.size() < x.dim())
    throw ShapeError("expand: target " + to_string(shape) + " has fewer dims than the input " + to_string(x.shape()));
  Shape target = shape;
  const int lead = shape.size() - x.dim();
  for (int i = 0; i < shape.size(); ++i) {
    const int src = i - lead;
    if (target[i] == -1) {
      if (src < 0) throw ShapeError("expand: -1 is not allowed for a new leading dim in " + to_string(shape));
      target[i] = x.shape()[src];
    }
    if (target[i] < 0)
      throw ShapeError("expand: invalid size " + std::to_string(target[i]) + " at dim " + std::to_string(i) + " of " +
                       to_string(shape) + " (-1 keeps the input's size)");
    if (src >= 0 && x.shape()[src] != 1 && x.shape()[src] != target[i])
      throw ShapeError("expand: the input's size " + std::to_string(x.shape()[src]) + " at dim " +
                       std::to_string(src) + " must match " + std::to_string(target[i]) + " (input " +
                       to_string(x.shape()) + ", target " + to_string(shape) + ")");
  }
  if (target == x.shape()) return x;
  check_span(target, "expand");
  return run_view(Expand(target), x);
}

Tensor broadcast_to(const Tensor& x, const Shape& shape) { return expand(x, shape); }

Tensor squeeze(const Tensor& x) {
  Shape s;
  for (int64_t v : x.shape())
    if (v != 1) s.push_back(v);
  return s == x.shape() ? x : run_view(Reshape(s), x);
}

Tensor squeeze(const Tensor& x, int64_t dim) {
  if (x.dim() == 0) return x;
  const int d = wrap_dim(dim, x.dim(), "squeeze");
  if (x.shape()[d] != 1) return x;
  Shape s = x.shape();
  s.erase(d);
  return run_view(Reshape(s), x);
}

Tensor squeeze(const Tensor& x, const Shape& dims) {
  std::vector<bool> listed(static_cast<size_t>(std::max(x.dim(), 1)), false);
  for (int64_t dim : dims) {
    const int d = wrap_dim(dim, x.dim(), "squeeze");
    if (listed[d]) throw ShapeError("squeeze: dim " + std::to_string(d) + " appears twice in " + to_string(dims));
    listed[d] = true;
  }
  Shape s;
  for (int d = 0; d < x.dim(); ++d)
    if (!(listed[d] && x.shape()[d] == 1)) s.push_back(x.shape()[d]);
  return s == x.shape() ? x : run_view(Reshape(s), x);
}

Tensor unsqueeze(const Tensor& x, int64_t dim) {
  const int d = wrap_dim(dim, x.dim() + 1, "unsqueeze");
  Shape s = x.shape();
  s.insert(d, 1);
  return run_view(Reshape(s), x);
}

Tensor flatten(const Tensor& x, int64_t start_dim, int64_t end_dim) {
  if (x.dim() == 0) return reshape(x, {1});
  const int s = wrap_dim(start_dim, x.dim(), "flatten"), e = wrap_dim(end_dim, x.dim(), "flatten");
  if (s > e) throw ShapeError("flatten: start_dim " + std::to_string(start_dim) + " comes after end_dim " +
                              std::to_string(end_dim));
  Shape shape;
  for (int i = 0; i < s; ++i) shape.push_back(x.shape()[i]);
  int64_t merged = 1;
  for (int i = s; i <= e; ++i) merged *= x.shape()[i];
  shape.push_back(merged);
  for (int i = e + 1; i < x.dim(); ++i) shape.push_back(x.shape()[i]);
  return reshape(x, shape);
}

Tensor sum_to(const Tensor& x, const Shape& shape) {
  if (x.shape() == shape) return x;
  const int lead = x.dim() - shape.size();
  if (lead < 0) throw ShapeError("sum_to: cannot reduce shape " + to_string(x.shape()) + " to " + to_string(shape));
  Shape dims;
  for (int i = 0; i < x.dim(); ++i)
    if (i < lead || (shape[i - lead] == 1 && x.shape()[i] != 1)) dims.push_back(i);
  const Tensor summed = dims.empty() ? x : sum(x, dims, /*keepdim=*/true);
  return reshape(summed, shape);
}

// ---- joining and splitting (cat is a primitive in tensor/index.cpp)

Tensor stack(const std::vector<Tensor>& tensors_in, int64_t dim) {
  const amp::OpArgList args = amp::autocast_args("stack", tensors_in);
  const std::vector<Tensor>& tensors = args.tensors();
  if (tensors.empty()) throw ValueError("stack: expects a non-empty list of tensors");
  const int d = wrap_dim(dim, tensors[0].dim() + 1, "stack");
  std::vector<Tensor> parts;
  parts.reserve(tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    if (!(tensors[i].shape() == tensors[0].shape()))
      throw ShapeError("stack: tensor " + std::to_string(i) + " has shape " + to_string(tensors[i].shape()) +
                       ", tensor 0 has " + to_string(tensors[0].shape()));
    parts.push_back(unsqueeze(tensors[i], d));
  }
  return cat(parts, d);
}

Tensor pad(const Tensor& x, const std::vector<int64_t>& pads, Scalar value) {
  auto where = [&] {
    std::string s = "pad: pads (";
    for (size_t i = 0; i < pads.size(); ++i) s += (i ? ", " : "") + std::to_string(pads[i]);
    return s + ") for input " + to_string(x.shape());
  };
  if (pads.size() % 2 != 0) throw ShapeError(where() + ": an odd count (they come in (before, after) pairs)");
  if (static_cast<int64_t>(pads.size() / 2) > x.dim())
    throw ShapeError(where() + ": more pairs than the input's " + std::to_string(x.dim()) + " dims");
  Tensor y = x;
  for (size_t pair = 0; pair < pads.size() / 2; ++pair) {
    const int d = x.dim() - 1 - static_cast<int>(pair);
    const int64_t before = pads[2 * pair], after = pads[2 * pair + 1], size = y.size(d);
    // Removals first (narrow), then additions (cat with filled blocks): the gradient flows back through both.
    const int64_t cut_before = std::max<int64_t>(-before, 0), cut_after = std::max<int64_t>(-after, 0);
    if (cut_before + cut_after > size)
      throw ShapeError(where() + ": removes " + std::to_string(cut_before + cut_after) + " elements from dim " +
                       std::to_string(d) + " of size " + std::to_string(size));
    if (cut_before + cut_after > 0) y = narrow(y, d, cut_before, size - cut_before - cut_after);
    std::vector<Tensor> parts;
    auto block = [&](int64_t n) {
      Shape s = y.shape();
      s[d] = n;
      return full(s, value, TensorOptions(y.dtype()).with_device(y.device()));
    };
    if (before > 0) parts.push_back(block(before));
    parts.push_back(y);
    if (after > 0) parts.push_back(block(after));
    if (parts.size() > 1) y = cat(parts, d);
  }
  return y;
}

std::vector<Tensor> split_with_sizes(const Tensor& x, const std::vector<int64_t>& sizes, int64_t dim) {
  const int d = wrap_dim(dim, x.dim(), "split");
  const int64_t total = std::accumulate(sizes.begin(), sizes.end(), int64_t{0});
  if (total != x.shape()[d])
    throw ShapeError("split_with_sizes: sizes sum to " + std::to_string(total) + " but dim " + std::to_string(d) +
                     " has size " + std::to_string(x.shape()[d]));
  std::vector<Tensor> out;
  int64_t start = 0;
  for (int64_t s : sizes) {
    out.push_back(narrow(x, d, start, s));
    start += s;
  }
  return out;
}

std::vector<Tensor> split(const Tensor& x, int64_t split_size, int64_t dim) {
  if (split_size <= 0) throw ValueError("split: split_size must be positive, got " + std::to_string(split_size));
  const int d = wrap_dim(dim, x.dim(), "split");
  std::vector<int64_t> sizes;
  for (int64_t start = 0; start < x.shape()[d]; start += split_size)
    sizes.push_back(std::min(split_size, x.shape()[d] - start));
  return split_with_sizes(x, sizes, d);
}

std::vector<Tensor> chunk(const Tensor& x, int64_t chunks, int64_t dim) {
  if (chunks <= 0) throw ValueError("chunk: number of chunks must be positive, got " + std::to_string(chunks));
  const int d = wrap_dim(dim, x.dim(), "chunk");
  const int64_t size = x.shape()[d];
  return split(x, std::max<int64_t>((size + chunks - 1) / chunks, 1), d);
}

}  // namespace ember
