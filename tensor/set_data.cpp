#include "tensor/set_data.h"

namespace ember {

void set_data(Tensor& t, const Tensor& src) {
  if (src.is_same(t)) return;
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
