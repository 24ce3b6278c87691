#include "tensor/tensor.h"

#include <algorithm>
#include <limits>
#include <sstream>

#include "autograd/engine.h"
#include "autograd/grad_mode.h"
#include "autograd/node.h"
#include "tensor/capture.h"
#include "tensor/convert.h"
#include "tensor/host_sync.h"
#include "tensor/ops.h"

namespace ember {

TensorImpl::TensorImpl(IntrusivePtr<Storage> s, int64_t off, Shape sh, Strides st, DType dt)
    : storage(std::move(s)), offset(off), shape(sh), strides(st), dtype(dt) {}
TensorImpl::~TensorImpl() = default;

Tensor Tensor::empty(const Shape& shape, TensorOptions opts) {
  for (int64_t s : shape)
    if (s < 0) throw ShapeError("empty: negative dimension in shape " + to_string(shape));
  // The byte count, refused where it overflows. A shape with a zero dim holds nothing, but its
  // strides still multiply the other dims: there the elements they span must fit.
  const bool holds_nothing = std::find(shape.begin(), shape.end(), 0) != shape.end();
  int64_t span = holds_nothing ? 1 : dtype_size(opts.dtype);
  for (int64_t s : shape)
    if (__builtin_mul_overflow(span, std::max<int64_t>(s, 1), &span))
      throw ShapeError(holds_nothing ? "empty: shape " + to_string(shape) + " spans more than 2^63 - 1 elements"
                                     : "empty: shape " + to_string(shape) + " of " + dtype_name(opts.dtype) +
                                           " needs more than 2^63 - 1 bytes");
  const int64_t nbytes = holds_nothing ? 0 : span;
  auto storage = make_intrusive<Storage>(static_cast<size_t>(nbytes), opts.device);
  Tensor t(make_intrusive<TensorImpl>(std::move(storage), 0, shape, contiguous_strides(shape), opts.dtype));
  if (opts.requires_grad) t.requires_grad_(true);
  return t;
}

int64_t Tensor::size(int64_t d) const { return shape()[wrap_dim(d, dim(), "size")]; }
int64_t Tensor::stride(int64_t d) const { return strides()[wrap_dim(d, dim(), "stride")]; }

bool Tensor::is_contiguous() const {
  int64_t expected = 1;
  for (int i = dim() - 1; i >= 0; --i) {
    if (shape()[i] == 1) continue;
    if (strides()[i] != expected) return false;
    expected *= shape()[i];
  }
  return true;
}

void* Tensor::raw_data() const {
  return static_cast<char*>(impl_->storage->data()) + impl_->offset * dtype_size(dtype());
}

namespace detail {
template <class T>
std::vector<T> cpu_values(const Tensor& t) {
  NoGradGuard no_grad;
  const Tensor host = ember::to(t, kCPU).contiguous();
  std::vector<T> out(static_cast<size_t>(host.numel()));
  visit(host.dtype(), [&]<class S>() {
    const S* p = static_cast<const S*>(host.raw_data());
    for (size_t i = 0; i < out.size(); ++i) out[i] = convert<T>(p[i]);
  });
  return out;
}
}  // namespace detail

template <class T>
std::vector<T> Tensor::to_vector() const {
  // Refused in a captured step on any device (a CPU run of the step checks what a GPU run would).
  if (capture::active())
    capture::check_host_wait("reading the values of a " + std::string(dtype_name(dtype())) + " tensor of shape " +
                             to_string(shape()) + " (item(), to_vector())");
  if (device().is_cpu()) count_host_sync("to_vector");  // a GPU tensor's copy counts its own wait
  return detail::cpu_values<T>(*this);
}

template <class T>
T Tensor::item() const {
  if (numel() != 1)
    throw ShapeError("item: a tensor with " + std::to_string(numel()) + " elements (shape " + to_string(shape()) +
                     ") cannot be converted to a scalar");
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
    // A float read as a count (a state dict's step, say) must be one: NaN or 1e300 has no integer value.
    if (is_floating(dtype())) {
      const double v = to_vector<double>()[0];
      // [min, max + 1): both powers of two, exact in a double.
      const double low = static_cast<double>(std::numeric_limits<T>::min());
      const double high = static_cast<double>(std::numeric_limits<T>::max()) + 1.0;
      if (!(v >= low && v < high))
        throw ValueError("item: " + std::to_string(v) + " is out of the range of the integer type asked for");
    }
  }
  return to_vector<T>()[0];
}

#define EMBER_HOST_ACCESS(T)                               \
  template std::vector<T> detail::cpu_values(const Tensor&); \
  template std::vector<T> Tensor::to_vector() const;        \
  template T Tensor::item() const;
EMBER_HOST_ACCESS(float)
EMBER_HOST_ACCESS(double)
EMBER_HOST_ACCESS(f16)
EMBER_HOST_ACCESS(bf16)
EMBER_HOST_ACCESS(int32_t)
EMBER_HOST_ACCESS(int64_t)
EMBER_HOST_ACCESS(uint8_t)
EMBER_HOST_ACCESS(bool)
#undef EMBER_HOST_ACCESS

// ---- autograd accessors

autograd::AutogradMeta& Tensor::ensure_autograd_meta() const {
  if (!impl_->autograd) impl_->autograd = std::make_unique<autograd::AutogradMeta>();
  return *impl_->autograd;
}

bool Tensor::requires_grad() const {
  const auto* m = impl_->autograd.get();
  return m && (m->requires_grad || m->grad_fn);
}

Tensor& Tensor::requires_grad_(bool enabled) {
  if (grad_fn())
    throw AutogradError("requires_grad_: only leaf tensors can change requires_grad (this one comes from " +
                        std::string(grad_fn()->name()) + "); use detach() first");
  if (enabled && !is_floating(dtype()))
    throw DTypeError(std::string("requires_grad_: only floating tensors can require gradients, got ") +
                     dtype_name(dtype()));
  if (enabled || impl_->autograd) ensure_autograd_meta().requires_grad = enabled;
  return *this;
}

bool Tensor::is_leaf() const { return !grad_fn(); }

Tensor Tensor::grad() const {
  const auto* m = impl_->autograd.get();
  if (!m) return {};
  if (m->grad.defined()) return m->grad;
  return m->retained_grad ? *m->retained_grad : Tensor();
}

void Tensor::set_grad(const Tensor& g) const {
  if (g.defined() && !(g.shape() == shape()))
    throw ShapeError("set_grad: gradient of shape " + to_string(g.shape()) + " for a tensor of shape " +
                     to_string(shape()));
  ensure_autograd_meta().grad = g;
}

const std::shared_ptr<autograd::Node>& Tensor::grad_fn() const {
  static const std::shared_ptr<autograd::Node> none;
  const auto* m = impl_->autograd.get();
  return m ? m->grad_fn : none;
}

uint32_t Tensor::output_nr() const {
  const auto* m = impl_->autograd.get();
  return m ? m->output_nr : 0;
}

void Tensor::set_grad_fn(std::shared_ptr<autograd::Node> fn, uint32_t output_nr) const {
  auto& m = ensure_autograd_meta();
  m.grad_fn = std::move(fn);
  m.output_nr = output_nr;
}

void Tensor::backward(const Tensor& grad, bool retain_graph, bool create_graph) const {
  autograd::backward({*this}, {grad}, retain_graph, create_graph);
}

Tensor Tensor::detach() const {
  Tensor t(make_intrusive<TensorImpl>(impl_->storage, impl_->offset, impl_->shape, impl_->strides, impl_->dtype));
  return t;
}

void Tensor::register_hook(GradHook hook) const {
  if (!requires_grad())
    throw AutogradError("register_hook: the tensor does not require grad, so no gradient will reach the hook");
  if (grad_fn())
    grad_fn()->add_pre_hook(output_nr(), std::move(hook));
  else
    ensure_autograd_meta().hooks.push_back(std::move(hook));
}

void Tensor::register_post_accumulate_grad_hook(PostAccumulateGradHook hook) const {
  if (!is_leaf() || !requires_grad())
    throw AutogradError("register_post_accumulate_grad_hook: only leaf tensors that require grad accumulate "
                        "gradients");
  ensure_autograd_meta().post_accumulate_grad_hooks.push_back(std::move(hook));
}

void Tensor::retain_grad() const {
  if (!requires_grad()) throw AutogradError("retain_grad: the tensor does not require grad");
  if (is_leaf()) return;  // leaves keep their gradient anyway
  auto& m = ensure_autograd_meta();
  if (m.retained_grad) return;
  m.retained_grad = std::make_shared<Tensor>();
  std::shared_ptr<Tensor> cell = m.retained_grad;
  grad_fn()->add_pre_hook(output_nr(), [cell](const Tensor& g) {
    *cell = cell->defined() ? add(*cell, g).detach() : g.detach().clone();
    return Tensor();
  });
}

// ---- methods that forward to the op front ends

Tensor Tensor::to(DType d) const { return ember::to(*this, d); }
Tensor Tensor::to(Device d, bool non_blocking) const { return ember::to(*this, d, non_blocking); }
Tensor Tensor::pin_memory() const { return ember::pin_memory(*this); }
Tensor Tensor::contiguous() const { return ember::contiguous(*this); }
Tensor Tensor::clone() const { return ember::clone(*this); }
Tensor Tensor::view(const Shape& s) const { return ember::view(*this, s); }
Tensor Tensor::reshape(const Shape& s) const { return ember::reshape(*this, s); }
Tensor Tensor::permute(const Shape& dims) const { return ember::permute(*this, dims); }
Tensor Tensor::transpose(int64_t d0, int64_t d1) const { return ember::transpose(*this, d0, d1); }
Tensor Tensor::t() const {
  if (dim() > 2) throw ShapeError("t: expects a tensor of at most 2 dims, got shape " + to_string(shape()));
  return dim() < 2 ? *this : ember::transpose(*this, 0, 1);  // 0-D and 1-D: itself, as PyTorch's t()
}
Tensor Tensor::narrow(int64_t d, int64_t start, int64_t length) const { return ember::narrow(*this, d, start, length); }
Tensor Tensor::select(int64_t d, int64_t index) const { return ember::select(*this, d, index); }
Tensor Tensor::expand(const Shape& s) const { return ember::expand(*this, s); }
Tensor Tensor::squeeze(int64_t d) const { return ember::squeeze(*this, d); }
Tensor Tensor::squeeze() const { return ember::squeeze(*this); }
Tensor Tensor::unsqueeze(int64_t d) const { return ember::unsqueeze(*this, d); }
Tensor Tensor::flatten(int64_t s, int64_t e) const { return ember::flatten(*this, s, e); }
Tensor Tensor::sum() const { return ember::sum(*this); }
Tensor Tensor::sum(const Shape& dims, bool keepdim) const { return ember::sum(*this, dims, keepdim); }
Tensor Tensor::mean() const { return ember::mean(*this); }
Tensor Tensor::mean(const Shape& dims, bool keepdim) const { return ember::mean(*this, dims, keepdim); }

std::ostream& operator<<(std::ostream& os, const Tensor& t) { return os << t.str(); }

}  // namespace ember
