// Files from Python: safetensors (tensor/safetensors.h), the format ember.save_file / load_file read
// and write, and the training checkpoints of train/checkpoint.h that ember's C++ training program
// writes (one safetensors file: "model.<name>", "optimizer.<key>", ... and counters in the metadata).
// Errors keep ember's types and messages, which name the file: FormatError for a malformed one,
// IOError for one that cannot be read or written.
#include <nanobind/stl/map.h>
#include <nanobind/stl/pair.h>

#include "python/ember/bind_train.h"

namespace ember::python {

namespace {

nb::dict checkpoint_dict(const train::Checkpoint& c) {
  nb::dict d;
  d["model"] = nb::cast(c.model);
  d["optimizer"] = nb::cast(c.optimizer);
  d["scheduler"] = nb::cast(c.scheduler);
  d["precision"] = nb::cast(c.precision);
  d["runner"] = nb::cast(c.runner);
  d["epoch"] = c.epoch;
  d["iteration"] = c.iteration;
  d["loader_position"] = nb::make_tuple(c.loader.epoch, c.loader.batch);
  d["rng"] = nb::make_tuple(c.rng.seed, c.rng.offset);
  d["info"] = nb::cast(c.info);
  return d;
}

}  // namespace

void bind_io(nb::module_& m) {
  m.def("_write_file_atomic",
        [](const std::string& path, nb::bytes data) {
          nb::gil_scoped_release release;  // bytes are immutable: the buffer stays as it is meanwhile
          write_file_atomic(path, data.c_str(), data.size());
        },
        "path"_a, "data"_a, "Replaces the file at path with data atomically (tensor/atomic_file.h's rules).");
  m.def("_save_safetensors",
        [](const std::string& path, const StateDict& tensors, const std::map<std::string, std::string>& metadata) {
          nb::gil_scoped_release release;
          save_safetensors(path, tensors, metadata);
        },
        "path"_a, "tensors"_a, "metadata"_a, doc::save_safetensors);
  m.def("_load_safetensors",
        [](const std::string& path) {
          SafetensorsFile f;
          {
            nb::gil_scoped_release release;
            f = load_safetensors(path);
          }
          return std::make_pair(f.tensors, f.metadata);
        },
        "path"_a, "(tensors by name, metadata) of a safetensors file, fully validated; tensors on the CPU.");
  m.def("_load_checkpoint",
        [](const std::string& path) {
          train::Checkpoint c;
          {
            nb::gil_scoped_release release;
            c = train::load_checkpoint(path);
          }
          return checkpoint_dict(c);
        },
        "path"_a, "The sections of an ember training checkpoint (sharded ones put together).");
  m.def("_save_checkpoint",
        [](const std::string& path, const StateDict& model, const StateDict& optimizer, const StateDict& scheduler,
           int64_t epoch, int64_t iteration, const std::map<std::string, std::string>& info) {
          train::Checkpoint c;
          c.model = model;
          c.optimizer = optimizer;
          c.scheduler = scheduler;
          c.epoch = epoch;
          c.iteration = iteration;
          c.loader = {epoch, 0};
          c.rng = default_generator().state();
          c.info = info;
          nb::gil_scoped_release release;
          train::save_checkpoint(path, c);
        },
        "path"_a, "model"_a, "optimizer"_a, "scheduler"_a, "epoch"_a, "iteration"_a, "info"_a,
        "Writes an ember training checkpoint (the C++ program's format) atomically.");
}

}  // namespace ember::python
