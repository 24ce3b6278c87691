// einsum against a brute-force sum over every assignment of its subscripts (f64), against matmul
// for ellipsis batches, its implicit output, its gradients (gradcheck), its errors, and on a GPU
// against the CPU.
#include <map>
#include <string>

#include "autograd/gradcheck.h"
#include "tensor/einsum.h"
#include "tests/helpers.h"

using namespace ember;
using namespace ember_test;

namespace {

const Device kCuda{DeviceType::cuda, 0};

// The reference: for an explicit equation of letters only, every assignment of values to the
// letters adds the product of the operands' elements there (a size-1 dim reads index 0) to the
// output element it names.
Host brute_force(const std::string& equation, const std::vector<Tensor>& operands) {
  const size_t arrow = equation.find("->");
  std::vector<std::string> terms;
  for (size_t start = 0;;) {
    const size_t comma = equation.find(',', start);
    terms.push_back(equation.substr(start, std::min(comma, arrow) - start));
    if (comma > arrow) break;
    start = comma + 1;
  }
  const std::string output = equation.substr(arrow + 2);
  std::map<char, int64_t> sizes;
  std::vector<std::vector<double>> data;
  for (size_t i = 0; i < terms.size(); ++i) {
    for (size_t d = 0; d < terms[i].size(); ++d) sizes[terms[i][d]] = std::max(sizes[terms[i][d]], operands[i].shape()[d]);
    data.push_back(values(operands[i]));
  }
  std::string letters;
  Shape letter_sizes;
  for (const auto& [c, n] : sizes) {
    letters += c;
    letter_sizes.push_back(n);
  }
  Shape out_shape;
  for (const char c : output) out_shape.push_back(sizes[c]);
  Host out{out_shape, std::vector<double>(numel(out_shape), 0.0)};
  for (int64_t flat = 0; flat < numel(letter_sizes); ++flat) {
    const Shape at = unravel(flat, letter_sizes);
    auto value_of = [&](char c) { return at[static_cast<int>(letters.find(c))]; };
    double product = 1;
    for (size_t i = 0; i < terms.size(); ++i) {
      Shape idx;
      for (size_t d = 0; d < terms[i].size(); ++d)
        idx.push_back(operands[i].shape()[d] == 1 ? 0 : value_of(terms[i][d]));
      product *= data[i][ravel(idx, operands[i].shape())];
    }
    Shape out_idx;
    for (const char c : output) out_idx.push_back(value_of(c));
    out.v[ravel(out_idx, out_shape)] += product;
  }
  return out;
}

uint64_t seed = 1;
Tensor operand(const Shape& shape) { return uniform_f64(shape, -1, 1, seed++, false); }

struct Case {
  std::string equation;
  std::vector<Shape> shapes;
};

const std::vector<Case> kCases = {
    {"ij,jk->ik", {{3, 4}, {4, 5}}},           // matmul
    {"bij,bjk->bik", {{2, 3, 4}, {2, 4, 5}}},  // bmm
    {"bij,jk->bik", {{2, 3, 4}, {4, 5}}},      // a shared weight
    {"ij->ji", {{3, 4}}},                      // transpose: a view
    {"ij->", {{3, 4}}},                        // sum
    {"ij->j", {{3, 4}}},                       // column sums
    {"ii->i", {{4, 4}}},                       // diagonal
    {"ii->", {{4, 4}}},                        // trace
    {"iij->j", {{3, 3, 2}}},                   // a diagonal summed away
    {"iji->ij", {{3, 2, 3}}},                  // a diagonal kept
    {"i,j->ij", {{3}, {4}}},                   // outer product
    {"ij,ij->ij", {{3, 4}, {3, 4}}},           // elementwise
    {"ij,ij->i", {{3, 4}, {3, 4}}},            // row dot products
    {"ij,ij->", {{3, 4}, {3, 4}}},             // Frobenius inner product
    {"ij,j->i", {{3, 4}, {4}}},                // matrix-vector
    {"ijk,jl,kl->il", {{2, 3, 4}, {3, 5}, {4, 5}}},
    {"ab,bc,cd,de->ae", {{2, 3}, {3, 4}, {4, 2}, {2, 3}}},
    {"i,i,i->i", {{4}, {4}, {4}}},
    {"ik,jk->ij", {{3, 4}, {5, 4}}},  // a @ b.T
    {"ij,jk->ki", {{3, 4}, {4, 5}}},  // the product transposed
    {"aBc,Bd->adc", {{2, 3, 4}, {3, 5}}},
    {"ij,jk->ik", {{3, 1}, {4, 5}}},  // j broadcasts from 1
    {"ij,ij->ij", {{1, 4}, {3, 1}}},  // both broadcast
    {"ij,jk,ik->ik", {{1, 3}, {3, 2}, {4, 2}}},  // i broadcasts from the first operand to the third
    {"bhqd,bhkd->bhqk", {{2, 2, 3, 4}, {2, 2, 5, 4}}},  // attention scores
    {"ij,jk->ik", {{3, 0}, {0, 5}}},  // an empty contraction gives zeros
    {",ij->ij", {{}, {2, 3}}},        // a 0-dim operand scales
};

}  // namespace

TEST_CASE("einsum: matches a brute-force sum over every assignment of its subscripts") {
  for (const Case& c : kCases) {
    std::vector<Tensor> ops;
    for (const Shape& s : c.shapes) ops.push_back(operand(s));
    check_values(einsum(c.equation, ops), brute_force(c.equation, ops), tolerance(DType::f64), c.equation);
  }
}

TEST_CASE("einsum: an ellipsis broadcasts the dims its letters leave, as matmul does") {
  const Tensor a = operand({2, 1, 3, 4}), b = operand({5, 4, 6});
  check_values(einsum("...ij,...jk->...ik", {a, b}), to_host(matmul(a, b)), tolerance(DType::f64), "batched");
  const Tensor x = operand({2, 3, 4});
  check_values(einsum("...ij->...ji", {x}), to_host(x.transpose(-1, -2)), tolerance(DType::f64), "transpose");
  check_values(einsum("i...->...", {x}), to_host(sum(x, {0})), tolerance(DType::f64), "leading letter");
  check_values(einsum("...ij->ij", {x}), to_host(sum(x, {0})), tolerance(DType::f64), "ellipsis summed away");
  const Tensor p = operand({3, 1}), q = operand({4});
  check_values(einsum("...,...->...", {p, q}), to_host(mul(p, q)), tolerance(DType::f64), "ellipsis alone");
}

TEST_CASE("einsum: without '->' the output is the ellipsis, then the letters used once, sorted") {
  const Tensor a = operand({3, 4}), b = operand({4, 5});
  check_values(einsum("ij,jk", {a, b}), to_host(einsum("ij,jk->ik", {a, b})), tolerance(DType::f64), "matmul");
  check_values(einsum("ba", {a}), to_host(a.t()), tolerance(DType::f64), "sorted, so transposed");
  const Tensor square = operand({4, 4});
  check_values(einsum("ii", {square}), to_host(einsum("ii->", {square})), tolerance(DType::f64), "trace");
  CHECK(einsum("Ba", {a}).shape() == Shape{3, 4});  // upper case sorts first
  CHECK(einsum("...ij", {operand({2, 3, 4})}).shape() == Shape{2, 3, 4});
}

TEST_CASE("einsum: gradients (gradcheck) through diagonals, broadcasts, contractions and three operands") {
  for (const Case& c : {Case{"ij,jk->ik", {{3, 4}, {4, 2}}}, Case{"iij->ji", {{3, 3, 2}}},
                        Case{"ij,ij->i", {{1, 4}, {3, 4}}}, Case{"ijk,jl,kl->il", {{2, 3, 2}, {3, 2}, {2, 2}}},
                        Case{"...ij,...jk", {{2, 2, 3}, {3, 2}}}}) {
    INFO(c.equation);
    std::vector<Tensor> inputs;
    for (const Shape& s : c.shapes) inputs.push_back(uniform_f64(s, -1, 1, seed++));
    const std::string equation = c.equation;
    CHECK(autograd::gradcheck([&](const std::vector<Tensor>& in) { return einsum(equation, in); }, inputs).entries > 0);
  }
}

TEST_CASE("einsum: a bad equation or operands raise, naming the equation and the values") {
  const Tensor m = operand({2, 3}), v = operand({3});
  expect_error<ValueError>("operand count", [&] { einsum("ij,jk->ik", {m}); }, {"'ij,jk->ik'", "2 operand", "1 were"});
  expect_error<ValueError>("no operands", [&] { einsum("i->i", {}); }, {"1 operand", "0 were"});
  expect_error<ValueError>("bad character", [&] { einsum("i$j->ij", {m}); }, {"'$'"});
  expect_error<ValueError>("lone dot", [&] { einsum("i.j", {m}); }, {"'.'"});
  expect_error<ValueError>("two ellipses", [&] { einsum("......", {m}); }, {"more than one '...'"});
  expect_error<ValueError>("two arrows", [&] { einsum("ij->ij->ij", {m}); }, {"more than one '->'"});
  expect_error<ValueError>("a stray '-'", [&] { einsum("i-j", {m}); }, {"outside an arrow"});
  expect_error<ValueError>("output repeated", [&] { einsum("ij->ii", {m}); }, {"repeats 'i'"});
  expect_error<ValueError>("output unknown", [&] { einsum("ij->k", {m}); }, {"'k' is in no operand"});
  expect_error<ValueError>("two outputs", [&] { einsum("ij->i,j", {m}); }, {"one output"});
  expect_error<ShapeError>("rank", [&] { einsum("ijk->i", {m}); }, {"operand 0", "(2, 3)", "'ijk'", "exactly 3"});
  expect_error<ShapeError>("rank with ellipsis", [&] { einsum("ijk...->i", {m}); }, {"at least 3"});
  expect_error<ShapeError>("sizes", [&] { einsum("ij,jk->ik", {m, operand({4, 2})}); }, {"'j'", "size 4", "3 before"});
  expect_error<ShapeError>("diagonal", [&] { einsum("ii->i", {m}); }, {"repeats 'i'", "sizes 2 and 3"});
  expect_error<ValueError>("undefined", [&] { einsum("i,i->", {v, Tensor()}); }, {"operand 1", "undefined"});
}

EMBER_CUDA_TEST_CASE("einsum: on a GPU as on the CPU") {
  for (const Case& c : kCases) {
    std::vector<Tensor> cpu, gpu;
    for (const Shape& s : c.shapes) {
      cpu.push_back(operand(s).to(DType::f32));
      gpu.push_back(cpu.back().to(kCuda));
    }
    const Tensor got = einsum(c.equation, gpu);
    CHECK(got.device() == kCuda);
    check_values(got.to(kCPU), to_host(einsum(c.equation, cpu)), tolerance(DType::f32), c.equation);
  }
}
