/// @file
/// The public op front ends. Each checks its arguments (errors show the values), handles dtype
/// promotion and broadcasting, and runs a primitive or composes other ops.
///
/// Rules shared by the elementwise ops: binary ops broadcast their operands (NumPy rules; ShapeError
/// naming both shapes otherwise) and compute in the dtype result_type() gives; math that needs
/// fractions (exp, log, sqrt, sigmoid, ...) turns integer inputs into float32; arithmetic on bool
/// tensors raises DTypeError. Every op records itself for backward when grad mode is on and an input
/// requires grad.
#pragma once

#include <optional>
#include <vector>

#include "tensor/deterministic.h"  // set_deterministic, is_deterministic
#include "tensor/random.h"
#include "tensor/scalar.h"
#include "tensor/tensor.h"

namespace ember {

// ---- creation (tensor/factory.cpp)
Tensor empty(const Shape& shape, TensorOptions opts = {});  ///< A new tensor of `shape`, its values uninitialised.
Tensor zeros(const Shape& shape, TensorOptions opts = {});  ///< A new tensor of `shape` filled with 0.
Tensor ones(const Shape& shape, TensorOptions opts = {});   ///< A new tensor of `shape` filled with 1.
/// A new tensor of `shape` filled with `value`.
Tensor full(const Shape& shape, Scalar value, TensorOptions opts = {});
Tensor zeros_like(const Tensor& t);               ///< Zeros of t's shape, dtype and device.
Tensor ones_like(const Tensor& t);                ///< Ones of t's shape, dtype and device.
Tensor full_like(const Tensor& t, Scalar value);  ///< `value` in t's shape, dtype and device.
/// [0, end) in steps of 1: arange(0, end, 1, dtype, device).
Tensor arange(Scalar end, std::optional<DType> dtype = {}, Device device = kCPU);
/// [start, end) in steps of `step`; dtype i64 unless given or any bound is floating (then f32).
/// ValueError for a zero step or one that leads away from end.
Tensor arange(Scalar start, Scalar end, Scalar step = 1, std::optional<DType> dtype = {}, Device device = kCPU);
/// Copies host values into a new tensor of `shape`, converted to opts.dtype (by default the dtype of T)
/// and moved to opts.device; ShapeError when the count does not fill the shape.
template <class T>
Tensor from_vector(const std::vector<T>& values, const Shape& shape, TensorOptions opts = TensorOptions(dtype_v<T>));
/// A 0-dim tensor holding a C++ number.
Tensor scalar_tensor(Scalar value, TensorOptions opts = {});
/// A 0-dim tensor marked as a wrapped C++ number (f64, i64 or bool), which ranks lowest in promotion.
Tensor wrapped_scalar(Scalar value, Device device);
/// The result dtype of combining a and b under PyTorch's promotion rules.
DType result_type(const Tensor& a, const Tensor& b);

// ---- random (tensor/random.cpp); default generator unless one is given
/// A new tensor of `shape` drawn uniformly from [0, 1), from `gen` or else the default generator.
Tensor rand(const Shape& shape, TensorOptions opts = {}, Generator* gen = nullptr);
/// A new tensor of `shape` drawn from the standard normal N(0, 1), from `gen` or else the default generator.
Tensor randn(const Shape& shape, TensorOptions opts = {}, Generator* gen = nullptr);
Tensor randint(int64_t low, int64_t high, const Shape& shape, TensorOptions opts = DType::i64,
               Generator* gen = nullptr);  ///< uniform in [low, high)

// ---- elementwise unary (tensor/elementwise.cpp)
Tensor neg(const Tensor& x);      ///< -x.
Tensor abs(const Tensor& x);      ///< |x|.
Tensor sign(const Tensor& x);     ///< -1, 0 or 1 by the sign of x.
Tensor exp(const Tensor& x);      ///< e^x.
Tensor log(const Tensor& x);      ///< Natural logarithm.
Tensor log1p(const Tensor& x);    ///< log(1 + x), accurate for small x.
Tensor sqrt(const Tensor& x);     ///< Square root.
Tensor rsqrt(const Tensor& x);    ///< 1 / sqrt(x).
Tensor sin(const Tensor& x);      ///< Sine (radians).
Tensor cos(const Tensor& x);      ///< Cosine (radians).
Tensor tanh(const Tensor& x);     ///< Hyperbolic tangent.
Tensor sigmoid(const Tensor& x);  ///< 1 / (1 + e^-x).
Tensor relu(const Tensor& x);     ///< max(x, 0).
/// x * Phi(x) with the erf form, or PyTorch's tanh approximation.
Tensor gelu(const Tensor& x, bool tanh_approximation = false);
Tensor silu(const Tensor& x);        ///< x * sigmoid(x).
Tensor erf(const Tensor& x);         ///< The error function.
Tensor reciprocal(const Tensor& x);  ///< 1 / x.
Tensor square(const Tensor& x);      ///< x * x.
/// x limited to [min, max]; ValueError when neither bound is given.
Tensor clamp(const Tensor& x, std::optional<double> min, std::optional<double> max);
/// x limited by tensor bounds that broadcast with it (an undefined one is absent; ValueError when
/// both are): minimum(maximum(x, min), max), so a tie splits the gradient and NaN propagates.
Tensor clamp(const Tensor& x, const Tensor& min, const Tensor& max);
/// x^exponent; integer x to an integer exponent stays integral (ValueError for a negative one).
Tensor pow(const Tensor& x, Scalar exponent);

// ---- elementwise binary, broadcasting and promoting
Tensor add(const Tensor& a, const Tensor& b);      ///< a + b.
Tensor sub(const Tensor& a, const Tensor& b);      ///< a - b.
Tensor mul(const Tensor& a, const Tensor& b);      ///< a * b.
Tensor div(const Tensor& a, const Tensor& b);      ///< a / b, true division: integer operands give floats.
/// How div(a, b, mode) rounds the quotient: toward zero or down (PyTorch's rounding_mode).
enum class RoundingMode { trunc, floor };
/// a / b rounded as `mode` says, in the operands' promoted dtype (integers stay integers, and an
/// integer zero divisor is a ValueError); its gradient is zero.
Tensor div(const Tensor& a, const Tensor& b, RoundingMode mode);
Tensor div(const Tensor& a, Scalar b, RoundingMode mode);  ///< div(a, b, mode) for a number b.
Tensor pow(const Tensor& a, const Tensor& b);      ///< a^b elementwise.
Tensor maximum(const Tensor& a, const Tensor& b);  ///< The larger of a and b elementwise.
Tensor minimum(const Tensor& a, const Tensor& b);  ///< The smaller of a and b elementwise.
Tensor eq(const Tensor& a, const Tensor& b);       ///< a == b, as a bool tensor.
Tensor ne(const Tensor& a, const Tensor& b);       ///< a != b, as a bool tensor.
Tensor lt(const Tensor& a, const Tensor& b);       ///< a < b, as a bool tensor.
Tensor le(const Tensor& a, const Tensor& b);       ///< a <= b, as a bool tensor.
Tensor gt(const Tensor& a, const Tensor& b);       ///< a > b, as a bool tensor.
Tensor ge(const Tensor& a, const Tensor& b);       ///< a >= b, as a bool tensor.
Tensor logical_not(const Tensor& x);               ///< True where x is zero (false), as a bool tensor.
/// a where condition (a bool tensor; DTypeError otherwise) is true, else b; all three broadcast.
Tensor where(const Tensor& condition, const Tensor& a, const Tensor& b);
/// x with `value` where the bool `mask` (broadcast to x) is true.
Tensor masked_fill(const Tensor& x, const Tensor& mask, Scalar value);
/// The same with a 0-dim tensor value (ShapeError otherwise), which gets the gradient of the filled places.
Tensor masked_fill(const Tensor& x, const Tensor& mask, const Tensor& value);
/// True when every element is finite (the check GradScaler and anomaly mode need).
bool all_finite(const Tensor& x);
/// Whether a and b have the same shape and bitwise-equal values.
bool equal(const Tensor& a, const Tensor& b);
/// Whether |a - b| <= atol + rtol * |b| for every element (a and b broadcast).
bool allclose(const Tensor& a, const Tensor& b, double rtol = 1e-5, double atol = 1e-8);

/// a + b. In the scalar forms the number becomes a wrapped 0-dim tensor on a's device, which does
/// not widen a's dtype (an f16 x * 0.1 stays f16) but makes an integer tensor float when it is one.
Tensor add(const Tensor& a, Scalar b);
Tensor sub(const Tensor& a, Scalar b);      ///< a - b.
/// a + alpha * b, rounded once (16-bit operands compute in f32). A floating alpha with integer
/// operands is a DTypeError, as in PyTorch.
Tensor add(const Tensor& a, const Tensor& b, Scalar alpha);
Tensor sub(const Tensor& a, const Tensor& b, Scalar alpha);  ///< a - alpha * b, as add's alpha.
Tensor rsub(const Tensor& a, const Tensor& b, Scalar alpha = 1);  ///< b - alpha * a (torch.rsub).
Tensor rsub(const Tensor& a, Scalar b, Scalar alpha = 1);         ///< b - alpha * a for a number b.
Tensor mul(const Tensor& a, Scalar b);      ///< a * b.
Tensor div(const Tensor& a, Scalar b);      ///< a / b (true division).
Tensor maximum(const Tensor& a, Scalar b);  ///< max(a, b) elementwise.
Tensor minimum(const Tensor& a, Scalar b);  ///< min(a, b) elementwise.
Tensor eq(const Tensor& a, Scalar b);       ///< a == b, as a bool tensor.
Tensor ne(const Tensor& a, Scalar b);       ///< a != b, as a bool tensor.
Tensor lt(const Tensor& a, Scalar b);       ///< a < b, as a bool tensor.
Tensor le(const Tensor& a, Scalar b);       ///< a <= b, as a bool tensor.
Tensor gt(const Tensor& a, Scalar b);       ///< a > b, as a bool tensor.
Tensor ge(const Tensor& a, Scalar b);       ///< a >= b, as a bool tensor.

Tensor operator-(const Tensor& x);                   ///< neg(x).
Tensor operator+(const Tensor& a, const Tensor& b);  ///< add(a, b).
Tensor operator-(const Tensor& a, const Tensor& b);  ///< sub(a, b).
Tensor operator*(const Tensor& a, const Tensor& b);  ///< mul(a, b).
Tensor operator/(const Tensor& a, const Tensor& b);  ///< div(a, b).
Tensor operator+(const Tensor& a, Scalar b);         ///< add(a, b).
Tensor operator-(const Tensor& a, Scalar b);         ///< sub(a, b).
Tensor operator*(const Tensor& a, Scalar b);         ///< mul(a, b).
Tensor operator/(const Tensor& a, Scalar b);         ///< div(a, b).
Tensor operator+(Scalar a, const Tensor& b);         ///< a + b, a a wrapped 0-dim tensor.
Tensor operator-(Scalar a, const Tensor& b);         ///< a - b, a a wrapped 0-dim tensor.
Tensor operator*(Scalar a, const Tensor& b);         ///< a * b, a a wrapped 0-dim tensor.
Tensor operator/(Scalar a, const Tensor& b);         ///< a / b, a a wrapped 0-dim tensor.

// ---- in place: write into `self` (same shape; the result dtype must fit self's), bump its version
Tensor& add_(Tensor& self, const Tensor& other);  ///< self += other.
Tensor& sub_(Tensor& self, const Tensor& other);  ///< self -= other.
Tensor& mul_(Tensor& self, const Tensor& other);  ///< self *= other.
Tensor& div_(Tensor& self, const Tensor& other);  ///< self /= other.
Tensor& add_(Tensor& self, Scalar other);         ///< self += other.
Tensor& sub_(Tensor& self, Scalar other);         ///< self -= other.
Tensor& mul_(Tensor& self, Scalar other);         ///< self *= other.
Tensor& div_(Tensor& self, Scalar other);         ///< self /= other.
Tensor& neg_(Tensor& self);                       ///< self = -self.
Tensor& exp_(Tensor& self);                       ///< self = e^self.
Tensor& relu_(Tensor& self);                      ///< self = max(self, 0).
Tensor& sigmoid_(Tensor& self);                   ///< self = sigmoid(self).
Tensor& tanh_(Tensor& self);                      ///< self = tanh(self).
Tensor& sqrt_(Tensor& self);                      ///< self = sqrt(self).
/// self limited to [min, max]; ValueError when neither bound is given.
Tensor& clamp_(Tensor& self, std::optional<double> min, std::optional<double> max);
Tensor& fill_(Tensor& self, Scalar value);  ///< Sets every element of self to `value`.
Tensor& zero_(Tensor& self);                ///< Sets every element of self to 0.
/// Copies src (broadcast, converted to self's dtype, any device) into self.
Tensor& copy_(Tensor& self, const Tensor& src, bool non_blocking = false);
/// Writes `value` into self where the bool `mask` (broadcast to self) is true.
Tensor& masked_fill_(Tensor& self, const Tensor& mask, Scalar value);

// ---- conversion and copies (tensor/copy.cpp)
Tensor to(const Tensor& x, DType dtype);  ///< differentiable cast; returns x itself when dtype matches
/// x copied to `device` (x itself when already there); DeviceError for a GPU that is not visible.
Tensor to(const Tensor& x, Device device, bool non_blocking = false);
Tensor contiguous(const Tensor& x);  ///< x itself when already contiguous
/// A copy of a CPU tensor in page-locked memory, which a non-blocking copy to a GPU does not wait
/// for; x itself when already pinned. Raises DeviceError when no CUDA device is visible.
Tensor pin_memory(const Tensor& x);
Tensor clone(const Tensor& x);  ///< A contiguous copy of x with its own storage (differentiable).

// ---- views and shape ops (tensor/view.cpp); views share storage with their input
/// A view of x with another shape (one size may be -1, inferred from the others); ShapeError when x's
/// strides cannot be viewed so (reshape copies then).
Tensor view(const Tensor& x, const Shape& shape);
/// x with another shape (one size may be -1): a view when the strides allow, else a copy.
Tensor reshape(const Tensor& x, const Shape& shape);
/// A view with the dims reordered: dim i of the result is dim dims[i] of x.
Tensor permute(const Tensor& x, const Shape& dims);
Tensor transpose(const Tensor& x, int64_t dim0, int64_t dim1);  ///< A view with dims dim0 and dim1 swapped.
/// A view of elements [start, start + length) along dim; IndexError when out of range.
Tensor narrow(const Tensor& x, int64_t dim, int64_t start, int64_t length);
/// A view of elements start, start+step, ... below end (end clamped to the size, negatives wrap).
Tensor slice(const Tensor& x, int64_t dim, int64_t start, int64_t end, int64_t step = 1);
/// A view of slice `index` along dim, without that dim; IndexError when out of range.
Tensor select(const Tensor& x, int64_t dim, int64_t index);
/// A view of x broadcast to a larger shape, without a copy: sizes of 1 grow, a size of -1 keeps x's,
/// and new dims go in front.
Tensor expand(const Tensor& x, const Shape& shape);
Tensor broadcast_to(const Tensor& x, const Shape& shape);  ///< expand() to a shape written out in full.
Tensor squeeze(const Tensor& x);                 ///< A view without the dims of size 1.
Tensor squeeze(const Tensor& x, int64_t dim);    ///< A view without dim when its size is 1 (x itself otherwise).
/// A view without those of `dims` whose size is 1 (the others stay); IndexError for a dim out of
/// range, ShapeError for one given twice.
Tensor squeeze(const Tensor& x, const Shape& dims);
Tensor unsqueeze(const Tensor& x, int64_t dim);  ///< A view with a new dim of size 1 at position dim.
/// Dims start_dim..end_dim merged into one (a view when strides allow, as reshape).
Tensor flatten(const Tensor& x, int64_t start_dim = 0, int64_t end_dim = -1);
/// Sums x down to `shape` (the inverse of broadcasting), as vjps of broadcasting ops need.
Tensor sum_to(const Tensor& x, const Shape& shape);
/// The tensors joined along an existing dim; they must agree in dtype and in every other dim.
Tensor cat(const std::vector<Tensor>& tensors, int64_t dim = 0);
/// The tensors (all of one shape) joined along a new dim.
Tensor stack(const std::vector<Tensor>& tensors, int64_t dim = 0);
/// x with `value` added around it, as torch.nn.functional.pad in constant mode: pads holds (before,
/// after) pairs from the last dim backwards ({left, right, top, bottom} pads a 2-D image); a negative
/// amount removes elements. ShapeError for an odd count, more pairs than dims or a size below 0.
Tensor pad(const Tensor& x, const std::vector<int64_t>& pads, Scalar value = 0.0);
/// Views of split_size elements along dim each (the last may be shorter).
std::vector<Tensor> split(const Tensor& x, int64_t split_size, int64_t dim = 0);
/// Views of the given sizes along dim, which must sum to its size.
std::vector<Tensor> split_with_sizes(const Tensor& x, const std::vector<int64_t>& sizes, int64_t dim = 0);
/// At most `chunks` views of equal size along dim (the last may be shorter).
std::vector<Tensor> chunk(const Tensor& x, int64_t chunks, int64_t dim = 0);

// ---- indexing (tensor/index.cpp); indices are i64 (or i32) tensors
/// The slices of x along dim at the 1-D `index`, in that order.
Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index);
/// out = self with src's slices added at `index` along dim. A 0-dim input of index_select, gather or
/// scatter_add is indexed as a one-element vector along dim 0 or -1, and the result is 0-dim.
Tensor index_add(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src);
/// out = self + alpha * (src's slices at index); alpha as add's.
Tensor index_add(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src, Scalar alpha);
/// out[i][j] = x[index[i][j]][j] for dim 0 (likewise for other dims); index has x's rank and may also
/// be uint8.
Tensor gather(const Tensor& x, int64_t dim, const Tensor& index);
/// out = self with src added at `index` along dim (the reverse of gather); repeated indices add up.
Tensor scatter_add(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src);

// ---- reductions (tensor/reduce.cpp); empty dims = all dims
/// The sum over dims. A given dtype converts x to it first (and turns autocast off for the call, as
/// in PyTorch); 16-bit inputs accumulate in f32.
Tensor sum(const Tensor& x, const Shape& dims = {}, bool keepdim = false, std::optional<DType> dtype = {});
/// The mean over dims (floating x only; DTypeError otherwise); 16-bit inputs accumulate in f32.
Tensor mean(const Tensor& x, const Shape& dims = {}, bool keepdim = false);
/// The product over dims; a given dtype converts x to it first.
Tensor prod(const Tensor& x, const Shape& dims = {}, bool keepdim = false, std::optional<DType> dtype = {});
Tensor amax(const Tensor& x, const Shape& dims = {}, bool keepdim = false);  ///< The maximum over dims.
Tensor amin(const Tensor& x, const Shape& dims = {}, bool keepdim = false);  ///< The minimum over dims.
/// What max(x, dim) and min(x, dim) return: the values and, as i64, where they are.
struct ValuesIndices {
  Tensor values;   ///< the extreme values
  Tensor indices;  ///< their positions along the dim (i64)
};
/// The maximum along dim and where it is (the first index on ties).
ValuesIndices max(const Tensor& x, int64_t dim, bool keepdim = false);
/// The minimum along dim and where it is (the first index on ties).
ValuesIndices min(const Tensor& x, int64_t dim, bool keepdim = false);
Tensor max(const Tensor& x);  ///< over all elements
Tensor min(const Tensor& x);  ///< The minimum over all elements.
/// The i64 index of the maximum along dim, or into the flattened x when no dim is given.
Tensor argmax(const Tensor& x, std::optional<int64_t> dim = {}, bool keepdim = false);
/// The i64 index of the minimum along dim, or into the flattened x when no dim is given.
Tensor argmin(const Tensor& x, std::optional<int64_t> dim = {}, bool keepdim = false);
/// The variance over dims: the sum of squared deviations over max(N - correction, 0), N the count
/// (1 = Bessel's unbiased form, PyTorch's default; any real correction, as PyTorch's).
Tensor var(const Tensor& x, const Shape& dims = {}, double correction = 1, bool keepdim = false);
/// sqrt(var(x, dims, correction)).
Tensor std(const Tensor& x, const Shape& dims = {}, double correction = 1, bool keepdim = false);
/// log(sum(exp(x))) over dims, computed without overflow.
Tensor logsumexp(const Tensor& x, const Shape& dims, bool keepdim = false);
/// The p-norm over dims; p = infinity gives max |x|.
Tensor norm(const Tensor& x, double p = 2.0, const Shape& dims = {}, bool keepdim = false);

// ---- cumulative ops (tensor/scan.cpp)
/// The inclusive cumulative sum along dim: out[..., i, ...] = x[..., 0, ...] + ... + x[..., i, ...].
/// The result is `dtype` when given (x converted first; bool is refused), else x's floating dtype, else
/// i64 (integer and bool inputs, as PyTorch). 16-bit inputs accumulate in f32.
Tensor cumsum(const Tensor& x, int64_t dim, std::optional<DType> dtype = {});
/// The inclusive cumulative product along dim, with cumsum's dtype rule (16-bit inputs multiply in
/// f32). log2(n) multiplications of the whole tensor (n its size along dim), whose gradient is exact
/// where x has zeros.
Tensor cumprod(const Tensor& x, int64_t dim, std::optional<DType> dtype = {});

// ---- linear algebra and softmax (tensor/linalg.cpp, tensor/softmax.cpp)
/// PyTorch's matmul: 1-D operands are promoted and squeezed back; batch dims broadcast.
Tensor matmul(const Tensor& a, const Tensor& b);
Tensor mm(const Tensor& a, const Tensor& b);   ///< The matrix product of a (n, k) and b (k, m): (n, m).
Tensor bmm(const Tensor& a, const Tensor& b);  ///< The batched matrix product of (B, n, k) and (B, k, m): (B, n, m).
/// x (..., in) w^T + b with w (out, in) and b (out) or undefined, as torch.nn.functional.linear: one
/// GEMM with the bias added in its output pass (matmul(x, w.t()) + b computes the same). A 1-D w
/// (in) gives x @ w of shape (...), with a 0-dim b.
Tensor linear(const Tensor& x, const Tensor& w, const Tensor& b = {});
/// exp(x) / sum(exp(x)) along dim, computed without overflow. A given dtype converts x to it first
/// (and turns autocast off for the call, as in PyTorch).
Tensor softmax(const Tensor& x, int64_t dim, std::optional<DType> dtype = {});
/// log(softmax(x)) along dim, computed without overflow; `dtype` as softmax's.
Tensor log_softmax(const Tensor& x, int64_t dim, std::optional<DType> dtype = {});

// ---- threads (cpu/threads.cpp): the one place that sets the CPU thread count (OpenMP, BLAS)
/// Sets the number of CPU threads of ember's kernels, OpenMP and BLAS. ValueError below 1 or above 4096
/// (OpenMP would abort the process when it cannot start them).
void set_num_threads(int n);
int get_num_threads();  ///< The CPU thread count set_num_threads set (one per core by default).
// The deterministic mode, set_deterministic(bool) and is_deterministic(), is declared in
// tensor/deterministic.h (included above): CPU results then do not depend on the thread count.

/// What multiplies f32/f64 matrices on the CPU now (cpu/gemm.cpp): "OpenBLAS (<its kernels' core
/// type>)", "CBLAS", "Eigen", or in deterministic mode "ember deterministic (<instruction set>)".
std::string cpu_gemm_name();

}  // namespace ember
