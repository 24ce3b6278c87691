/// @file
/// DataLoader: batches of a Dataset in an order a Sampler gives per epoch (a seeded permutation by
/// default), optionally prepared on background threads. The order and every batch depend only on
/// (seed, epoch, batch index), never on num_workers, and the position can be saved and restored.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "data/dataset.h"
#include "tensor/random.h"

namespace ember::data {

/// The index order of one epoch over a data set of `size` examples (e.g. a distributed sampler
/// returns this rank's share).
using Sampler = std::function<std::vector<int64_t>(int64_t size, int64_t epoch)>;
/// Applied to each batch after it is gathered; `gen` is seeded from (seed, epoch, batch index).
using BatchTransform = std::function<void(Batch& batch, Generator& gen)>;

/// A seeded permutation of 0..n-1 (Fisher-Yates on Philox), the same on every platform.
std::vector<int64_t> permutation(int64_t n, uint64_t seed, int64_t epoch);

/// DataLoader's settings (torch.utils.data.DataLoader's names).
struct DataLoaderOptions {
  int64_t batch_size = 1;         ///< examples per batch
  bool shuffle = false;           ///< a new seeded permutation each epoch; false: 0..n-1 in order
  uint64_t seed = 0;              ///< seeds the permutations and the transforms' generators
  bool drop_last = false;         ///< drop the last batch when it is short
  int num_workers = 0;            ///< 0: batches are made on the calling thread
  int prefetch_factor = 2;        ///< batches in flight per worker
  Sampler sampler = {};           ///< overrides shuffle when set
  BatchTransform transform = {};  ///< applied to each batch (augmentation), seeded per batch
  /// Batches come in page-locked memory, so that batch.images.to(cuda, true) does not block. Needs a
  /// visible GPU: without one it is turned off, with a warning.
  bool pin_memory = false;
};

/// Where the loader stands: the epoch and the index of the next batch it returns.
struct LoaderPosition {
  int64_t epoch = 0;  ///< the epoch
  int64_t batch = 0;  ///< the next batch within it
  bool operator==(const LoaderPosition&) const = default;  ///< Same epoch and batch.
};

/// Batches of a data set, epoch by epoch (torch.utils.data.DataLoader; see the file's
/// description). `for (Batch& b : loader)` runs the rest of the current epoch.
class DataLoader {
 public:
  /// ValueError for a null data set, a batch_size below 1, a negative num_workers or a
  /// prefetch_factor below 1.
  DataLoader(std::shared_ptr<const Dataset> dataset, DataLoaderOptions options);
  ~DataLoader();
  DataLoader(const DataLoader&) = delete;
  DataLoader& operator=(const DataLoader&) = delete;

  int64_t size() const;  ///< The number of batches per epoch.
  const Dataset& dataset() const { return *dataset_; }  ///< The data set it reads.
  /// The settings it was built with (pin_memory turned off when no GPU is visible).
  const DataLoaderOptions& options() const { return opts_; }
  /// Starts epoch e from its first batch.
  void set_epoch(int64_t e) { set_position({e, 0}); }
  LoaderPosition position() const { return pos_; }  ///< Where the loader stands, to save in a checkpoint.
  /// Goes to a saved position (the next batch returned is p.batch of p.epoch); ValueError when
  /// negative.
  void set_position(LoaderPosition p);
  /// The next batch of the current epoch, or nullopt when the epoch is done (then set_epoch).
  std::optional<Batch> next();
  /// The example indices of every batch of `epoch`, in order.
  std::vector<int64_t> epoch_order(int64_t epoch) const;

  /// Range-for over the rest of the current epoch.
  class Iterator {
   public:
    Iterator(DataLoader* l) : loader_(l) { advance(); }  ///< Starts at the next batch of `l`.
    Batch& operator*() { return *cur_; }                 ///< The current batch.
    Iterator& operator++() { advance(); return *this; }  ///< Moves to the next batch.
    /// Whether a batch is left (compared with end()).
    bool operator!=(std::nullptr_t) const { return cur_.has_value(); }

   private:
    void advance() { cur_ = loader_ ? loader_->next() : std::nullopt; }
    DataLoader* loader_;
    std::optional<Batch> cur_;
  };
  Iterator begin() { return Iterator(this); }  ///< The next batch of the current epoch.
  std::nullptr_t end() { return nullptr; }     ///< The end of the epoch.

 private:
  Batch make_batch(const std::vector<int64_t>& order, int64_t epoch, int64_t b) const;
  void start_workers();
  void stop_workers();
  void worker_loop();

  std::shared_ptr<const Dataset> dataset_;
  DataLoaderOptions opts_;
  LoaderPosition pos_;
  std::vector<int64_t> order_;  // of pos_.epoch
  int64_t order_epoch_ = -1;

  // Background preparation: workers claim batch indices in order, at most `capacity` ahead of the
  // consumer, and leave results (or their exception) in `ready_`.
  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  int64_t next_claim_ = 0;
  std::map<int64_t, std::pair<std::optional<Batch>, std::exception_ptr>> ready_;
  bool running_ = false;
};

}  // namespace ember::data
