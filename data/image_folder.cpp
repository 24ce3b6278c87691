#include "data/image_folder.h"

#include <algorithm>
#include <cctype>
#include <filesystem>

#include "tensor/file_bytes.h"
#include "data/image_batch.h"
#include "tensor/printable.h"

namespace ember::data {

namespace fs = std::filesystem;

namespace {

// torchvision's IMG_EXTENSIONS, cut to the formats decode_image reads.
bool is_image_file(const fs::path& p) {
  std::string ext = p.extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return std::tolower(c); });
  return ext == ".jpg" || ext == ".jpeg" || ext == ".png";
}

}  // namespace

ImageFolder::ImageFolder(std::string root, ImageFolderOptions options) : root_(std::move(root)), options_(options) {
  check_image_transform(options_.transform);
  std::error_code ec;
  if (!fs::is_directory(root_, ec)) throw DataError(printable_path(root_) + ": not a folder (ImageFolder wants one subfolder per class)");
  try {
    for (const fs::directory_entry& e : fs::directory_iterator(root_))
      if (e.is_directory()) classes_.push_back(e.path().filename().string());
    std::sort(classes_.begin(), classes_.end());
    if (classes_.empty()) throw DataError(printable_path(root_) + ": no class folder in it (ImageFolder wants one subfolder per class)");
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
      for (const std::string& n : empty) names += (names.empty() ? "" : ", ") + printable(n);  // names from the disk
      throw DataError(printable_path(root_) + ": no .jpg, .jpeg or .png file in the class folder(s) " + names);
    }
  } catch (const fs::filesystem_error& e) {
    throw DataError(printable_path(root_) + ": cannot list " + printable_path(e.path1().string()) + " (" + e.code().message() + ")");
  }
}

Batch ImageFolder::get_batch(const std::vector<int64_t>& indices) const { return get_epoch_batch(indices, 0, 0); }

Batch ImageFolder::get_epoch_batch(const std::vector<int64_t>& indices, uint64_t seed, int64_t epoch) const {
  const ImageExamples examples{
      size(),
      [this](int64_t i) {
        const std::string& path = samples_[static_cast<size_t>(i)].path;
        return EncodedImage{read_regular_file(path), printable_path(path)};
      },
      [this](int64_t i) { return samples_[static_cast<size_t>(i)].label; },
      "ImageFolder " + root_};
  return make_image_batch(examples, indices, seed, epoch, options_.transform, options_.skip_bad_images, bad_);
}

}  // namespace ember::data
