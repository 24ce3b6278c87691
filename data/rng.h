// A stream of random integers from Philox (key = seed, counter from a Generator reservation), so
// the data pipeline's randomness depends only on seeds, never on threads or platform.
#pragma once

#include <cstdint>

#include "tensor/philox.h"
#include "tensor/random.h"

namespace ember::data {

class RandomStream {
 public:
  RandomStream(uint64_t seed, uint64_t counter) : seed_(seed), counter_(counter) {}
  // Takes the next counter block k of `gen` and draws from Philox blocks k * 2^20 onward, so streams
  // from successive reservations do not overlap (up to 2^22 values each).
  explicit RandomStream(Generator& gen) : RandomStream(gen.seed(), gen.reserve(1) << 20) {}

  uint32_t next_u32() {
    if (i_ == 4) {
      block_ = philox::generate(seed_, counter_++);
      i_ = 0;
    }
    return block_.v[i_++];
  }
  uint64_t next_u64() { return (uint64_t(next_u32()) << 32) | next_u32(); }
  // Uniform in [0, n), unbiased (rejection).
  uint64_t below(uint64_t n) {
    const uint64_t limit = UINT64_MAX - UINT64_MAX % n;
    for (;;) {
      const uint64_t r = next_u64();
      if (r < limit) return r % n;
    }
  }
  // Uniform in [0, 1) with 24 bits.
  float uniform() { return philox::to_unit_float<24>(next_u32()); }
  // Uniform in [0, 1) with 53 bits (a double's precision, as torch's uniform_ on a double).
  double uniform_double() {
    const uint32_t hi = next_u32();
    return philox::to_unit_double(hi, next_u32());
  }

 private:
  uint64_t seed_, counter_;
  philox::Block block_{};
  int i_ = 4;
};

}  // namespace ember::data
