#include "data/distributed_sampler.h"

#include <numeric>
#include <string>

#include "tensor/error.h"

namespace ember::data {

Sampler distributed_sampler(DistributedSamplerOptions options) {
  if (options.world_size < 1)
    throw ValueError("distributed_sampler: world_size must be at least 1, got " + std::to_string(options.world_size));
  if (options.rank < 0 || options.rank >= options.world_size)
    throw ValueError("distributed_sampler: rank " + std::to_string(options.rank) + " is not in [0, " +
                     std::to_string(options.world_size) + ")");
  return [options](int64_t size, int64_t epoch) {
    std::vector<int64_t> order;
    if (options.shuffle) {
      order = permutation(size, options.seed, epoch);
    } else {
      order.resize(static_cast<size_t>(size));
      std::iota(order.begin(), order.end(), int64_t{0});
    }
    const int64_t world = options.world_size;
    const int64_t total = options.drop_last ? size / world * world : (size + world - 1) / world * world;
    order.resize(static_cast<size_t>(std::min(total, size)));
    for (int64_t i = size; i < total; ++i) order.push_back(order[static_cast<size_t>((i - size) % size)]);  // padding
    std::vector<int64_t> share;
    for (int64_t i = options.rank; i < total; i += world) share.push_back(order[static_cast<size_t>(i)]);
    return share;
  };
}

}  // namespace ember::data
