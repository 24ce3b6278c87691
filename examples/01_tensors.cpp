// 01_tensors: what an ember Tensor is. Creation and seeded random numbers; dtypes and PyTorch's
// promotion rules (a 0-dim tensor or a C++ number does not widen a tensor); views, which share
// storage and differ only in shape, strides and offset; broadcasting, whose strides of 0 let a
// (3, 1) and a (4) tensor act as (3, 4) without copying; and printing. Each fact is checked, so the
// program fails if the library stops behaving as described.
//
// Read next: tensor/tensor.h (Tensor, TensorImpl: storage + offset + shape + strides + dtype),
// tensor/ops.h (every op's front end), tensor/view.cpp (view, transpose, expand: new strides over the
// same storage), tensor/shape.cpp (broadcast_shapes), tensor/dtype.cpp (promote_types),
// tensor/print.cpp (PyTorch's print format).
//
//   ninja -C build examples/01_tensors && build/examples/01_tensors
#include <CLI/CLI.hpp>

#include <cmath>
#include <iostream>

#include "checks.h"
#include "tensor/ops.h"

using namespace ember;
using ember_examples::Checks;
using ember_examples::run_checked;

namespace {

bool same_storage(const Tensor& a, const Tensor& b) { return a.storage().get() == b.storage().get(); }

void creation(Checks& checks) {
  std::cout << "\n== creation\n";
  const Tensor a = arange(6, DType::f32).reshape({2, 3});
  std::cout << "arange(6).reshape({2, 3}) = " << a << "\n";
  std::cout << "full({2, 2}, 7) = " << full({2, 2}, 7) << "\n";
  std::cout << "from_vector<int>({1, 2, 3}, {3}) = " << from_vector<int32_t>({1, 2, 3}, {3}) << "\n";
  checks.expect(zeros({2, 3}).dtype() == DType::f32 && arange(3).dtype() == DType::i64,
                "factories default to float32, arange over whole numbers to int64 (as PyTorch)");
  // Random numbers come from a counter-based generator (Philox): a seed and a position name them.
  Generator g1(42), g2(42);
  const Tensor r1 = randn({4}, {}, &g1), r2 = randn({4}, {}, &g2);
  std::cout << "randn({4}) with seed 42 = " << r1 << "\n";
  checks.expect(equal(r1, r2), "two generators with the same seed draw the same numbers");
  checks.expect(!equal(r1, randn({4}, {}, &g1)), "a generator moves on after each draw");
}

void dtypes(Checks& checks) {
  std::cout << "\n== dtypes and promotion\n";
  const Tensor i = arange(3);  // int64
  const Tensor f = ones({3});  // float32
  checks.expect((i + f).dtype() == DType::f32, "int64 + float32 tensor -> float32 (a floating category wins)");
  checks.expect((i + 0.5).dtype() == DType::f32, "int64 + a C++ double -> float32, the default float, not float64");
  checks.expect((f + ones({3}, DType::f64)).dtype() == DType::f64, "float32 + float64 tensor -> float64");
  const Tensor h = ones({3}, DType::f16);
  checks.expect((h + scalar_tensor(2.0, DType::f64)).dtype() == DType::f16,
                "float16 + a 0-dim float64 tensor -> float16: a 0-dim tensor does not widen");
  checks.expect(result_type(h, ones({2}, DType::bf16)) == DType::f32, "float16 with bfloat16 -> float32");
  // f16 keeps 11 significant bits: 1/3 is stored as the nearest of them.
  const double third = full({1}, 1.0 / 3, DType::f16).item<double>();
  std::cout << "1/3 in float16 = " << third << ", in float32 = " << full({1}, 1.0 / 3).item<double>() << "\n";
  checks.expect(std::fabs(third - 1.0 / 3) < 1.0 / 2048 && third != 1.0 / 3,
                "float16 rounds 1/3 to within half a unit of its 11th bit");
}

void views(Checks& checks) {
  std::cout << "\n== views share storage\n";
  Tensor a = arange(6, DType::f32).reshape({2, 3});
  const Tensor t = a.transpose(0, 1);
  std::cout << "a.strides() = " << to_string(a.strides()) << ", a.transpose(0, 1).strides() = "
            << to_string(t.strides()) << "\n";
  checks.expect(same_storage(a, t) && t.shape() == Shape{3, 2} && t.strides() == Strides{1, 3},
                "transpose swaps shape and strides over the same storage, copying nothing");
  checks.expect(!t.is_contiguous() && !same_storage(t, t.contiguous()),
                "a transposed tensor is not contiguous; contiguous() copies it into new storage");
  Tensor row = a.select(0, 1);  // the second row: offset 3, stride 1
  fill_(row, 100);
  std::cout << "after fill_(a.select(0, 1), 100): a = " << a << "\n";
  checks.expect(a.to_vector<float>() == std::vector<float>{0, 1, 2, 100, 100, 100},
                "writing through a view writes the base");
  const Tensor every_other = slice(a, 1, 0, 3, 2);
  checks.expect(same_storage(a, every_other) && every_other.strides() == Strides{3, 2},
                "slice with a step is a view with a wider stride");
  bool refused = false;
  try {
    (void)t.view({6});
  } catch (const ShapeError& e) {
    refused = true;
    std::cout << "t.view({6}) refused: " << e.what() << "\n";
  }
  checks.expect(refused, "view() refuses strides it cannot express without a copy");
  checks.expect(!same_storage(t, t.reshape({6})), "reshape() copies where view() cannot");
  // The version counter is how autograd notices an in-place write to a tensor it saved.
  const uint64_t before = a.version();
  add_(a, 1.0);
  checks.expect(a.version() == before + 1 && row.version() == a.version(),
                "an in-place op bumps the storage's version, seen by every view");
}

void broadcasting(Checks& checks) {
  std::cout << "\n== broadcasting\n";
  // Shapes are aligned from the right; a dim of 1 (or a missing one) stretches to the other's size.
  const Tensor col = arange(3, DType::f32).reshape({3, 1});
  const Tensor row = mul(arange(4, DType::f32), 10.0);
  const Tensor sum = col + row;  // (3, 1) + (4) -> (3, 4)
  std::cout << "(3, 1) + (4) = " << sum << "\n";
  bool each = sum.shape() == Shape{3, 4};
  const auto c = col.to_vector<float>(), r = row.to_vector<float>(), s = sum.to_vector<float>();
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 4; ++j) each = each && s[i * 4 + j] == c[i] + r[j];
  checks.expect(each, "(3, 1) + (4) -> (3, 4) with out[i][j] = col[i] + row[j]");
  const Tensor stretched = col.expand({3, 4});
  checks.expect(same_storage(col, stretched) && stretched.strides() == Strides{1, 0},
                "expand is a view whose stretched dim has stride 0: nothing is copied");
  checks.expect(sum_to(ones({3, 4}), {3, 1}).to_vector<float>() == std::vector<float>{4, 4, 4},
                "sum_to undoes broadcasting (what the vjp of a broadcasting op does to a gradient)");
  bool refused = false;
  try {
    (void)(ones({3}) + ones({4}));
  } catch (const ShapeError& e) {
    refused = true;
    std::cout << "ones({3}) + ones({4}) refused: " << e.what() << "\n";
  }
  checks.expect(refused, "sizes that differ and are not 1 do not broadcast (ShapeError)");
}

void printing(Checks& checks) {
  std::cout << "\n== printing\n";
  const Tensor big = arange(2000, DType::f32);
  const std::string text = big.str();
  std::cout << "arange(2000.) prints as " << text << "\n";
  checks.expect(text.find("...") != std::string::npos, "tensors over 1000 elements print summarised, as PyTorch's");
  Tensor x = ones({2}, TensorOptions().with_requires_grad());
  std::cout << "x * 2 with x requiring grad = " << x * 2 << "\n";
  checks.expect((x * 2).str().find("grad_fn=<mul>") != std::string::npos,
                "a result of a recorded op names its grad_fn");
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Step 1 of the example ladder: tensors, dtypes, views and broadcasting, each fact checked.",
               "01_tensors"};
  CLI11_PARSE(app, argc, argv);
  return run_checked("01_tensors", [&](Checks& checks) {
    creation(checks);
    dtypes(checks);
    views(checks);
    broadcasting(checks);
    printing(checks);
  });
}
