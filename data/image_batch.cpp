#include "data/image_batch.h"

#include "tensor/atomic_file.h"  // IOError
#include "tensor/ops.h"

namespace ember::data {

namespace {

// Replacements tried for one example before giving up: a data set this damaged is not worth training on.
constexpr int kMaxReplacements = 64;

// The Philox key of an epoch: the loader's seed mixed with the epoch (splitmix64's finaliser), so each
// (seed, epoch) has its own stream and an example's stream starts at its index.
uint64_t epoch_key(uint64_t seed, int64_t epoch) {
  uint64_t z = seed ^ (0x9E3779B97F4A7C15ull * (static_cast<uint64_t>(epoch) + 1));
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

}  // namespace

Batch make_image_batch(const ImageExamples& examples, const std::vector<int64_t>& indices, uint64_t seed,
                       int64_t epoch, const ImageTransformOptions& t, bool skip_bad, std::atomic<int64_t>& bad) {
  const int64_t n = examples.size, batch = static_cast<int64_t>(indices.size());
  for (int64_t i : indices)
    if (i < 0 || i >= n)
      throw IndexError(examples.name + ": index " + std::to_string(i) + " out of range for " + std::to_string(n) +
                       " examples");
  const Tensor images = t.channels_last ? Tensor::empty({batch, t.size, t.size, 3}, TensorOptions(t.dtype)).permute({0, 3, 1, 2})
                                        : Tensor::empty({batch, 3, t.size, t.size}, TensorOptions(t.dtype));
  const Strides& st = images.strides();
  const uint64_t key = epoch_key(seed, epoch);
  std::vector<int64_t> labels(static_cast<size_t>(batch));
  for (int64_t b = 0; b < batch; ++b) {
    const SampleSlot slot{static_cast<char*>(images.raw_data()) + b * st[0] * dtype_size(t.dtype), t.dtype, st[1], st[2],
                          st[3]};
    int64_t i = indices[static_cast<size_t>(b)];
    for (int attempt = 1;; ++attempt) {
      RandomStream rs(key, static_cast<uint64_t>(i) << 12);  // 4096 Philox blocks per example: far more than drawn
      std::string error;
      try {
        const EncodedImage image = examples.read(i);
        transform_image(image.bytes, image.source, t, rs, slot);
        labels[static_cast<size_t>(b)] = examples.label(i);
        break;
      } catch (const DataError& e) {
        if (!skip_bad) throw;
        error = e.what();
      } catch (const IOError& e) {
        if (!skip_bad) throw;
        error = e.what();
      }
      ++bad;
      if (attempt == kMaxReplacements)
        throw DataError(examples.name + ": " + std::to_string(kMaxReplacements) + " bad examples in a row from index " +
                        std::to_string(indices[static_cast<size_t>(b)]) + "; the last: " + error);
      i = (i + 1) % n;
    }
  }
  return {images, from_vector(labels, {batch})};
}

}  // namespace ember::data
