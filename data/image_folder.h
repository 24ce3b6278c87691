/// @file
/// ImageFolder: a data set of image files, one folder per class, with torchvision's semantics
/// (torchvision.datasets.ImageFolder, what mmpretrain and timm read for ImageNet):
///   root/n01440764/n01440764_10026.JPEG -> class 0
///   root/n01443537/sub/x.png            -> class 1 (files are found in subfolders too)
/// The classes are the names of root's subfolders, sorted; a class's label is its index. Files whose
/// extension is .jpg, .jpeg or .png (any case) are found recursively, following symbolic links, and
/// ordered as torchvision orders them (by folder, then by name). The list is made once, at
/// construction, and nothing is written beside the data.
///
/// Each example is read, decoded and transformed when a batch asks for it (data/image_transform.h:
/// RandomResizedCrop and flip for training, Resize and CenterCrop for evaluation, normalised into the
/// batch's dtype and memory format). Its randomness comes from (loader seed, epoch, index), so a batch
/// does not depend on which worker made it. A bad file (corrupt, truncated, empty, not an image)
/// raises DataError naming it, or, with skip_bad_images, is replaced by the next good example in
/// order and counted (bad_examples()).
#pragma once

#include <atomic>
#include <map>
#include <string>
#include <vector>

#include "data/dataset.h"
#include "data/image_transform.h"

namespace ember::data {

/// ImageFolder's settings.
struct ImageFolderOptions {
  ImageTransformOptions transform{};  ///< the per-image pipeline
  /// false: a bad file raises DataError; true: it is replaced by the next good example and counted
  bool skip_bad_images = false;
};

/// A data set of image files in class folders (see the file's description).
class ImageFolder : public Dataset {
 public:
  /// One example: a file and its label.
  struct Sample {
    std::string path;  ///< the file
    int64_t label;     ///< its class's index
  };

  /// Lists the classes and files under `root`. DataError naming the path when root is not a folder or
  /// cannot be read, has no class folder, or a class folder holds no image file; ValueError for bad
  /// transform options (check_image_transform).
  explicit ImageFolder(std::string root, ImageFolderOptions options = {});

  int64_t size() const override { return static_cast<int64_t>(samples_.size()); }
  /// get_epoch_batch(indices, 0, 0).
  Batch get_batch(const std::vector<int64_t>& indices) const override;
  /// The examples at `indices`, transformed: images (B, 3, size, size) in the options' dtype (in
  /// channels-last memory when asked), labels i64 (B). IndexError for an index out of range; DataError
  /// for a bad file unless skip_bad_images.
  Batch get_epoch_batch(const std::vector<int64_t>& indices, uint64_t seed, int64_t epoch) const override;

  const std::string& root() const { return root_; }                       ///< The folder, as given.
  const std::vector<std::string>& classes() const { return classes_; }    ///< Class names, sorted.
  const std::map<std::string, int64_t>& class_to_idx() const { return class_to_idx_; }  ///< Name to label.
  const std::vector<Sample>& samples() const { return samples_; }          ///< Every example, in order.
  const ImageFolderOptions& options() const { return options_; }          ///< The settings.
  /// Bad files met so far and replaced (skip_bad_images), over every batch made, on any thread.
  int64_t bad_examples() const override { return bad_.load(); }

 private:
  std::string root_;
  ImageFolderOptions options_;
  std::vector<std::string> classes_;
  std::map<std::string, int64_t> class_to_idx_;
  std::vector<Sample> samples_;
  mutable std::atomic<int64_t> bad_{0};
};

}  // namespace ember::data
