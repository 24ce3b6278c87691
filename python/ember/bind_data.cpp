// Data from Python: ember's built-in data sets (Fashion-MNIST, CIFAR-10, ImageFolder, in-memory image
// tensors) as one handle class, and the C++ DataLoader over them, whose batches are gathered (and
// augmented) on C++ threads while Python trains: next() releases the GIL until a batch is ready.
// Python data sets take ember.utils.data's Python loader instead; the seeded permutation and the
// distributed sampler's shares are bound here so both loaders visit examples in the same order.
#include <nanobind/stl/array.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/shared_ptr.h>

#include "python/ember/bind_train.h"

namespace ember::python {

namespace {

using data::Dataset;

nb::tuple batch_tuple(const data::Batch& b) { return nb::make_tuple(b.images, b.labels); }

// A batch transform of the C++ loader from a list of steps, each a tuple naming a transform of
// data/transforms.h and its arguments: ("normalize", mean, std), ("random_crop", size, padding),
// ("random_horizontal_flip", p). Applied in order on the loader's threads, seeded per batch.
data::BatchTransform batch_transform(nb::handle steps) {
  struct Step {
    std::string name;
    std::vector<float> mean, std;
    int64_t size = 0, padding = 0;
    double p = 0;
  };
  std::vector<Step> plan;
  for (nb::handle item : nb::borrow<nb::sequence>(steps)) {
    const nb::tuple t = nb::borrow<nb::tuple>(item);
    Step s;
    s.name = nb::cast<std::string>(t[0]);
    if (s.name == "normalize") {
      s.mean = nb::cast<std::vector<float>>(t[1]);
      s.std = nb::cast<std::vector<float>>(t[2]);
    } else if (s.name == "random_crop") {
      s.size = nb::cast<int64_t>(t[1]);
      s.padding = nb::cast<int64_t>(t[2]);
    } else if (s.name == "random_horizontal_flip") {
      s.p = nb::cast<double>(t[1]);
    } else {
      throw ValueError("DataLoader: unknown batch transform '" + s.name + "'");
    }
    plan.push_back(std::move(s));
  }
  if (plan.empty()) return {};
  return [plan](data::Batch& b, Generator& gen) {
    for (const Step& s : plan) {
      if (s.name == "normalize") b.images = data::normalize(b.images, s.mean, s.std);
      else if (s.name == "random_crop") b.images = data::random_crop(b.images, s.size, s.padding, gen);
      else b.images = data::random_horizontal_flip(b.images, s.p, gen);
    }
  };
}

// A name from the file system as Python's os.listdir gives it: bytes that are not UTF-8 kept as
// surrogates (os.fsencode gives them back), not a UnicodeDecodeError.
nb::str file_system_str(const std::string& name) {
  return nb::steal<nb::str>(PyUnicode_DecodeFSDefaultAndSize(name.data(), static_cast<Py_ssize_t>(name.size())));
}

data::ImageFolder& image_folder(Dataset& d) {
  auto* f = dynamic_cast<data::ImageFolder*>(&d);
  if (!f) throw ValueError("this data set is not an ImageFolder");
  return *f;
}

}  // namespace

void bind_data(nb::module_& m) {
  nb::class_<Dataset>(m, "_Dataset", doc::data_Dataset)
      .def("__len__", &Dataset::size)
      .def(
          "get_batch",
          [](const Dataset& d, const std::vector<int64_t>& indices, uint64_t seed, int64_t epoch) {
            data::Batch b;
            {
              nb::gil_scoped_release release;
              b = d.get_epoch_batch(indices, seed, epoch);
            }
            return batch_tuple(b);
          },
          "indices"_a, "seed"_a = 0, "epoch"_a = 0,
          "(images, labels) of the examples at indices, as epoch `epoch` of a loader seeded with `seed` sees them.")
      .def("bad_examples", &Dataset::bad_examples, doc::data_Dataset_bad_examples)
      .def(
          "classes",
          [](Dataset& d) {
            nb::list out;
            for (const auto& name : image_folder(d).classes()) out.append(file_system_str(name));
            return out;
          },
          "An ImageFolder's class names, sorted.")
      .def(
          "samples",
          [](Dataset& d) {
            nb::list out;
            for (const auto& s : image_folder(d).samples()) out.append(nb::make_tuple(file_system_str(s.path), s.label));
            return out;
          },
          "An ImageFolder's (path, label) of every example, in order.");

  using P = std::shared_ptr<Dataset>;
  m.def("_fashion_mnist", [](const std::string& dir, bool train) -> P { return std::make_shared<data::FashionMNIST>(dir, train); },
        "root"_a, "train"_a, doc::data_FashionMNIST);
  m.def("_cifar10", [](const std::string& dir, bool train) -> P { return std::make_shared<data::CIFAR10>(dir, train); },
        "root"_a, "train"_a, doc::data_CIFAR10);
  m.def("_image_tensor_dataset",
        [](Tensor images, Tensor labels, int64_t keep) -> P {
          auto d = std::make_shared<data::TensorDataset>(images, labels);
          d->truncate(keep);
          return d;
        },
        "images"_a, "labels"_a, "keep"_a = 0, "Images (N, [C,] H, W) and labels (N) in memory (u8 scaled to [0, 1]).");
  m.def("_truncate",
        [](Dataset& d, int64_t n) {
          auto* t = dynamic_cast<data::TensorDataset*>(&d);
          if (!t) throw ValueError("truncate: only in-memory data sets (Fashion-MNIST, CIFAR-10) can be cut");
          t->truncate(n);
        },
        "dataset"_a, "n"_a, doc::data_TensorDataset_truncate);
  m.def("_image_folder",
        [](const std::string& root, bool train, int64_t size, int64_t resize, std::pair<double, double> scale,
           std::pair<double, double> ratio, double flip_p, std::array<float, 3> mean, std::array<float, 3> stddev,
           DType dtype, bool channels_last, bool skip_bad) -> P {
          data::ImageFolderOptions o;
          o.transform = {train, size, resize, scale, ratio, flip_p, mean, stddev, dtype, channels_last};
          o.skip_bad_images = skip_bad;
          return std::make_shared<data::ImageFolder>(root, o);
        },
        "root"_a, "train"_a, "size"_a, "resize"_a, "scale"_a, "ratio"_a, "flip_p"_a, "mean"_a, "std"_a, "dtype"_a,
        "channels_last"_a, "skip_bad_images"_a, "Image files in class folders, decoded and transformed per batch.");

  m.def("_permutation", &data::permutation, "n"_a, "seed"_a, "epoch"_a, doc::data_permutation);
  m.def("_distributed_sampler_indices",
        [](int64_t size, int64_t epoch, int rank, int world_size, bool shuffle, uint64_t seed, bool drop_last) {
          return data::distributed_sampler({rank, world_size, shuffle, seed, drop_last})(size, epoch);
        },
        "size"_a, "epoch"_a, "rank"_a, "world_size"_a, "shuffle"_a, "seed"_a, "drop_last"_a,
        "This rank's share of an epoch (data::distributed_sampler).");

  nb::class_<data::DataLoader>(m, "_DataLoader", "ember's C++ DataLoader; ember.utils.data.DataLoader drives it.")
      .def(
          "__init__",
          [](data::DataLoader* self, P dataset, int64_t batch_size, bool shuffle, uint64_t seed, bool drop_last,
             int num_workers, int prefetch_factor, std::optional<nb::tuple> distributed, nb::handle transforms,
             bool pin_memory) {
            data::DataLoaderOptions o;
            o.batch_size = batch_size;
            o.shuffle = shuffle;
            o.seed = seed;
            o.drop_last = drop_last;
            o.num_workers = num_workers;
            o.prefetch_factor = prefetch_factor;
            o.pin_memory = pin_memory;
            if (distributed) {
              const nb::tuple& t = *distributed;  // (rank, world_size, shuffle, seed, drop_last)
              o.sampler = data::distributed_sampler({nb::cast<int>(t[0]), nb::cast<int>(t[1]), nb::cast<bool>(t[2]),
                                                     nb::cast<uint64_t>(t[3]), nb::cast<bool>(t[4])});
            }
            if (!transforms.is_none()) o.transform = batch_transform(transforms);
            new (self) data::DataLoader(std::move(dataset), std::move(o));
          },
          "dataset"_a, "batch_size"_a, "shuffle"_a, "seed"_a, "drop_last"_a, "num_workers"_a, "prefetch_factor"_a,
          "distributed"_a.none(), "transforms"_a.none(), "pin_memory"_a, nb::keep_alive<1, 2>())
      .def("__len__", &data::DataLoader::size, doc::data_DataLoader_size)
      .def(
          "next",
          [](data::DataLoader& l) -> nb::object {
            std::optional<data::Batch> b;
            {
              nb::gil_scoped_release release;
              b = l.next();
            }
            if (!b) return nb::none();
            return batch_tuple(*b);
          },
          "The next batch (images, labels) of the current epoch, or None when it is done.")
      .def("set_epoch", &data::DataLoader::set_epoch, "epoch"_a, doc::data_DataLoader_set_epoch)
      .def("position",
           [](const data::DataLoader& l) { return nb::make_tuple(l.position().epoch, l.position().batch); },
           "(epoch, next batch).")
      .def("set_position", [](data::DataLoader& l, int64_t e, int64_t b) { l.set_position({e, b}); }, "epoch"_a,
           "batch"_a, "Goes to a saved position.")
      .def("epoch_order", &data::DataLoader::epoch_order, "epoch"_a, doc::data_DataLoader_epoch_order);
}

}  // namespace ember::python
