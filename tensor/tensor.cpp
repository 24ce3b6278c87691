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

void Tensor::throw_undefined(const char* member) {
  throw UndefinedTensorError(std::string("Tensor::") + member +
                             " on an undefined tensor: a default-constructed Tensor, a gradient before any "
                             "backward() (grad()), or an optional argument left out; check defined() first");
}

int64_t Tensor::size(int64_t d) const {
  checked("size()");
  return shape()[wrap_dim(d, dim(), "size")];
}
int64_t Tensor::stride(int64_t d) const {
  checked("stride()");
  return strides()[wrap_dim(d, dim(), "stride")];
}

bool Tensor::is_contiguous() const {
  checked("is_contiguous()");
  int64_t expected = 1;
  for (int i = dim() - 1; i >= 0; --i) {
    if (shape()[i] == 1) continue;
    if (strides()[i] != expected) return false;
    expected *= shape()[i];
  }
  return true;
}

void* Tensor::raw_data() const {
  const TensorImpl& t = checked("raw_data()");
  return static_cast<char*>(t.storage->data()) + t.offset * dtype_size(t.dtype);
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
  checked("to_vector()");
  // Refused in a captured step on any device (a CPU run of the step checks what a GPU run would).
  if (capture::active())
    capture::check_host_wait("reading the values of a " + std::string(dtype_name(dtype())) + " tensor of shape " +
                             to_string(shape()) + " (item(), to_vector())");
  if (device().is_cpu()) count_host_sync("to_vector");  // a GPU tensor's copy counts its own wait
  return detail::cpu_values<T>(*this);
}

template <class T>
T Tensor::item() const {
  checked("item()");
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
  TensorImpl& t = checked("ensure_autograd_meta()");
  if (!t.autograd) t.autograd = std::make_unique<autograd::AutogradMeta>();
  return *t.autograd;
}

bool Tensor::requires_grad() const {
  const auto* m = checked("requires_grad()").autograd.get();
  return m && (m->requires_grad || m->grad_fn);
}

Tensor& Tensor::requires_grad_(bool enabled) {
  checked("requires_grad_()");
  if (grad_fn())
    throw AutogradError("requires_grad_: only leaf tensors can change requires_grad (this one comes from " +
                        std::string(grad_fn()->name()) + "); use detach() first");
  if (enabled && !is_floating(dtype()))
    throw DTypeError(std::string("requires_grad_: only floating tensors can require gradients, got ") +
                     dtype_name(dtype()));
  if (enabled || autograd_meta()) ensure_autograd_meta().requires_grad = enabled;
  return *this;
}

bool Tensor::is_leaf() const {
  checked("is_leaf()");
  return !grad_fn();
}

Tensor Tensor::grad() const {
  const auto* m = checked("grad()").autograd.get();
  if (!m) return {};
  if (m->grad.defined()) return m->grad;
  return m->retained_grad ? *m->retained_grad : Tensor();
}

void Tensor::set_grad(const Tensor& g) const {
  checked("set_grad()");
  if (g.defined() && !(g.shape() == shape()))
    throw ShapeError("set_grad: gradient of shape " + to_string(g.shape()) + " for a tensor of shape " +
                     to_string(shape()));
  ensure_autograd_meta().grad = g;
}

const std::shared_ptr<autograd::Node>& Tensor::grad_fn() const {
  static const std::shared_ptr<autograd::Node> none;
  const auto* m = checked("grad_fn()").autograd.get();
  return m ? m->grad_fn : none;
}

uint32_t Tensor::output_nr() const {
  const auto* m = checked("output_nr()").autograd.get();
  return m ? m->output_nr : 0;
}

void Tensor::set_grad_fn(std::shared_ptr<autograd::Node> fn, uint32_t output_nr) const {
  checked("set_grad_fn()");
  auto& m = ensure_autograd_meta();
  m.grad_fn = std::move(fn);
  m.output_nr = output_nr;
}

void Tensor::backward(const Tensor& grad, bool retain_graph, bool create_graph) const {
  checked("backward()");
  autograd::backward({*this}, {grad}, retain_graph, create_graph);
}

Tensor Tensor::detach() const {
  const TensorImpl& x = checked("detach()");
  return Tensor(make_intrusive<TensorImpl>(x.storage, x.offset, x.shape, x.strides, x.dtype));
}

void Tensor::register_hook(GradHook hook) const {
  checked("register_hook()");
  if (!requires_grad())
    throw AutogradError("register_hook: the tensor does not require grad, so no gradient will reach the hook");
  if (grad_fn())
    grad_fn()->add_pre_hook(output_nr(), std::move(hook));
  else
    ensure_autograd_meta().hooks.push_back(std::move(hook));
}

void Tensor::register_post_accumulate_grad_hook(PostAccumulateGradHook hook) const {
  checked("register_post_accumulate_grad_hook()");
  if (!is_leaf() || !requires_grad())
    throw AutogradError("register_post_accumulate_grad_hook: only leaf tensors that require grad accumulate "
                        "gradients");
  ensure_autograd_meta().post_accumulate_grad_hooks.push_back(std::move(hook));
}

void Tensor::retain_grad() const {
  checked("retain_grad()");
  if (!requires_grad()) throw AutogradError("retain_grad: the tensor does not require grad");
  if (is_leaf()) return;  // leaves keep their gradient anyway
  auto& m = ensure_autograd_meta();
  if (m.retained_grad) return;
  m.retained_grad = std::make_shared<Tensor>();
  std::shared_ptr<Tensor> cell = m.retained_grad;
  grad_fn()->add_pre_hook(output_nr(), [cell](const Tensor& g) {
    *cell = cell->defined() ? ember::add(*cell, g).detach() : g.detach().clone();
    return Tensor();
  });
}

std::ostream& operator<<(std::ostream& os, const Tensor& t) { return os << t.str(); }

}  // namespace ember
