/// @file
/// Data sets serve whole batches: get_batch(indices) gathers the examples at once (one index_select
/// and one conversion to float), which is what a DataLoader needs to be fast.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "data/idx.h"  // DataError
#include "tensor/tensor.h"

namespace ember::data {

/// A batch of images and their labels.
struct Batch {
  Tensor images;  ///< f32 (B, C, H, W)
  Tensor labels;  ///< i64 (B)
};

/// The base of data sets: examples by index, served a batch at a time.
class Dataset {
 public:
  virtual ~Dataset() = default;
  virtual int64_t size() const = 0;  ///< Number of examples.
  /// The examples at `indices`, in that order (IndexError for one out of range). Must be safe to call
  /// from several threads at once.
  virtual Batch get_batch(const std::vector<int64_t>& indices) const = 0;
  /// The examples at `indices` as epoch `epoch` of a loader seeded with `seed` sees them: a data set
  /// that augments each example (ImageFolder) draws its randomness from (seed, epoch, index), so a batch
  /// is the same on any worker and after a resume. By default get_batch(indices). The DataLoader calls this.
  virtual Batch get_epoch_batch(const std::vector<int64_t>& indices, uint64_t /*seed*/, int64_t /*epoch*/) const {
    return get_batch(indices);
  }
  /// Examples whose file was bad and that were replaced by another (ImageFolder's skip_bad_images), so
  /// far, on any thread: the training log's bad_images. 0 for a data set read whole at construction.
  virtual int64_t bad_examples() const { return 0; }
};

/// Whole images and labels held in memory. u8 images are scaled to [0, 1] (x / 255) on the way out;
/// (N, H, W) images get a channel dim.
class TensorDataset : public Dataset {
 public:
  TensorDataset(Tensor images, Tensor labels);  ///< images (N, H, W) or (N, C, H, W), labels (N); ShapeError otherwise.
  int64_t size() const override { return labels_.numel(); }
  Batch get_batch(const std::vector<int64_t>& indices) const override;
  /// Keeps the first n examples (all when n <= 0 or n >= size()).
  void truncate(int64_t n);
  const Tensor& images() const { return images_; }  ///< (N, C, H, W), as stored
  const Tensor& labels() const { return labels_; }  ///< i64 (N)

 private:
  Tensor images_, labels_;
};

/// Fashion-MNIST (or MNIST) from `dir`: {train,t10k}-{images-idx3,labels-idx1}-ubyte[.gz], looked
/// for in dir, dir/raw and dir/FashionMNIST/raw. Images (N,1,28,28), labels 0..9.
class FashionMNIST : public TensorDataset {
 public:
  /// The training set (60,000) or the test set (10,000); DataError when a file is missing or bad.
  FashionMNIST(const std::string& dir, bool train);
};

/// CIFAR-10 binary version from `dir` or dir/cifar-10-batches-bin: data_batch_1..5.bin for train,
/// test_batch.bin for test. Images (N,3,32,32).
class CIFAR10 : public TensorDataset {
 public:
  /// The training set (50,000) or the test set (10,000); DataError when a file is missing or bad.
  CIFAR10(const std::string& dir, bool train);
};

}  // namespace ember::data
