#include "tensor/set_data.h"

#include "tensor/error.h"

namespace ember {

void set_data(Tensor& t, const Tensor& src) {
  if (src.is_same(t)) return;
  if (t.requires_grad() && !is_floating(src.dtype()))
    throw DTypeError("set_data: a tensor that requires grad takes floating data only, got " +
                     std::string(dtype_name(src.dtype())));
  const bool fits = t.shape() == src.shape() && t.dtype() == src.dtype() && t.device() == src.device();
  TensorImpl* d = t.impl();
  const TensorImpl* s = src.impl();
  d->storage = s->storage;
  d->offset = s->offset;
  d->shape = s->shape;
  d->strides = s->strides;
  d->dtype = s->dtype;
  d->is_view = false;
  if (!fits && t.autograd_meta()) t.set_grad(Tensor());
}

}  // namespace ember
