// Random tensors from the Philox stream, and the default generator.
#include "tensor/capture.h"
#include "tensor/ops.h"
#include "tensor/primitives/creation.h"

namespace ember {

Generator& default_generator() {
  static Generator gen(0);
  return gen;
}

void manual_seed(uint64_t seed) { default_generator().manual_seed(seed); }

uint64_t Generator::reserve(uint64_t blocks) {
  if (capture::active())
    capture::refuse("a host-side draw from a generator (seed " + std::to_string(state_.seed) +
                    ") is made once at capture, not at each replay");
  return reserve_blocks(blocks);
}

philox::Counter Generator::draw(uint64_t blocks, Device device) {
  if (capture_base_ == nullptr) {
    if (capture::active())
      capture::refuse("a random op drew from a generator (seed " + std::to_string(state_.seed) +
                      ") that the capture does not own (pass it to the CompiledStep), so every replay would draw "
                      "the same numbers");
    return {state_.seed, reserve_blocks(blocks), nullptr};
  }
  if (!(device == capture_device_))
    throw CaptureError("captured step: a random op on " + device.str() + " drew from a generator captured on " +
                       capture_device_.str());
  const uint64_t first = captured_blocks_;
  captured_blocks_ += blocks;
  return {0, first, capture_base_};
}

void Generator::begin_capture(const uint64_t* base, Device device) {
  if (capture_base_ != nullptr) throw StateError("Generator::begin_capture: a capture is already open");
  if (base == nullptr) throw ValueError("Generator::begin_capture: base is null");
  capture_base_ = base;
  capture_device_ = device;
  captured_blocks_ = 0;
}

uint64_t Generator::end_capture() {
  if (capture_base_ == nullptr) throw StateError("Generator::end_capture: no capture is open");
  capture_base_ = nullptr;
  return captured_blocks_;
}

uint64_t RandomFill::blocks_for(Kind kind, DType dtype, int64_t n) {
  const auto count = static_cast<uint64_t>(n);
  // Per block of four 32-bit words: 4 floats, 2 doubles, 2 normals (Box-Muller pairs), 2 integers.
  if (kind == Kind::uniform && dtype != DType::f64) return (count + 3) / 4;
  return (count + 1) / 2;
}

namespace {
Tensor random_tensor(RandomFill::Kind kind, const Shape& shape, TensorOptions opts, Generator* gen, int64_t low = 0,
                     int64_t high = 0) {
  Generator& g = gen ? *gen : default_generator();
  Tensor t = Tensor::empty(shape, opts.with_requires_grad(false));
  RandomFill fill(kind, g.draw(RandomFill::blocks_for(kind, opts.dtype, t.numel()), opts.device), low, high);
  std::vector<Tensor> out{t};
  detail::dispatch(fill, t.device(), {}, out);
  if (opts.requires_grad) t.requires_grad_(true);
  return t;
}
}  // namespace

Tensor rand(const Shape& shape, TensorOptions opts, Generator* gen) {
  if (!is_floating(opts.dtype))
    throw DTypeError(std::string("rand: expected a floating dtype, got ") + dtype_name(opts.dtype));
  return random_tensor(RandomFill::Kind::uniform, shape, opts, gen);
}

Tensor randn(const Shape& shape, TensorOptions opts, Generator* gen) {
  if (!is_floating(opts.dtype))
    throw DTypeError(std::string("randn: expected a floating dtype, got ") + dtype_name(opts.dtype));
  return random_tensor(RandomFill::Kind::normal, shape, opts, gen);
}

Tensor randint(int64_t low, int64_t high, const Shape& shape, TensorOptions opts, Generator* gen) {
  if (high <= low)
    throw ValueError("randint: expected low < high, got low=" + std::to_string(low) + ", high=" + std::to_string(high));
  check_fits(low, opts.dtype, "randint (low)");
  check_fits(high - 1, opts.dtype, "randint (high - 1)");
  return random_tensor(RandomFill::Kind::integer, shape, opts, gen, low, high);
}

}  // namespace ember
