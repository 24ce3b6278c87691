// What the image data sets (ImageFolder, WebDataset) share: a batch made example by example from
// encoded image files through the per-image pipeline, with per-example randomness and the
// replacement of bad files.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "data/dataset.h"
#include "data/image_transform.h"

namespace ember::data {

// One example's encoded image: its bytes and the name errors give it (a path, a shard and member).
struct EncodedImage {
  std::vector<uint8_t> bytes;
  std::string source;
};

// Where the examples of a data set come from, by index: reading one may raise DataError or IOError.
struct ImageExamples {
  int64_t size;                                        // how many examples there are
  std::function<EncodedImage(int64_t index)> read;     // an example's image
  std::function<int64_t(int64_t index)> label;         // and its label
  std::string name;                                    // the data set, for the messages
};

// The examples at `indices` through `transform`: images (B, 3, size, size) in its dtype and memory
// format, labels i64 (B). Example i draws from Philox keyed by (seed, epoch) at counter i << 12. A bad
// file raises, or with `skip_bad` is replaced by the next example (in index order) and counted in
// `bad`; 64 bad ones in a row raise DataError. IndexError for an index out of range.
Batch make_image_batch(const ImageExamples& examples, const std::vector<int64_t>& indices, uint64_t seed,
                       int64_t epoch, const ImageTransformOptions& transform, bool skip_bad, std::atomic<int64_t>& bad);

}  // namespace ember::data
