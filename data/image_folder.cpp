#include "data/image_folder.h"

#include <algorithm>
#include <cctype>
#include <filesystem>

#include "tensor/file_bytes.h"
#include "tensor/ops.h"

namespace ember::data {

namespace fs = std::filesystem;

namespace {

// torchvision's IMG_EXTENSIONS, cut to the formats decode_image reads.
bool is_image_file(const fs::path& p) {
  std::string ext = p.extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return std::tolower(c); });
  return ext == ".jpg" || ext == ".jpeg" || ext == ".png";
}

// Replacements tried for one example before giving up: a folder this damaged is not worth training on.
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

ImageFolder::ImageFolder(std::string root, ImageFolderOptions options) : root_(std::move(root)), options_(options) {
  check_image_transform(options_.transform);
  std::error_code ec;
  if (!fs::is_directory(root_, ec)) throw DataError(root_ + ": not a folder (ImageFolder wants one subfolder per class)");
  try {
    for (const fs::directory_entry& e : fs::directory_iterator(root_))
      if (e.is_directory()) classes_.push_back(e.path().filename().string());
    std::sort(classes_.begin(), classes_.end());
    if (classes_.empty()) throw DataError(root_ + ": no class folder in it (ImageFolder wants one subfolder per class)");
    std::vector<std::string> empty;
    for (size_t c = 0; c < classes_.size(); ++c) {
      class_to_idx_[classes_[c]] = static_cast<int64_t>(c);
      // (folder, name) pairs, sorted: torchvision walks the folders in sorted order, each one's files sorted.
      std::vector<std::pair<std::string, std::string>> files;
      for (const fs::directory_entry& e :
           fs::recursive_directory_iterator(fs::path(root_) / classes_[c], fs::directory_options::follow_directory_symlink))
        if (e.is_regular_file() && is_image_file(e.path()))
          files.emplace_back(e.path().parent_path().string(), e.path().filename().string());
      std::sort(files.begin(), files.end());
      if (files.empty()) empty.push_back(classes_[c]);
      for (auto& [folder, name] : files) samples_.push_back({(fs::path(folder) / name).string(), static_cast<int64_t>(c)});
    }
    if (!empty.empty()) {
      std::string names;
      for (const std::string& n : empty) names += (names.empty() ? "" : ", ") + n;
      throw DataError(root_ + ": no .jpg, .jpeg or .png file in the class folder(s) " + names);
    }
  } catch (const fs::filesystem_error& e) {
    throw DataError(root_ + ": cannot list " + e.path1().string() + " (" + e.code().message() + ")");
  }
}

Batch ImageFolder::get_batch(const std::vector<int64_t>& indices) const { return get_epoch_batch(indices, 0, 0); }

Batch ImageFolder::get_epoch_batch(const std::vector<int64_t>& indices, uint64_t seed, int64_t epoch) const {
  const ImageTransformOptions& t = options_.transform;
  const int64_t n = size(), batch = static_cast<int64_t>(indices.size());
  for (int64_t i : indices)
    if (i < 0 || i >= n)
      throw IndexError("ImageFolder: index " + std::to_string(i) + " out of range for " + std::to_string(n) + " examples");
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
      const Sample& s = samples_[static_cast<size_t>(i)];
      RandomStream rs(key, static_cast<uint64_t>(i) << 12);  // 4096 Philox blocks per example: far more than drawn
      std::string error;
      try {
        transform_image(read_regular_file(s.path), s.path, t, rs, slot);
        labels[static_cast<size_t>(b)] = s.label;
        break;
      } catch (const DataError& e) {
        if (!options_.skip_bad_images) throw;
        error = e.what();
      } catch (const IOError& e) {
        if (!options_.skip_bad_images) throw;
        error = e.what();
      }
      ++bad_images_;
      if (attempt == kMaxReplacements)
        throw DataError(root_ + ": " + std::to_string(kMaxReplacements) + " bad files in a row from " +
                        samples_[static_cast<size_t>(indices[static_cast<size_t>(b)])].path + "; the last: " + error);
      i = (i + 1) % n;
    }
  }
  return {images, from_vector(labels, {batch})};
}

}  // namespace ember::data
