// Philox4x32-10, the counter-based generator of Salmon et al., "Parallel random numbers: as easy
// as 1, 2, 3" (SC'11). Output depends only on (key, counter), so the CPU and CUDA kernels give the
// same stream for the same seed, element by element, in any order.
#pragma once

#include <cstdint>

#include "tensor/half.h"  // EMBER_HD

namespace ember::philox {

struct Block {
  uint32_t v[4];
  // Word k (0-3) chosen by comparisons: v[k] with k known only at run time would put the block in a
  // GPU thread's local memory.
  EMBER_HD uint32_t word(int k) const { return k == 0 ? v[0] : k == 1 ? v[1] : k == 2 ? v[2] : v[3]; }
};

// Where a random op's counter blocks start. Eager ops carry (seed, first_block) by value. In a
// captured step (CUDA graph) the values baked into a kernel would repeat on every replay, so there
// `base` points at device memory holding {seed, offset} that the host rewrites before each replay,
// and first_block is the op's offset within the step: PyTorch's philox_cuda_state does the same.
struct Counter {
  uint64_t seed = 0, first_block = 0;
  const uint64_t* base = nullptr;
  // The seed and first block this run draws from (reads `base` where the kernel runs).
  EMBER_HD Counter resolved() const { return base ? Counter{base[0], base[1] + first_block, nullptr} : *this; }
};

EMBER_HD inline Block generate(uint64_t seed, uint64_t counter) {
  // Constants from the paper (Random123's philox4x32 defaults).
  constexpr uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u, kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;
  uint32_t c0 = static_cast<uint32_t>(counter), c1 = static_cast<uint32_t>(counter >> 32), c2 = 0, c3 = 0;
  uint32_t k0 = static_cast<uint32_t>(seed), k1 = static_cast<uint32_t>(seed >> 32);
  for (int round = 0; round < 10; ++round) {
    const uint64_t p0 = static_cast<uint64_t>(kM0) * c0;
    const uint64_t p1 = static_cast<uint64_t>(kM1) * c2;
    const uint32_t n0 = static_cast<uint32_t>(p1 >> 32) ^ c1 ^ k0;
    const uint32_t n2 = static_cast<uint32_t>(p0 >> 32) ^ c3 ^ k1;
    c1 = static_cast<uint32_t>(p1);
    c3 = static_cast<uint32_t>(p0);
    c0 = n0;
    c2 = n2;
    k0 += kW0;
    k1 += kW1;
  }
  return {{c0, c1, c2, c3}};
}

// A uniform value in [0, 1) from the top `Digits` bits of x, where Digits is the significand
// width of the target type (24 for f32, 11 for f16, 8 for bf16): every result is exactly
// representable there, so rounding to the type can never produce 1.0.
template <int Digits>
EMBER_HD inline float to_unit_float(uint32_t x) {
  return static_cast<float>(x >> (32 - Digits)) * (1.0f / static_cast<float>(1u << Digits));
}
// A uniform double in [0, 1) from 53 bits of two words.
EMBER_HD inline double to_unit_double(uint32_t hi, uint32_t lo) {
  const uint64_t bits = (static_cast<uint64_t>(hi) << 21) ^ (lo >> 11);
  return static_cast<double>(bits & ((uint64_t{1} << 53) - 1)) * (1.0 / 9007199254740992.0);
}

}  // namespace ember::philox
