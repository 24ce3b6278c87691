/// @file
/// The random generator state: a Philox key (seed) and the next unused counter block. Each random
/// op reserves the blocks it consumes, so a saved state replays the same numbers.
#pragma once

#include <cstdint>

namespace ember {

/// A generator's whole state: saving it and setting it back replays the same numbers.
struct GeneratorState {
  uint64_t seed = 0;    ///< the Philox key
  uint64_t offset = 0;  ///< the next unused counter block
};

/// A source of random numbers for the random ops (rand, randn, dropout, init, the data pipeline):
/// torch.Generator over Philox4x32-10, the same numbers on the CPU and on a GPU.
class Generator {
 public:
  explicit Generator(uint64_t seed = 0) : state_{seed, 0} {}  ///< A generator at the start of the stream of `seed`.
  void manual_seed(uint64_t seed) { state_ = {seed, 0}; }     ///< Restarts at the start of the stream of `seed`.
  uint64_t seed() const { return state_.seed; }               ///< The current seed.
  GeneratorState state() const { return state_; }             ///< The state, to save.
  void set_state(GeneratorState s) { state_ = s; }            ///< Goes back to a saved state.
  /// Reserves `blocks` counter blocks and returns the first.
  uint64_t reserve(uint64_t blocks) {
    const uint64_t first = state_.offset;
    state_.offset += blocks;
    return first;
  }

 private:
  GeneratorState state_;
};

/// The process-wide default generator (seed 0 until manual_seed).
Generator& default_generator();
void manual_seed(uint64_t seed);  ///< Seeds the default generator.

}  // namespace ember
