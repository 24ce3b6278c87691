/// @file
/// The random generator state: a Philox key (seed) and the next unused counter block. Each random
/// op reserves the blocks it consumes, so a saved state replays the same numbers.
#pragma once

#include <cstdint>

#include "tensor/device.h"
#include "tensor/philox.h"

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
  /// Reserves `blocks` counter blocks and returns the first (host-side draws: the data pipeline's).
  /// CaptureError inside a captured step, whose replays would not advance it.
  uint64_t reserve(uint64_t blocks);
  /// Reserves `blocks` counter blocks for a random op on `device`: their counter, by value, or in a
  /// capture this generator owns (begin_capture) read through its device base.
  philox::Counter draw(uint64_t blocks, Device device);

  /// Whole-step capture (train::CompiledStep): until end_capture(), draw() hands out counters that read
  /// {seed, offset} from `base` (two uint64 in memory of `device`) plus their offset within the step.
  /// Before each replay the caller writes state() there, and reserve()s the blocks drawn after it,
  /// so that a replay draws what the eager step would have. StateError when already capturing.
  void begin_capture(const uint64_t* base, Device device);
  /// Ends the capture; returns the blocks drawn through the base since begin_capture().
  uint64_t end_capture();
  /// Whether a capture is open on this generator.
  bool capturing() const { return capture_base_ != nullptr; }

 private:
  uint64_t reserve_blocks(uint64_t blocks) {
    const uint64_t first = state_.offset;
    state_.offset += blocks;
    return first;
  }

  GeneratorState state_;
  const uint64_t* capture_base_ = nullptr;  // the open capture's {seed, offset}, or null
  Device capture_device_;
  uint64_t captured_blocks_ = 0;  // drawn so far in the open capture
};

/// The process-wide default generator (seed 0 until manual_seed).
Generator& default_generator();
void manual_seed(uint64_t seed);  ///< Seeds the default generator.

}  // namespace ember
