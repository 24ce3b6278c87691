// TensorDataset and the file layouts of Fashion-MNIST and CIFAR-10.
#include "data/dataset.h"

#include <filesystem>

#include "data/cifar10.h"
#include "tensor/ops.h"
#include "tensor/printable.h"

namespace ember::data {

namespace fs = std::filesystem;

TensorDataset::TensorDataset(Tensor images, Tensor labels) {
  if (images.dim() == 3) images = images.unsqueeze(1);
  if (images.dim() != 4)
    throw ShapeError("TensorDataset: images must be (N,H,W) or (N,C,H,W), got " + to_string(images.shape()));
  if (labels.dim() != 1 || labels.numel() != images.size(0))
    throw ShapeError("TensorDataset: labels " + to_string(labels.shape()) + " do not match images " +
                     to_string(images.shape()));
  images_ = images.contiguous();
  labels_ = labels.to(DType::i64).contiguous();
}

Batch TensorDataset::get_batch(const std::vector<int64_t>& indices) const {
  const int64_t n = size();
  for (int64_t i : indices)
    if (i < 0 || i >= n)
      throw IndexError("TensorDataset::get_batch: index " + std::to_string(i) + " out of range for size " +
                       std::to_string(n));
  const Tensor idx = from_vector(indices, {int64_t(indices.size())});
  Tensor images = index_select(images_, 0, idx);
  images = images_.dtype() == DType::u8 ? div(images.to(DType::f32), 255.0) : images.to(DType::f32);
  // Pageable memory: DataLoader's pin_memory option moves the batch to pinned memory when asked.
  return {images, index_select(labels_, 0, idx)};
}

void TensorDataset::truncate(int64_t n) {
  if (n <= 0 || n >= size()) return;
  images_ = images_.narrow(0, 0, n).contiguous();
  labels_ = labels_.narrow(0, 0, n).contiguous();
}

namespace {

void require_dir(const std::string& dir, const char* what) {
  std::error_code ec;
  const fs::file_status st = fs::status(dir, ec);
  if (st.type() == fs::file_type::not_found)
    throw DataError(std::string(what) + ": data directory " + printable_path(dir) + " does not exist");
  if (ec) throw DataError(std::string(what) + ": data directory " + printable_path(dir) + " cannot be read: " + ec.message());
  if (st.type() != fs::file_type::directory)
    throw DataError(std::string(what) + ": data directory " + printable_path(dir) + " is not a directory");
}

// The first existing path among dir/<sub>/<name>[.gz]; DataError listing every path tried otherwise.
std::string find_file(const std::string& dir, const std::vector<std::string>& subdirs, const std::string& name,
                      const char* what) {
  std::string tried;
  for (const auto& sub : subdirs)
    for (const char* ext : {"", ".gz"}) {
      const fs::path p = (sub.empty() ? fs::path(dir) : fs::path(dir) / sub) / (name + ext);
      // Whatever is there (a directory, a FIFO, a dangling link) is the file meant: its reader then
      // says what is wrong with it, rather than "not found".
      std::error_code ec;
      if (fs::exists(fs::symlink_status(p, ec))) return p.string();
      tried += (tried.empty() ? "" : ", ") + p.string();
    }
  throw DataError(std::string(what) + ": " + name + " not found in " + printable_path(dir) + " (looked for " + tried + ")");
}

void check_labels(const Tensor& labels, int64_t classes, const std::string& path) {
  const int64_t* p = labels.data<int64_t>();
  for (int64_t i = 0; i < labels.numel(); ++i)
    if (p[i] < 0 || p[i] >= classes)
      throw DataError(printable_path(path) + ": label " + std::to_string(i) + " is " + std::to_string(p[i]) + ", expected 0.." +
                      std::to_string(classes - 1));
}

TensorDataset load_fashion_mnist(const std::string& dir, bool train) {
  require_dir(dir, "FashionMNIST");
  const std::string prefix = train ? "train" : "t10k";
  const std::vector<std::string> subs = {"", "raw", "FashionMNIST/raw"};
  const std::string ipath = find_file(dir, subs, prefix + "-images-idx3-ubyte", "FashionMNIST");
  const std::string lpath = find_file(dir, subs, prefix + "-labels-idx1-ubyte", "FashionMNIST");
  Tensor images = read_idx_images(ipath), labels = read_idx_labels(lpath);
  if (images.size(1) != 28 || images.size(2) != 28)
    throw DataError(ipath + ": bad dims: images are " + std::to_string(images.size(1)) + "x" +
                    std::to_string(images.size(2)) + ", expected 28x28");
  if (labels.numel() != images.size(0))
    throw DataError(lpath + ": holds " + std::to_string(labels.numel()) + " labels but " + ipath + " holds " +
                    std::to_string(images.size(0)) + " images");
  check_labels(labels, 10, lpath);
  return TensorDataset(images, labels);
}

TensorDataset load_cifar10(const std::string& dir, bool train) {
  require_dir(dir, "CIFAR10");
  std::vector<std::string> names;
  if (train)
    for (int i = 1; i <= 5; ++i) names.push_back("data_batch_" + std::to_string(i) + ".bin");
  else
    names.push_back("test_batch.bin");
  std::vector<Tensor> images, labels;
  for (const auto& name : names) {
    LabeledImages part = read_cifar10(find_file(dir, {"", "cifar-10-batches-bin"}, name, "CIFAR10"));
    images.push_back(part.images);
    labels.push_back(part.labels);
  }
  return images.size() == 1 ? TensorDataset(images[0], labels[0]) : TensorDataset(cat(images), cat(labels));
}

}  // namespace

FashionMNIST::FashionMNIST(const std::string& dir, bool train) : TensorDataset(load_fashion_mnist(dir, train)) {}
CIFAR10::CIFAR10(const std::string& dir, bool train) : TensorDataset(load_cifar10(dir, train)) {}

}  // namespace ember::data
