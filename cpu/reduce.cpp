// CPU kernels of the reduction primitives.
#include "cpu/reduce.h"

#include "autograd/grad_mode.h"
#include "cpu/parallel.h"
#include "tensor/convert.h"
#include "tensor/ops.h"
#include "tensor/primitives/reduce.h"

namespace ember {

namespace cpu {
ReductionRows reduction_rows(const Tensor& x, const Shape& dims) {
  NoGradGuard no_grad;
  std::vector<bool> reduced(x.dim(), dims.empty());
  for (int64_t d : dims) reduced[d] = true;
  Shape order;
  int64_t row_len = 1;
  for (int i = 0; i < x.dim(); ++i)
    if (!reduced[i]) order.push_back(i);
  for (int i = 0; i < x.dim(); ++i)
    if (reduced[i]) {
      order.push_back(i);
      row_len *= x.shape()[i];
    }
  Tensor data = permute(x, order).contiguous();
  const int64_t rows = row_len == 0 ? numel(reduced_shape(x.shape(), dims, false)) : x.numel() / row_len;
  return {data, rows, row_len};
}
}  // namespace cpu

namespace {
// Integers and bool accumulate in int64, floats in double.
template <class T>
using accumulate_t = std::conditional_t<is_float_type_v<T>, double, int64_t>;
}  // namespace

void Sum::eval_cpu(const std::vector<Tensor>& in, std::vector<Tensor>& out) {
  const cpu::ReductionRows r = cpu::reduction_rows(in[0], dims_);
  visit(in[0].dtype(), [&]<class T>() {
    using A = accumulate_t<T>;
    visit(out[0].dtype(), [&]<class O>() {
      const T* x = r.data.data<T>();
      O* y = out[0].data<O>();
      cpu::parallel_for(r.rows, r.row_len, [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) {
          A acc = 0;
          const T* row = x + i * r.row_len;
          for (int64_t j = 0; j < r.row_len; ++j) acc += static_cast<A>(static_cast<compute_t<T>>(row[j]));
          y[i] = convert<O>(acc);
        }
      });
    });
  });
}

}  // namespace ember
