// The public op front ends. Each checks its arguments (errors show the values), handles dtype
// promotion and broadcasting, and runs a primitive or composes other ops.
#pragma once

#include <optional>
#include <vector>

#include "tensor/deterministic.h"  // set_deterministic, is_deterministic
#include "tensor/random.h"
#include "tensor/scalar.h"
#include "tensor/tensor.h"

namespace ember {

// ---- creation (tensor/factory.cpp)
Tensor empty(const Shape& shape, TensorOptions opts = {});
Tensor zeros(const Shape& shape, TensorOptions opts = {});
Tensor ones(const Shape& shape, TensorOptions opts = {});
Tensor full(const Shape& shape, Scalar value, TensorOptions opts = {});
Tensor zeros_like(const Tensor& t);
Tensor ones_like(const Tensor& t);
Tensor full_like(const Tensor& t, Scalar value);
// [start, end) in steps of `step`; dtype i64 unless given or any bound is floating (then f32).
Tensor arange(Scalar end, std::optional<DType> dtype = {}, Device device = kCPU);
Tensor arange(Scalar start, Scalar end, Scalar step = 1, std::optional<DType> dtype = {}, Device device = kCPU);
// Copies host values into a new tensor of `shape` (numel must match) with dtype_v<T>.
template <class T>
Tensor from_vector(const std::vector<T>& values, const Shape& shape, TensorOptions opts = TensorOptions(dtype_v<T>));
// A 0-dim tensor holding a C++ number; `wrapped` makes it rank lowest in type promotion.
Tensor scalar_tensor(Scalar value, TensorOptions opts = {});
Tensor wrapped_scalar(Scalar value, Device device);
// The result dtype of combining a and b under PyTorch's promotion rules.
DType result_type(const Tensor& a, const Tensor& b);

// ---- random (tensor/random.cpp); default generator unless one is given
Tensor rand(const Shape& shape, TensorOptions opts = {}, Generator* gen = nullptr);   // U[0, 1)
Tensor randn(const Shape& shape, TensorOptions opts = {}, Generator* gen = nullptr);  // N(0, 1)
Tensor randint(int64_t low, int64_t high, const Shape& shape, TensorOptions opts = DType::i64,
               Generator* gen = nullptr);  // uniform in [low, high)

// ---- elementwise unary (tensor/elementwise.cpp)
Tensor neg(const Tensor& x);
Tensor abs(const Tensor& x);
Tensor sign(const Tensor& x);
Tensor exp(const Tensor& x);
Tensor log(const Tensor& x);
Tensor log1p(const Tensor& x);
Tensor sqrt(const Tensor& x);
Tensor rsqrt(const Tensor& x);
Tensor sin(const Tensor& x);
Tensor cos(const Tensor& x);
Tensor tanh(const Tensor& x);
Tensor sigmoid(const Tensor& x);
Tensor relu(const Tensor& x);
Tensor gelu(const Tensor& x, bool tanh_approximation = false);
Tensor silu(const Tensor& x);
Tensor erf(const Tensor& x);
Tensor reciprocal(const Tensor& x);
Tensor square(const Tensor& x);
Tensor clamp(const Tensor& x, std::optional<double> min, std::optional<double> max);
Tensor pow(const Tensor& x, Scalar exponent);

// ---- elementwise binary, broadcasting and promoting
Tensor add(const Tensor& a, const Tensor& b);
Tensor sub(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);  // true division: integers give floats
Tensor pow(const Tensor& a, const Tensor& b);
Tensor maximum(const Tensor& a, const Tensor& b);
Tensor minimum(const Tensor& a, const Tensor& b);
Tensor eq(const Tensor& a, const Tensor& b);
Tensor ne(const Tensor& a, const Tensor& b);
Tensor lt(const Tensor& a, const Tensor& b);
Tensor le(const Tensor& a, const Tensor& b);
Tensor gt(const Tensor& a, const Tensor& b);
Tensor ge(const Tensor& a, const Tensor& b);
Tensor logical_not(const Tensor& x);
Tensor where(const Tensor& condition, const Tensor& a, const Tensor& b);
Tensor masked_fill(const Tensor& x, const Tensor& mask, Scalar value);
// True when every element is finite (the check GradScaler and anomaly mode need).
bool all_finite(const Tensor& x);
// Bitwise-equal shape and values; allclose: |a - b| <= atol + rtol * |b| elementwise.
bool equal(const Tensor& a, const Tensor& b);
bool allclose(const Tensor& a, const Tensor& b, double rtol = 1e-5, double atol = 1e-8);

// Scalar forms: the number becomes a wrapped 0-dim tensor on the tensor's device.
Tensor add(const Tensor& a, Scalar b);
Tensor sub(const Tensor& a, Scalar b);
Tensor mul(const Tensor& a, Scalar b);
Tensor div(const Tensor& a, Scalar b);
Tensor maximum(const Tensor& a, Scalar b);
Tensor minimum(const Tensor& a, Scalar b);
Tensor eq(const Tensor& a, Scalar b);
Tensor ne(const Tensor& a, Scalar b);
Tensor lt(const Tensor& a, Scalar b);
Tensor le(const Tensor& a, Scalar b);
Tensor gt(const Tensor& a, Scalar b);
Tensor ge(const Tensor& a, Scalar b);

Tensor operator-(const Tensor& x);
Tensor operator+(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a, const Tensor& b);
Tensor operator*(const Tensor& a, const Tensor& b);
Tensor operator/(const Tensor& a, const Tensor& b);
Tensor operator+(const Tensor& a, Scalar b);
Tensor operator-(const Tensor& a, Scalar b);
Tensor operator*(const Tensor& a, Scalar b);
Tensor operator/(const Tensor& a, Scalar b);
Tensor operator+(Scalar a, const Tensor& b);
Tensor operator-(Scalar a, const Tensor& b);
Tensor operator*(Scalar a, const Tensor& b);
Tensor operator/(Scalar a, const Tensor& b);

// ---- in place: write into `self` (same shape; the result dtype must fit self's), bump its version
Tensor& add_(Tensor& self, const Tensor& other);
Tensor& sub_(Tensor& self, const Tensor& other);
Tensor& mul_(Tensor& self, const Tensor& other);
Tensor& div_(Tensor& self, const Tensor& other);
Tensor& add_(Tensor& self, Scalar other);
Tensor& sub_(Tensor& self, Scalar other);
Tensor& mul_(Tensor& self, Scalar other);
Tensor& div_(Tensor& self, Scalar other);
Tensor& neg_(Tensor& self);
Tensor& exp_(Tensor& self);
Tensor& relu_(Tensor& self);
Tensor& sigmoid_(Tensor& self);
Tensor& tanh_(Tensor& self);
Tensor& sqrt_(Tensor& self);
Tensor& clamp_(Tensor& self, std::optional<double> min, std::optional<double> max);
Tensor& fill_(Tensor& self, Scalar value);
Tensor& zero_(Tensor& self);
// Copies src (broadcast, converted to self's dtype, any device) into self.
Tensor& copy_(Tensor& self, const Tensor& src, bool non_blocking = false);
Tensor& masked_fill_(Tensor& self, const Tensor& mask, Scalar value);

// ---- conversion and copies (tensor/copy.cpp)
Tensor to(const Tensor& x, DType dtype);  // differentiable cast; returns x itself when dtype matches
Tensor to(const Tensor& x, Device device, bool non_blocking = false);
Tensor contiguous(const Tensor& x);  // x itself when already contiguous
// A copy of a CPU tensor in page-locked memory, which a non-blocking copy to a GPU does not wait
// for; x itself when already pinned. Raises DeviceError when no CUDA device is visible.
Tensor pin_memory(const Tensor& x);
Tensor clone(const Tensor& x);

// ---- views and shape ops (tensor/view.cpp); views share storage with their input
Tensor view(const Tensor& x, const Shape& shape);  // one dim may be -1; fails if strides forbid it
Tensor reshape(const Tensor& x, const Shape& shape);  // a view when possible, else a copy
Tensor permute(const Tensor& x, const Shape& dims);
Tensor transpose(const Tensor& x, int64_t dim0, int64_t dim1);
Tensor narrow(const Tensor& x, int64_t dim, int64_t start, int64_t length);
// Elements start, start+step, ... below end (end clamped to the size, negatives wrap).
Tensor slice(const Tensor& x, int64_t dim, int64_t start, int64_t end, int64_t step = 1);
Tensor select(const Tensor& x, int64_t dim, int64_t index);
Tensor expand(const Tensor& x, const Shape& shape);  // -1 keeps a size
Tensor broadcast_to(const Tensor& x, const Shape& shape);
Tensor squeeze(const Tensor& x);
Tensor squeeze(const Tensor& x, int64_t dim);
Tensor unsqueeze(const Tensor& x, int64_t dim);
Tensor flatten(const Tensor& x, int64_t start_dim = 0, int64_t end_dim = -1);
// Sums x down to `shape` (the inverse of broadcasting), as vjps of broadcasting ops need.
Tensor sum_to(const Tensor& x, const Shape& shape);
Tensor cat(const std::vector<Tensor>& tensors, int64_t dim = 0);
Tensor stack(const std::vector<Tensor>& tensors, int64_t dim = 0);
std::vector<Tensor> split(const Tensor& x, int64_t split_size, int64_t dim = 0);
std::vector<Tensor> split_with_sizes(const Tensor& x, const std::vector<int64_t>& sizes, int64_t dim = 0);
std::vector<Tensor> chunk(const Tensor& x, int64_t chunks, int64_t dim = 0);

// ---- indexing (tensor/index.cpp); indices are i64 (or i32) tensors
Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index);
// out = self with src's slices added at `index` along dim.
Tensor index_add(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src);
Tensor gather(const Tensor& x, int64_t dim, const Tensor& index);
Tensor scatter_add(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src);

// ---- reductions (tensor/reduce.cpp); empty dims = all dims
// A given dtype converts x to it first (and turns autocast off for the call, as in PyTorch).
Tensor sum(const Tensor& x, const Shape& dims = {}, bool keepdim = false, std::optional<DType> dtype = {});
Tensor mean(const Tensor& x, const Shape& dims = {}, bool keepdim = false);
Tensor prod(const Tensor& x, const Shape& dims = {}, bool keepdim = false, std::optional<DType> dtype = {});
Tensor amax(const Tensor& x, const Shape& dims = {}, bool keepdim = false);
Tensor amin(const Tensor& x, const Shape& dims = {}, bool keepdim = false);
struct ValuesIndices {
  Tensor values;
  Tensor indices;
};
ValuesIndices max(const Tensor& x, int64_t dim, bool keepdim = false);
ValuesIndices min(const Tensor& x, int64_t dim, bool keepdim = false);
Tensor max(const Tensor& x);  // over all elements
Tensor min(const Tensor& x);
Tensor argmax(const Tensor& x, std::optional<int64_t> dim = {}, bool keepdim = false);
Tensor argmin(const Tensor& x, std::optional<int64_t> dim = {}, bool keepdim = false);
// Variance with Bessel-style `correction` (1 = unbiased, PyTorch's default).
Tensor var(const Tensor& x, const Shape& dims = {}, int64_t correction = 1, bool keepdim = false);
Tensor std(const Tensor& x, const Shape& dims = {}, int64_t correction = 1, bool keepdim = false);
Tensor logsumexp(const Tensor& x, const Shape& dims, bool keepdim = false);
// p-norm over dims; p = infinity gives max |x|.
Tensor norm(const Tensor& x, double p = 2.0, const Shape& dims = {}, bool keepdim = false);

// ---- linear algebra and softmax (tensor/linalg.cpp, tensor/softmax.cpp)
// PyTorch's matmul: 1-D operands are promoted and squeezed back; batch dims broadcast.
Tensor matmul(const Tensor& a, const Tensor& b);
Tensor mm(const Tensor& a, const Tensor& b);   // (n,k) @ (k,m)
Tensor bmm(const Tensor& a, const Tensor& b);  // (b,n,k) @ (b,k,m)
// x (..., in) w^T + b with w (out, in) and b (out) or undefined, as torch.nn.functional.linear: one
// GEMM with the bias added in its output pass (matmul(x, w.t()) + b computes the same).
Tensor linear(const Tensor& x, const Tensor& w, const Tensor& b = {});
// A given dtype converts x to it first (and turns autocast off for the call, as in PyTorch).
Tensor softmax(const Tensor& x, int64_t dim, std::optional<DType> dtype = {});
Tensor log_softmax(const Tensor& x, int64_t dim, std::optional<DType> dtype = {});

// ---- threads (cpu/threads.cpp): the one place that sets the CPU thread count (OpenMP, BLAS)
// ValueError below 1 or above 4096 (OpenMP would abort the process when it cannot start them).
void set_num_threads(int n);
int get_num_threads();
// The deterministic mode, set_deterministic(bool) and is_deterministic(), is declared in
// tensor/deterministic.h (included above): CPU results then do not depend on the thread count.
// What multiplies f32/f64 matrices on the CPU now (cpu/gemm.cpp): "OpenBLAS (<its kernels' core
// type>)", "CBLAS", "Eigen", or in deterministic mode "ember deterministic (<instruction set>)".
std::string cpu_gemm_name();

}  // namespace ember
