// PyTorch ops that ember has no primitive for, composed of ember ops so that they are differentiable
// and run on every device: flip (index_select with a reversed index), roll (two narrows joined by
// cat), tril and triu (masked_fill with a mask of index comparisons) and meshgrid (expanded views).
#include "python/ember/bind.h"

namespace ember::python {

namespace {

// The dims of `dims` wrapped into [0, x.dim()); IndexError when out of range, ValueError when repeated.
std::vector<int> distinct_dims(const Tensor& x, const Shape& dims, const char* op) {
  std::vector<int> wrapped;
  for (const int64_t d : dims) {
    const int w = wrap_dim(d, x.dim(), op);
    if (std::find(wrapped.begin(), wrapped.end(), w) != wrapped.end())
      throw ValueError(std::string(op) + ": dim " + std::to_string(d) + " appears more than once in " + to_string(dims));
    wrapped.push_back(w);
  }
  return wrapped;
}

// torch.flip: the elements of each of `dims` in reverse order (a copy, as PyTorch's).
Tensor flip(const Tensor& x, const DimList& dims) {
  Tensor out = x;
  for (const int d : distinct_dims(x, dims.dims, "flip")) {
    const int64_t n = x.shape()[d];
    out = index_select(out, d, arange(n - 1, -1, -1, DType::i64, x.device()));
  }
  return out;
}

// torch.roll: elements shifted along each dim by its shift, those pushed past the end coming back at
// the start; without dims, over the flattened tensor (the shape kept).
Tensor roll(const Tensor& x, const DimList& shifts, const std::optional<DimList>& dims) {
  if (!dims) {
    if (shifts.dims.size() != 1)
      throw ValueError("roll: without dims, one shift rolls the flattened tensor; got shifts " + to_string(shifts.dims));
    return roll(x.reshape({-1}), shifts, DimList{{0}}).reshape(x.shape());
  }
  if (shifts.dims.size() != dims->dims.size())
    throw ValueError("roll: shifts " + to_string(shifts.dims) + " and dims " + to_string(dims->dims) +
                     " must have the same length");
  Tensor out = x;
  const std::vector<int> wrapped = distinct_dims(x, dims->dims, "roll");
  for (size_t i = 0; i < wrapped.size(); ++i) {
    const int d = wrapped[i];
    const int64_t n = x.shape()[d];
    if (n == 0) continue;
    const int64_t s = ((shifts.dims[static_cast<int>(i)] % n) + n) % n;
    if (s != 0) out = cat({out.narrow(d, n - s, s), out.narrow(d, 0, n - s)}, d);
  }
  return out;
}

// The elements of x's last two dims that tril (lower) or triu (upper) keep, relative to `diagonal`
// (0: the main diagonal, positive: above it), as PyTorch counts; the others become zero.
Tensor triangle(const Tensor& x, int64_t diagonal, bool lower, const char* op) {
  if (x.dim() < 2) throw ShapeError(std::string(op) + ": needs at least 2 dims, got shape " + to_string(x.shape()));
  const int64_t rows = x.shape()[x.dim() - 2], cols = x.shape()[x.dim() - 1];
  const Tensor row = arange(rows, DType::i64, x.device()).reshape({rows, 1});
  const Tensor col = arange(cols, DType::i64, x.device()).reshape({1, cols});
  const Tensor offset = col - row;  // which diagonal each element is on
  return masked_fill(x, lower ? gt(offset, diagonal) : lt(offset, diagonal), 0);
}

// torch.meshgrid: for N 1-D tensors, N tensors of shape (len0, ..., lenN-1) ("ij") where tensor i
// varies along dim i; "xy" swaps the first two dims (Cartesian order). Each is an expanded view.
std::vector<Tensor> meshgrid(const std::vector<Tensor>& tensors, const std::string& indexing) {
  if (indexing != "ij" && indexing != "xy")
    throw ValueError("meshgrid: indexing must be 'ij' or 'xy', got '" + indexing + "'");
  if (tensors.empty()) throw ValueError("meshgrid: expects at least one tensor");
  Shape sizes;
  for (size_t i = 0; i < tensors.size(); ++i) {
    if (tensors[i].dim() > 1)
      throw ShapeError("meshgrid: tensor " + std::to_string(i) + " has shape " + to_string(tensors[i].shape()) +
                       "; expects 0-D or 1-D tensors");
    sizes.push_back(tensors[i].numel());
  }
  const bool swap = indexing == "xy" && tensors.size() >= 2;
  if (swap) std::swap(sizes[0], sizes[1]);
  std::vector<Tensor> grids;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const int at = swap && i < 2 ? 1 - static_cast<int>(i) : static_cast<int>(i);
    Shape view = Shape::filled(sizes.size(), 1);
    view[at] = sizes[at];
    grids.push_back(tensors[i].reshape(view).expand(sizes));
  }
  return grids;
}

// meshgrid(*tensors) or meshgrid([tensors]), as torch takes them.
std::vector<Tensor> meshgrid_from_args(const nb::args& args, const std::string& indexing) {
  const bool one_sequence = args.size() == 1 && (nb::isinstance<nb::list>(args[0]) || nb::isinstance<nb::tuple>(args[0]));
  return meshgrid(tensor_list(one_sequence ? args[0] : nb::handle(args), "meshgrid", false), indexing);
}

}  // namespace

void bind_composed_ops(nb::module_& m) {
  def_both(m, "flip", &flip, "dims"_a,
           "The elements of each of `dims` in reverse order (a copy, as PyTorch's). IndexError for a dim out of range, "
           "ValueError for one given twice.");
  def_both(m, "roll", &roll, "shifts"_a, "dims"_a = nb::none(),
           "Elements shifted by `shifts` along `dims`, those pushed past the end coming back at the start; without "
           "dims, over the flattened tensor (the shape kept).");
  def_both(m, "tril", [](const Tensor& x, int64_t diagonal) { return triangle(x, diagonal, true, "tril"); },
           "diagonal"_a = 0,
           "The lower triangle of the last two dims: elements above the `diagonal`-th diagonal (0: the main one, "
           "positive: above it) become zero.");
  def_both(m, "triu", [](const Tensor& x, int64_t diagonal) { return triangle(x, diagonal, false, "triu"); },
           "diagonal"_a = 0,
           "The upper triangle of the last two dims: elements below the `diagonal`-th diagonal (0: the main one, "
           "positive: above it) become zero.");
  m.def("meshgrid", &meshgrid_from_args, "tensors"_a, nb::kw_only(), "indexing"_a = "ij",
        "For N 0-D or 1-D tensors, N tensors of their lengths' shape where tensor i varies along dim i (indexing "
        "'ij') or with the first two dims swapped ('xy'); each an expanded view of its input.");
}

}  // namespace ember::python
