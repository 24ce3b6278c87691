// Primitives that make values rather than transform them: random fills and device copies.
#pragma once

#include "tensor/philox.h"
#include "tensor/primitive.h"

namespace ember {

// Fills its (contiguous) output from the Philox stream at `counter`: uniform [0,1), standard
// normal, or integers in [low, high).
class RandomFill final : public Primitive {
 public:
  static constexpr bool kDifferentiable = false;
  enum class Kind { uniform, normal, integer };
  RandomFill(Kind kind, philox::Counter counter, int64_t low = 0, int64_t high = 0)
      : kind_(kind), counter_(counter), low_(low), high_(high) {}
  const char* name() const override { return "random"; }
  // Counter blocks consumed for n elements of this kind (what the generator must reserve).
  static uint64_t blocks_for(Kind kind, DType dtype, int64_t n);
  EMBER_PRIMITIVE_KERNELS;

 private:
  Kind kind_;
  philox::Counter counter_;
  int64_t low_, high_;
};

// A contiguous copy of the input on another device (to(device)). Backward copies back.
class ToDevice final : public Primitive {
 public:
  ToDevice(Device device, bool non_blocking) : device_(device), non_blocking_(non_blocking) {}
  const char* name() const override { return "to_device"; }
  Device device() const { return device_; }
  bool non_blocking() const { return non_blocking_; }
  EMBER_PRIMITIVE_VJP;

 private:
  Device device_;
  bool non_blocking_;
};

}  // namespace ember
