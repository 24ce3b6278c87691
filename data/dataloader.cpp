// DataLoader: the per-epoch order, batch assembly and the worker pool with its bounded queue.
#include "data/dataloader.h"

#include <cstdio>
#include <string>
#include <system_error>

#include "data/rng.h"
#include "tensor/error.h"

namespace ember::data {

std::vector<int64_t> permutation(int64_t n, uint64_t seed, int64_t epoch) {
  std::vector<int64_t> p(n);
  for (int64_t i = 0; i < n; ++i) p[i] = i;
  RandomStream rs(seed, uint64_t(epoch) << 32);
  for (int64_t i = n - 1; i > 0; --i) std::swap(p[i], p[rs.below(uint64_t(i) + 1)]);
  return p;
}

DataLoader::DataLoader(std::shared_ptr<const Dataset> dataset, DataLoaderOptions options)
    : dataset_(std::move(dataset)), opts_(std::move(options)) {
  if (!dataset_) throw ValueError("DataLoader: no dataset");
  if (opts_.batch_size <= 0) throw ValueError("DataLoader: batch_size " + std::to_string(opts_.batch_size) + " must be positive");
  if (opts_.num_workers < 0) throw ValueError("DataLoader: num_workers " + std::to_string(opts_.num_workers) + " is negative");
  if (opts_.prefetch_factor <= 0) throw ValueError("DataLoader: prefetch_factor must be positive");
  if (opts_.pin_memory && !backend::pinned_memory_available()) {
    // PyTorch's choice: the same script runs on a machine without a GPU, only without the benefit.
    static std::once_flag warned;
    std::call_once(warned, [] {
      std::fprintf(stderr, "ember: DataLoader pin_memory=true ignored: no CUDA device is visible\n");
    });
    opts_.pin_memory = false;
  }
}

DataLoader::~DataLoader() { stop_workers(); }

std::vector<int64_t> DataLoader::epoch_order(int64_t epoch) const {
  const int64_t n = dataset_->size();
  if (opts_.sampler) {
    std::vector<int64_t> order = opts_.sampler(n, epoch);
    for (int64_t i : order)
      if (i < 0 || i >= n)
        throw IndexError("DataLoader: sampler gave index " + std::to_string(i) + " for a dataset of " + std::to_string(n));
    return order;
  }
  if (opts_.shuffle) return permutation(n, opts_.seed, epoch);
  std::vector<int64_t> order(n);
  for (int64_t i = 0; i < n; ++i) order[i] = i;
  return order;
}

int64_t DataLoader::size() const {
  const int64_t n = opts_.sampler ? int64_t(epoch_order(pos_.epoch).size()) : dataset_->size();
  return opts_.drop_last ? n / opts_.batch_size : (n + opts_.batch_size - 1) / opts_.batch_size;
}

void DataLoader::set_position(LoaderPosition p) {
  if (p.epoch < 0 || p.batch < 0)
    throw ValueError("DataLoader::set_position: negative epoch or batch (" + std::to_string(p.epoch) + ", " +
                     std::to_string(p.batch) + ")");
  stop_workers();
  pos_ = p;
}

Batch DataLoader::make_batch(const std::vector<int64_t>& order, int64_t epoch, int64_t b) const {
  const int64_t begin = b * opts_.batch_size;
  const int64_t end = std::min<int64_t>(begin + opts_.batch_size, int64_t(order.size()));
  Batch batch = dataset_->get_epoch_batch(std::vector<int64_t>(order.begin() + begin, order.begin() + end), opts_.seed, epoch);
  if (opts_.transform) {
    // One generator per batch, keyed by (seed, epoch, batch): the same on any worker.
    Generator gen(opts_.seed ^ (0x9E3779B97F4A7C15ull * uint64_t(epoch + 1)) ^ (uint64_t(b) << 40) ^ uint64_t(b));
    opts_.transform(batch, gen);
  }
  if (opts_.pin_memory) {
    // One more copy, on the worker: the ops that gather a batch allocate their outputs themselves.
    batch.images = batch.images.pin_memory();
    batch.labels = batch.labels.pin_memory();
  }
  return batch;
}

std::optional<Batch> DataLoader::next() {
  if (order_epoch_ != pos_.epoch) {
    stop_workers();
    order_ = epoch_order(pos_.epoch);
    order_epoch_ = pos_.epoch;
  }
  const int64_t n = int64_t(order_.size());
  const int64_t batches = opts_.drop_last ? n / opts_.batch_size : (n + opts_.batch_size - 1) / opts_.batch_size;
  if (pos_.batch >= batches) {
    stop_workers();
    return std::nullopt;
  }
  if (opts_.num_workers == 0) return make_batch(order_, pos_.epoch, pos_.batch++);

  if (!running_) start_workers();
  std::unique_lock lock(mu_);
  cv_.wait(lock, [&] { return ready_.count(pos_.batch) > 0; });
  auto node = ready_.extract(pos_.batch);
  if (node.mapped().second) {
    // The position stays on the failed batch, so a retry makes it again.
    lock.unlock();
    stop_workers();
    std::rethrow_exception(node.mapped().second);
  }
  ++pos_.batch;
  cv_.notify_all();  // room for one more in the queue
  lock.unlock();
  return std::move(node.mapped().first);
}

void DataLoader::start_workers() {
  stop_ = false;
  next_claim_ = pos_.batch;
  ready_.clear();
  running_ = true;
  for (int w = 0; w < opts_.num_workers; ++w) {
    try {
      workers_.emplace_back([this] { worker_loop(); });
    } catch (const std::system_error& e) {  // the system's thread limit
      stop_workers();
      throw ValueError("DataLoader: cannot start worker thread " + std::to_string(w + 1) + " of " +
                  std::to_string(opts_.num_workers) + " (" + e.code().message() + "): lower num_workers");
    }
  }
}

void DataLoader::stop_workers() {
  if (!running_) return;
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  for (auto& t : workers_) t.join();
  workers_.clear();
  ready_.clear();
  running_ = false;
}

void DataLoader::worker_loop() {
  const int64_t n = int64_t(order_.size());
  const int64_t batches = opts_.drop_last ? n / opts_.batch_size : (n + opts_.batch_size - 1) / opts_.batch_size;
  const int64_t capacity = int64_t(opts_.num_workers) * opts_.prefetch_factor;
  const int64_t epoch = pos_.epoch;  // fixed while workers run
  for (;;) {
    int64_t b;
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [&] { return stop_ || next_claim_ >= batches || next_claim_ < pos_.batch + capacity; });
      if (stop_ || next_claim_ >= batches) return;
      b = next_claim_++;
    }
    std::optional<Batch> batch;
    std::exception_ptr error;
    try {
      batch = make_batch(order_, epoch, b);
    } catch (...) {
      error = std::current_exception();
    }
    {
      std::lock_guard lock(mu_);
      ready_.emplace(b, std::make_pair(std::move(batch), error));
    }
    cv_.notify_all();
  }
}

}  // namespace ember::data
