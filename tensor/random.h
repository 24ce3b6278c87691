// The random generator state: a Philox key (seed) and the next unused counter block. Each random
// op reserves the blocks it consumes, so a saved state replays the same numbers.
#pragma once

#include <cstdint>

namespace ember {

struct GeneratorState {
  uint64_t seed = 0;
  uint64_t offset = 0;
};

class Generator {
 public:
  explicit Generator(uint64_t seed = 0) : state_{seed, 0} {}
  void manual_seed(uint64_t seed) { state_ = {seed, 0}; }
  uint64_t seed() const { return state_.seed; }
  GeneratorState state() const { return state_; }
  void set_state(GeneratorState s) { state_ = s; }
  // Reserves `blocks` counter blocks and returns the first.
  uint64_t reserve(uint64_t blocks) {
    const uint64_t first = state_.offset;
    state_.offset += blocks;
    return first;
  }

 private:
  GeneratorState state_;
};

// The process-wide default generator (seed 0 until manual_seed).
Generator& default_generator();
void manual_seed(uint64_t seed);

}  // namespace ember
