// Printing in PyTorch's style: tensor([[1.0000, 2.5000]], dtype=float64, grad_fn=<mul>).
#include <cmath>
#include <cstdio>
#include <sstream>

#include "autograd/grad_mode.h"
#include "autograd/node.h"
#include "tensor/ops.h"

namespace ember {

namespace {

constexpr int64_t kSummarizeAbove = 1000;  // PyTorch's print threshold
constexpr int64_t kEdgeItems = 3;

struct Formatter {
  enum class Style { integer, whole_float, fixed, scientific } style = Style::integer;
  int width = 1;

  std::string format(double v) const {
    char buf[64];
    if (std::isnan(v)) return "nan";
    if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
    switch (style) {
      case Style::integer: std::snprintf(buf, sizeof buf, "%lld", static_cast<long long>(v)); break;
      case Style::whole_float: std::snprintf(buf, sizeof buf, "%.0f.", v); break;
      case Style::fixed: std::snprintf(buf, sizeof buf, "%.4f", v); break;
      case Style::scientific: std::snprintf(buf, sizeof buf, "%.4e", v); break;
    }
    return buf;
  }
};

// Picks fixed or scientific notation the way PyTorch's _Formatter does.
Formatter make_formatter(const std::vector<double>& values, DType dtype) {
  Formatter f;
  if (!is_floating(dtype)) {
    f.style = Formatter::Style::integer;
  } else {
    double max_abs = 0, min_abs = INFINITY;
    bool whole = true;
    for (double v : values) {
      if (!std::isfinite(v)) continue;
      const double a = std::fabs(v);
      max_abs = std::max(max_abs, a);
      if (a > 0) min_abs = std::min(min_abs, a);
      whole = whole && v == std::nearbyint(v);
    }
    if (whole && max_abs < 1e8) f.style = Formatter::Style::whole_float;
    else if (max_abs >= 1e8 || (min_abs < 1e-4) || (min_abs != INFINITY && max_abs / min_abs > 1000))
      f.style = Formatter::Style::scientific;
    else f.style = Formatter::Style::fixed;
  }
  for (double v : values) f.width = std::max<int>(f.width, static_cast<int>(f.format(v).size()));
  return f;
}

struct Printer {
  const std::vector<double>& values;
  const Shape& shape;
  const Strides strides;
  bool summarize;
  bool boolean;
  Formatter fmt;

  std::string element(double v) const {
    std::string s = boolean ? (v != 0 ? "True" : "False") : fmt.format(v);
    const int w = boolean ? 5 : fmt.width;
    return std::string(std::max<int>(0, w - static_cast<int>(s.size())), ' ') + s;
  }

  // indent: column where this block's '[' sits.
  std::string block(int dim, int64_t offset, int indent) const {
    if (dim == shape.size()) return element(values[offset]);
    std::vector<int64_t> idx;
    const int64_t n = shape[dim];
    const bool cut = summarize && n > 2 * kEdgeItems;
    for (int64_t i = 0; i < n; ++i)
      if (!cut || i < kEdgeItems || i >= n - kEdgeItems) idx.push_back(i);
    const bool innermost = dim == shape.size() - 1;
    std::string sep = ",";
    if (innermost) {
      sep += ' ';
    } else {
      sep.append(shape.size() - dim - 1, '\n');
      sep.append(indent + 1, ' ');
    }
    std::string out = "[";
    for (size_t k = 0; k < idx.size(); ++k) {
      if (k) out += sep;
      if (cut && k == static_cast<size_t>(kEdgeItems)) {
        out += innermost ? " ..." : "...";  // PyTorch pads the ellipsis of a row by one space
        out += sep;
      }
      out += block(dim + 1, offset + idx[k] * strides[dim], indent + 1);
    }
    return out + "]";
  }
};

}  // namespace

std::string Tensor::str() const {
  if (!defined()) return "tensor(undefined)";
  NoGradGuard no_grad;
  const std::vector<double> values = to_vector<double>();
  const bool summarize = numel() > kSummarizeAbove;
  std::vector<double> shown;
  if (summarize) {
    // Scan only what is shown so the format is chosen from visible values (close to PyTorch).
    shown.assign(values.begin(), values.begin() + std::min<int64_t>(values.size(), kEdgeItems));
    shown.insert(shown.end(), values.end() - std::min<int64_t>(values.size(), kEdgeItems), values.end());
  }
  const Formatter fmt = make_formatter(summarize ? shown : values, dtype());
  const Printer p{values, shape(), contiguous_strides(shape()), summarize, dtype() == DType::boolean, fmt};
  std::string body = numel() == 0 ? "[]" : p.block(0, 0, 7);
  std::string s = "tensor(" + body;
  if (numel() == 0 && dim() > 1) s += ", size=" + to_string(shape());
  if (device().is_cuda()) s += ", device='" + device().str() + "'";
  if (dtype() != DType::f32 && dtype() != DType::i64 && dtype() != DType::boolean)
    s += std::string(", dtype=") + dtype_name(dtype());
  if (grad_fn()) s += std::string(", grad_fn=<") + grad_fn()->name() + ">";
  else if (requires_grad()) s += ", requires_grad=True";
  return s + ")";
}

}  // namespace ember
