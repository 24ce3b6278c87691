/// @file
/// WebDataset: image samples in POSIX tar shards, as the webdataset library writes them (what large
/// image sets ship as). A sample is the run of consecutive members that share a key, the member's
/// path up to the first dot of its file name: "train/n01440764_10026.jpg" and
/// "train/n01440764_10026.cls" are one sample, its image (.jpg, .jpeg or .png) and its label (.cls,
/// a decimal integer). Shards are read with libarchive (plain tar, or compressed by any filter it
/// knows: .tar.gz, .tar.zst, ...).
///
/// At construction each shard's headers are read once (the images are skipped, by seeking in a plain
/// tar) to list the samples and read their labels. Reading stays sequential: an epoch's order (order())
/// takes the shards in a shuffled order, each one's samples in file order, and each loader thread
/// keeps its shard open and reads on from where it stopped. So the samples of a shard should be in
/// random order, as WebDataset's writers make them: a shard of one class after another gives batches
/// of one class. Shards are split across the ranks of a
/// job (rank r takes every world_size-th of the epoch's shards), cut to the same number of samples on
/// every rank so that they step together. Each example's crop and flip come from (loader seed,
/// epoch, index), as ImageFolder's do. A bad image raises DataError naming the shard and the member,
/// or, with skip_bad_images, is replaced by the next good sample and counted.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "data/dataloader.h"
#include "data/dataset.h"
#include "data/image_transform.h"

namespace ember::data {

/// Expands WebDataset's brace notation for shard lists: "train-{000000..000146}.tar" (a numeric
/// range, each number zero-padded to the width of the first) and "{a,b,c}" (alternatives); several
/// braces multiply, left to right. ValueError naming the pattern for an unclosed brace, a range whose
/// ends are not numbers or that goes down, or more than 10^6 names.
std::vector<std::string> expand_braces(const std::string& pattern);

/// WebDataset's settings.
struct WebDatasetOptions {
  ImageTransformOptions transform{};  ///< the per-image pipeline (data/image_transform.h)
  bool skip_bad_images = false;       ///< a bad image or sample replaced by the next good one and counted
  bool shuffle_shards = true;         ///< a new order of the shards each epoch (seeded); false: as listed
  int rank = 0;                       ///< this process's rank: it reads every world_size-th shard
  int world_size = 1;                 ///< the ranks sharing the shards
  /// The classes the .cls labels index: a label at or beyond it is a bad sample. 0: the largest label
  /// + 1, which a label of kMaxInferredClasses or more may not set (one stray label would size a
  /// model's head).
  int64_t num_classes = 0;
};

/// The most classes a WebDataset infers from its labels; more need WebDatasetOptions::num_classes.
inline constexpr int64_t kMaxInferredClasses = 100000;

/// Image samples in tar shards (see the file's description).
class WebDataset : public Dataset {
 public:
  /// One sample: where its image is and its label.
  struct Sample {
    int shard;           ///< index into shards()
    int64_t member;      ///< the image's member number in the shard (0 = the first member)
    std::string key;     ///< the sample's key
    int64_t label;       ///< the .cls value
  };

  /// Lists the samples of `shards` (paths, or one brace pattern). DataError naming the shard and member
  /// for a shard that cannot be opened or read to its end (a tar cut mid-member, a corrupt header), a
  /// sample without an image or a .cls label, or a label that is not a non-negative decimal number
  /// (unless skip_bad_images: such a sample is left out and counted); ValueError for no shards, fewer
  /// shards than ranks, bad transform options, or a rank outside [0, world_size).
  explicit WebDataset(std::vector<std::string> shards, WebDatasetOptions options = {});
  /// The shards of a brace pattern (expand_braces).
  explicit WebDataset(const std::string& pattern, WebDatasetOptions options = {})
      : WebDataset(expand_braces(pattern), options) {}

  int64_t size() const override { return static_cast<int64_t>(samples_.size()); }
  /// get_epoch_batch(indices, 0, 0).
  Batch get_batch(const std::vector<int64_t>& indices) const override;
  /// The examples at `indices` (of samples()), transformed as ImageFolder's are. IndexError for an
  /// index out of range; DataError naming the shard and member for a bad image unless skip_bad_images.
  Batch get_epoch_batch(const std::vector<int64_t>& indices, uint64_t seed, int64_t epoch) const override;
  int64_t bad_examples() const override { return bad_.load(); }  ///< Samples left out or replaced so far.

  /// This rank's sample order for one epoch of a loader seeded with `seed` (see the file's description).
  std::vector<int64_t> order(uint64_t seed, int64_t epoch) const;
  /// order() as a DataLoader sampler (DataLoaderOptions::sampler) for a loader seeded with `seed`.
  Sampler sampler(uint64_t seed) const;

  const std::vector<std::string>& shards() const { return shards_; }  ///< The shard paths, as listed.
  const std::vector<Sample>& samples() const { return samples_; }     ///< Every sample, shard by shard.
  /// options().num_classes when given, else one more than the largest label (the classes a model needs).
  int64_t num_classes() const { return options_.num_classes > 0 ? options_.num_classes : num_classes_; }
  const WebDatasetOptions& options() const { return options_; }  ///< The settings.

 private:
  std::vector<uint8_t> read_image(const Sample& s) const;

  std::vector<std::string> shards_;
  WebDatasetOptions options_;
  std::vector<Sample> samples_;
  std::vector<int64_t> shard_begin_;  // index of each shard's first sample in samples_, and the end
  int64_t num_classes_ = 0;
  uint64_t id_;  // tells this data set's open shards apart from another's in a thread's reader
  mutable std::atomic<int64_t> bad_{0};
};

}  // namespace ember::data
