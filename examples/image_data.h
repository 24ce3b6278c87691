// The images the ladder's classifiers learn from (examples 03 to 07): a real data set when its
// files are there (Fashion-MNIST from Debian's dataset-fashion-mnist, CIFAR-10's binary version from
// --data), else a synthetic stand-in of the same shape, so that every example runs anywhere, a CI
// machine without the data included, and says which one it used.
#pragma once

#include <CLI/CLI.hpp>

#include <filesystem>
#include <memory>
#include <string>

#include "data/dataset.h"
#include "tensor/ops.h"
#include "train/model_zoo.h"

namespace ember_examples {

// Where Debian's dataset-fashion-mnist puts the files (examples/train looks there too).
inline const char* const kFashionMnistDir = "/usr/share/datasets/fashion-mnist";

struct ImageData {
  std::shared_ptr<ember::data::TensorDataset> train, test;
  ember::train::ImageShape shape;
  std::string source;  // what was loaded, for the log
};

// Images of `shape` in shape.classes classes: image = 0.5 + 0.25 pattern[label] + noise_std N(0, 1).
// Each class has one fixed random pattern, coarse (blocks of 4x4 pixels) as real images are
// smooth; the noise hides it in any one pixel, so a model must pool evidence over the image.
inline ImageData synthetic_images(const ember::train::ImageShape& shape, int64_t train_n, int64_t test_n, uint64_t seed,
                                  double noise_std = 0.5) {
  ember::Generator gen(seed);
  const int64_t c = shape.channels, s = shape.size, coarse = (s + 3) / 4;
  // (classes, c, coarse, 1, coarse, 1) stretched to 4x4 blocks: (classes, c, 4 coarse, 4 coarse), cut to s x s.
  const ember::Tensor patterns = ember::randn({shape.classes, c, coarse, 1, coarse, 1}, {}, &gen)
                                     .expand({shape.classes, c, coarse, 4, coarse, 4})
                                     .reshape({shape.classes, c, coarse * 4, coarse * 4})
                                     .narrow(2, 0, s)
                                     .narrow(3, 0, s);
  const auto make = [&](int64_t n) {
    const ember::Tensor labels = ember::randint(0, shape.classes, {n}, ember::DType::i64, &gen);
    const ember::Tensor images =
        ember::index_select(patterns, 0, labels) * 0.25 + 0.5 + ember::randn({n, c, s, s}, {}, &gen) * noise_std;
    return std::make_shared<ember::data::TensorDataset>(images, labels);
  };
  ImageData d{make(train_n), make(test_n), shape, ""};
  d.source = "synthetic " + std::to_string(c) + "x" + std::to_string(s) + "x" + std::to_string(s) + " images, " +
             std::to_string(shape.classes) + " classes (" + std::to_string(train_n) + " train, " +
             std::to_string(test_n) + " test, seed " + std::to_string(seed) + ")";
  return d;
}

// The first train_n and test_n images of a data set of data/dataset.h (FashionMNIST, CIFAR10) in dir.
template <class DataSet>
ImageData first_images(const std::string& dir, const ember::train::ImageShape& shape, int64_t train_n, int64_t test_n,
                       const std::string& name) {
  ImageData d{std::make_shared<DataSet>(dir, /*train=*/true), std::make_shared<DataSet>(dir, false), shape,
              name + " from " + dir};
  d.train->truncate(train_n);
  d.test->truncate(test_n);
  return d;
}

// --data for the examples on Fashion-MNIST: Debian's directory by default, synthetic 1x28x28 images
// where that is absent; a directory named on the command line must hold the data set.
class FashionMnistFlag {
 public:
  explicit FashionMnistFlag(CLI::App& app)
      : option_(app.add_option("--data", dir_, "Fashion-MNIST directory (synthetic images when the default one "
                               "is absent)")->capture_default_str()) {}
  FashionMnistFlag(const FashionMnistFlag&) = delete;  // the option writes into dir_
  FashionMnistFlag& operator=(const FashionMnistFlag&) = delete;
  // The first train_n and test_n images; DataError says what a named directory lacks.
  ImageData load(int64_t train_n, int64_t test_n, uint64_t seed) const {
    const ember::train::ImageShape shape{1, 28, 10};
    std::error_code ec;
    if (option_->count() == 0 && !std::filesystem::is_directory(dir_, ec))
      return synthetic_images(shape, train_n, test_n, seed);
    return first_images<ember::data::FashionMNIST>(dir_, shape, train_n, test_n, "Fashion-MNIST");
  }

 private:
  std::string dir_ = kFashionMnistDir;
  CLI::Option* option_;
};

// CIFAR-10's binary version from `dir` when one is given, else synthetic 3x32x32.
inline ImageData cifar10_or_synthetic(const std::string& dir, int64_t train_n, int64_t test_n, uint64_t seed) {
  const ember::train::ImageShape shape{3, 32, 10};
  if (dir.empty()) return synthetic_images(shape, train_n, test_n, seed);
  return first_images<ember::data::CIFAR10>(dir, shape, train_n, test_n, "CIFAR-10");
}

}  // namespace ember_examples
