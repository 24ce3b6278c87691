/// @file
/// distributed_sampler: one rank's share of each epoch when `world_size` processes train on one data
/// set (torch.utils.data.DistributedSampler). Every rank draws the same order for the epoch (a seeded
/// permutation with shuffle, else 0..size-1), evens it out to a multiple of world_size (repeating its
/// first indices, or dropping its tail with drop_last) and takes every world_size-th index from
/// `rank` on. The shares are disjoint apart from the padding and of equal length, as data-parallel
/// training needs: every rank must run the same number of steps.
#pragma once

#include <cstdint>

#include "data/dataloader.h"

namespace ember::data {

/// distributed_sampler's settings (torch.utils.data.DistributedSampler's names).
struct DistributedSamplerOptions {
  int rank = 0;            ///< this process's rank, in [0, world_size)
  int world_size = 1;      ///< the number of ranks
  bool shuffle = true;     ///< a seeded permutation each epoch; false: 0..size-1
  uint64_t seed = 0;       ///< the same on every rank
  bool drop_last = false;  ///< drop the tail instead of padding
};

/// A Sampler for DataLoaderOptions::sampler (which then ignores its own shuffle). ValueError names a
/// rank outside [0, world_size) or a world size below 1.
Sampler distributed_sampler(DistributedSamplerOptions options);

}  // namespace ember::data
