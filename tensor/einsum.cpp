// einsum, composed of views, masked_fill, sum, mul and matmul: each step is an ordinary op, so
// autograd and every device come with them. Autocast casts the operands once, on entry.
#include "tensor/einsum.h"

#include <algorithm>
#include <array>
#include <string>

#include "tensor/autocast.h"
#include "tensor/ops.h"

namespace ember {

namespace {

// Labels are ints: the letters 'A'-'Z' then 'a'-'z' are 0..51 (ASCII order, which the implicit
// output sorts by); the ellipsis dims follow, kEllipsis + i for the i-th of the widest ellipsis.
constexpr int kLetters = 52;
constexpr int kEllipsis = kLetters;
constexpr int kNoEllipsis = -1;
using LabelSizes = std::array<int64_t, kEllipsis + kMaxDims>;

// One side of the equation's parse: a term's letters and where its "..." stands among them.
struct Subscripts {
  std::vector<int> letters;
  int ellipsis_at = kNoEllipsis;  // index into letters before which the ellipsis dims go
};

struct Parsed {
  std::vector<Subscripts> inputs;
  bool explicit_output = false;
  Subscripts output;
};

// An operand during the contraction: its tensor and one label per dim.
struct Term {
  Tensor t;
  std::vector<int> labels;
};

[[noreturn]] void malformed(std::string_view equation, const std::string& why) {
  throw ValueError("einsum: equation '" + std::string(equation) + "': " + why);
}

int letter_label(char c) { return c >= 'A' && c <= 'Z' ? c - 'A' : 26 + (c - 'a'); }
char label_letter(int l) { return l < 26 ? static_cast<char>('A' + l) : static_cast<char>('a' + l - 26); }

Subscripts parse_term(std::string_view equation, std::string_view term) {
  Subscripts s;
  for (size_t i = 0; i < term.size(); ++i) {
    const char c = term[i];
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) {
      s.letters.push_back(letter_label(c));
    } else if (c == '.') {
      if (term.substr(i, 3) != "...") malformed(equation, "'.' outside an ellipsis '...'");
      if (s.ellipsis_at != kNoEllipsis) malformed(equation, "more than one '...' in the term '" + std::string(term) + "'");
      s.ellipsis_at = static_cast<int>(s.letters.size());
      i += 2;
    } else if (c != ' ') {
      malformed(equation, std::string("invalid character '") + c + "' (subscripts are letters a-z, A-Z and '...')");
    }
  }
  return s;
}

Parsed parse(std::string_view equation) {
  Parsed p;
  std::string_view lhs = equation;
  if (const size_t arrow = equation.find("->"); arrow != std::string_view::npos) {
    const std::string_view rhs = equation.substr(arrow + 2);
    if (rhs.find("->") != std::string_view::npos) malformed(equation, "more than one '->'");
    if (rhs.find(',') != std::string_view::npos) malformed(equation, "the output has a ','; einsum has one output");
    lhs = equation.substr(0, arrow);
    p.explicit_output = true;
    p.output = parse_term(equation, rhs);
  } else if (equation.find_first_of("->") != std::string_view::npos) {
    malformed(equation, "'-' or '>' outside an arrow '->'");
  }
  for (size_t start = 0;;) {
    const size_t comma = lhs.find(',', start);
    p.inputs.push_back(parse_term(equation, lhs.substr(start, comma == std::string_view::npos ? lhs.npos : comma - start)));
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return p;
}

std::string term_text(const Subscripts& s) {
  std::string text;
  for (int i = 0; i <= static_cast<int>(s.letters.size()); ++i) {
    if (i == s.ellipsis_at) text += "...";
    if (i < static_cast<int>(s.letters.size())) text += label_letter(s.letters[i]);
  }
  return text;
}

// The operand's labels, one per dim: its letters with the ellipsis dims in place, right-aligned to
// the widest ellipsis (as broadcasting aligns shapes).
std::vector<int> operand_labels(std::string_view equation, const Subscripts& s, const Tensor& t, int index,
                                int widest_ellipsis) {
  const int letters = static_cast<int>(s.letters.size());
  const int ellipsis_dims = t.dim() - letters;
  if (s.ellipsis_at == kNoEllipsis ? ellipsis_dims != 0 : ellipsis_dims < 0)
    throw ShapeError("einsum: equation '" + std::string(equation) + "': operand " + std::to_string(index) + " has shape " +
                     to_string(t.shape()) + " but its subscripts '" + term_text(s) + "' name " +
                     (s.ellipsis_at == kNoEllipsis ? "exactly " : "at least ") + std::to_string(letters) + " dims");
  std::vector<int> labels(s.letters.begin(), s.letters.end());
  if (s.ellipsis_at != kNoEllipsis)
    for (int i = 0; i < ellipsis_dims; ++i)
      labels.insert(labels.begin() + s.ellipsis_at + i, kEllipsis + widest_ellipsis - ellipsis_dims + i);
  return labels;
}

int position(const std::vector<int>& labels, int label) {
  const auto it = std::find(labels.begin(), labels.end(), label);
  return it == labels.end() ? -1 : static_cast<int>(it - labels.begin());
}

bool contains(const std::vector<int>& labels, int label) { return position(labels, label) >= 0; }

std::string label_name(int label) {
  return label < kLetters ? std::string("'") + label_letter(label) + "'"
                          : "ellipsis dim " + std::to_string(label - kEllipsis);
}

// A term whose repeated labels are reduced to their diagonal: for label l at dims p < q, those two
// dims are moved last and merged, where element (i, i) sits at i * (n + 1), and index_select picks
// the n of them: a view and n reads when the merge needs no copy ("ii" of a contiguous matrix).
Term take_diagonals(std::string_view equation, Term term, int index) {
  for (int q = 0; q < static_cast<int>(term.labels.size()); ++q) {
    const int p = position(term.labels, term.labels[q]);
    if (p == q) continue;
    const int64_t n = term.t.shape()[p];
    if (term.t.shape()[q] != n)
      throw ShapeError("einsum: equation '" + std::string(equation) + "': operand " + std::to_string(index) +
                       " repeats " + label_name(term.labels[q]) + " over dims of sizes " + std::to_string(n) + " and " +
                       std::to_string(term.t.shape()[q]) + "; a diagonal needs them equal");
    Shape order, merged;
    std::vector<int> labels;
    for (int d = 0; d < term.t.dim(); ++d)
      if (d != p && d != q) {
        order.push_back(d);
        merged.push_back(term.t.shape()[d]);
        labels.push_back(term.labels[d]);
      }
    order.push_back(p);
    order.push_back(q);
    merged.push_back(n * n);
    labels.push_back(term.labels[p]);
    const Tensor diagonal_positions = arange(0, n * n, n + 1, DType::i64, term.t.device());
    term.t = index_select(reshape(permute(term.t, order), merged), merged.size() - 1, diagonal_positions);
    term.labels = std::move(labels);
    q = -1;  // the labels moved: look again from the start
  }
  return term;
}

// Sums away the labels of `term` that are not in `keep`.
Term sum_except(Term term, const std::vector<int>& keep) {
  Shape dims;
  std::vector<int> kept;
  for (int d = 0; d < static_cast<int>(term.labels.size()); ++d) {
    if (contains(keep, term.labels[d]))
      kept.push_back(term.labels[d]);
    else
      dims.push_back(d);
  }
  if (!dims.empty()) term = {sum(term.t, dims), kept};
  return term;
}

// term's tensor with its dims in the order of `order` (which holds every label of term), a dim of
// size 1 where term lacks a label, and the labels of `broadcast` expanded to their sizes there.
Tensor aligned(const Term& term, const std::vector<int>& order, const LabelSizes& sizes, const std::vector<int>& broadcast) {
  Shape dims, view_shape, target;
  for (const int l : order) {
    const int d = position(term.labels, l);
    if (d >= 0) dims.push_back(d);
    view_shape.push_back(d >= 0 ? term.t.shape()[d] : 1);
    target.push_back(contains(broadcast, l) ? sizes[l] : view_shape.back());
  }
  Tensor t = reshape(permute(term.t, dims), view_shape);
  return view_shape == target ? t : expand(t, target);
}

int64_t total_size(const std::vector<int>& labels, const LabelSizes& sizes) {
  int64_t p = 1;
  for (const int l : labels) p *= sizes[l];
  return p;
}

// The product of a and b with the labels outside `keep` summed away.
Term contract(Term a, Term b, const std::vector<int>& keep) {
  std::vector<int> keep_a = keep, keep_b = keep;
  keep_a.insert(keep_a.end(), b.labels.begin(), b.labels.end());
  keep_b.insert(keep_b.end(), a.labels.begin(), a.labels.end());
  a = sum_except(std::move(a), keep_a);
  b = sum_except(std::move(b), keep_b);

  std::vector<int> batch, summed, only_a, only_b;
  for (const int l : a.labels) (contains(b.labels, l) ? (contains(keep, l) ? batch : summed) : only_a).push_back(l);
  for (const int l : b.labels)
    if (!contains(a.labels, l)) only_b.push_back(l);
  // A label shared by both sides broadcasts a size of 1 on one of them.
  std::vector<int> shared = batch;
  shared.insert(shared.end(), summed.begin(), summed.end());
  LabelSizes sizes{};
  for (int d = 0; d < a.t.dim(); ++d) sizes[a.labels[d]] = a.t.shape()[d];
  for (int d = 0; d < b.t.dim(); ++d)
    if (!contains(a.labels, b.labels[d]) || sizes[b.labels[d]] == 1) sizes[b.labels[d]] = b.t.shape()[d];

  std::vector<int> out = batch;
  out.insert(out.end(), only_a.begin(), only_a.end());
  out.insert(out.end(), only_b.begin(), only_b.end());
  Shape out_shape;
  for (const int l : out) out_shape.push_back(sizes[l]);
  const int64_t m = total_size(only_a, sizes), n = total_size(only_b, sizes);
  if (summed.empty() || (m == 1 && n == 1)) {
    // A broadcast product, or a batch of dot products (as 1 x k by k x 1 matrices they would waste the GEMM).
    std::vector<int> order = out;
    order.insert(order.end(), summed.begin(), summed.end());
    Tensor product = mul(aligned(a, order, sizes, shared), aligned(b, order, sizes, shared));
    if (!summed.empty()) {
      Shape summed_dims;
      for (size_t i = out.size(); i < order.size(); ++i) summed_dims.push_back(static_cast<int64_t>(i));
      product = sum(product, summed_dims);
    }
    return {product, out};
  }
  std::vector<int> a_order = batch, b_order = batch;
  a_order.insert(a_order.end(), only_a.begin(), only_a.end());
  a_order.insert(a_order.end(), summed.begin(), summed.end());
  b_order.insert(b_order.end(), summed.begin(), summed.end());
  b_order.insert(b_order.end(), only_b.begin(), only_b.end());
  const int64_t batches = total_size(batch, sizes), k = total_size(summed, sizes);
  const Tensor a3 = reshape(aligned(a, a_order, sizes, shared), {batches, m, k});
  const Tensor b3 = reshape(aligned(b, b_order, sizes, shared), {batches, k, n});
  return {reshape(matmul(a3, b3), out_shape), out};
}

}  // namespace

Tensor einsum(std::string_view equation, const std::vector<Tensor>& operands_in) {
  const amp::OpArgList args = amp::autocast_args("einsum", operands_in);  // all of it in 16 bits, as PyTorch's
  const std::vector<Tensor>& operands = args.tensors();
  const Parsed p = parse(equation);
  if (p.inputs.size() != operands.size())
    malformed(equation, "it has subscripts for " + std::to_string(p.inputs.size()) + " operand(s) but " +
                            std::to_string(operands.size()) + " were given");
  for (size_t i = 0; i < operands.size(); ++i)
    if (!operands[i].defined()) throw ValueError("einsum: operand " + std::to_string(i) + " is an undefined tensor");

  int widest_ellipsis = 0;
  for (size_t i = 0; i < operands.size(); ++i)
    if (p.inputs[i].ellipsis_at != kNoEllipsis)
      widest_ellipsis = std::max(widest_ellipsis, operands[i].dim() - static_cast<int>(p.inputs[i].letters.size()));

  // Each label's size over all operands: equal, or 1 where it broadcasts.
  LabelSizes sizes{};
  std::array<int, kEllipsis + kMaxDims> occurrences{};  // operands that have the label
  std::vector<Term> terms;
  for (size_t i = 0; i < operands.size(); ++i) {
    Term term{operands[i], operand_labels(equation, p.inputs[i], operands[i], static_cast<int>(i), widest_ellipsis)};
    for (int d = 0; d < operands[i].dim(); ++d) {
      const int l = term.labels[d];
      const int64_t size = operands[i].shape()[d];
      const bool seen = occurrences[l] > 0;  // in an earlier operand; take_diagonals checks repeats within this one
      if (seen && size != sizes[l] && size != 1 && sizes[l] != 1)
        throw ShapeError("einsum: equation '" + std::string(equation) + "': " + label_name(l) + " has size " +
                         std::to_string(size) + " in operand " + std::to_string(i) + " but " + std::to_string(sizes[l]) +
                         " before (sizes of one subscript must agree or be 1)");
      if (!seen || sizes[l] == 1) sizes[l] = size;
    }
    for (int d = 0; d < operands[i].dim(); ++d)
      if (position(term.labels, term.labels[d]) == d) ++occurrences[term.labels[d]];  // once per operand
    terms.push_back(take_diagonals(equation, std::move(term), static_cast<int>(i)));
  }

  std::vector<int> output;
  if (p.explicit_output) {
    for (int i = 0; i <= static_cast<int>(p.output.letters.size()); ++i) {
      if (i == p.output.ellipsis_at)
        for (int e = 0; e < widest_ellipsis; ++e) output.push_back(kEllipsis + e);
      if (i == static_cast<int>(p.output.letters.size())) break;
      const int l = p.output.letters[i];
      if (occurrences[l] == 0) malformed(equation, "the output's " + label_name(l) + " is in no operand");
      if (contains(output, l)) malformed(equation, "the output repeats " + label_name(l));
      output.push_back(l);
    }
  } else {
    for (int e = 0; e < widest_ellipsis; ++e) output.push_back(kEllipsis + e);
    for (int l = 0; l < kLetters; ++l) {
      int uses = 0;  // within terms too: "ii" is a diagonal summed away, not an output
      for (const Subscripts& s : p.inputs) uses += static_cast<int>(std::count(s.letters.begin(), s.letters.end(), l));
      if (uses == 1) output.push_back(l);
    }
  }

  // Contract left to right; after each step keep what the output or a later operand still needs.
  Term result = sum_except(std::move(terms[0]), [&] {
    std::vector<int> keep = output;
    for (size_t j = 1; j < terms.size(); ++j) keep.insert(keep.end(), terms[j].labels.begin(), terms[j].labels.end());
    return keep;
  }());
  for (size_t i = 1; i < terms.size(); ++i) {
    std::vector<int> keep = output;
    for (size_t j = i + 1; j < terms.size(); ++j) keep.insert(keep.end(), terms[j].labels.begin(), terms[j].labels.end());
    result = contract(std::move(result), std::move(terms[i]), keep);
  }
  return aligned(result, output, sizes, {});
}

}  // namespace ember
