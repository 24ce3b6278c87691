// View primitives: their output shares the input's storage (make_view instead of an eval).
#pragma once

#include "tensor/primitive.h"

namespace ember {

// The same elements under a new shape (view, reshape of a viewable tensor, squeeze, flatten).
class Reshape final : public Primitive {
 public:
  explicit Reshape(Shape shape) : shape_(shape) {}
  const char* name() const override { return "view"; }
  Tensor make_view(const Tensor& x) const;
  EMBER_PRIMITIVE_VJP;

 private:
  Shape shape_;
};

// Dims reordered: output dim i is input dim dims[i].
class Permute final : public Primitive {
 public:
  explicit Permute(Shape dims) : dims_(dims) {}
  const char* name() const override { return "permute"; }
  Tensor make_view(const Tensor& x) const;
  EMBER_PRIMITIVE_VJP;

 private:
  Shape dims_;
};

// Elements start, start + step, ... (count of them: length) along dim.
class Slice final : public Primitive {
 public:
  Slice(int dim, int64_t start, int64_t length, int64_t step) : dim_(dim), start_(start), length_(length), step_(step) {}
  const char* name() const override { return "slice"; }
  Tensor make_view(const Tensor& x) const;
  EMBER_PRIMITIVE_VJP;

 private:
  int dim_;
  int64_t start_, length_, step_;
};

// Size-1 dims (and new leading dims) repeated through zero strides.
class Expand final : public Primitive {
 public:
  explicit Expand(Shape shape) : shape_(shape) {}
  const char* name() const override { return "expand"; }
  Tensor make_view(const Tensor& x) const;
  EMBER_PRIMITIVE_VJP;

 private:
  Shape shape_;
};

}  // namespace ember
