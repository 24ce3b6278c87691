#include "train/checkpoint.h"

#include <array>
#include <charconv>
#include <utility>

#include "tensor/ops.h"
#include "tensor/safetensors.h"

namespace ember::train {

namespace {

constexpr const char* kFormat = "ember-checkpoint/1";

// The state dicts of a checkpoint (const or not) with the prefixes their tensors get in the file.
template <class C>
auto sections(C& c) {
  return std::array{std::pair{std::string("model."), &c.model}, std::pair{std::string("optimizer."), &c.optimizer},
                    std::pair{std::string("scheduler."), &c.scheduler}, std::pair{std::string("precision."), &c.precision},
                    std::pair{std::string("runner."), &c.runner}};
}

int64_t parse_counter(const std::string& path, const std::map<std::string, std::string>& meta, const std::string& key) {
  const auto it = meta.find(key);
  if (it == meta.end()) throw FormatError(path + ": checkpoint metadata lacks \"" + key + "\"");
  int64_t v = 0;
  const std::string& s = it->second;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size() || v < 0)
    throw FormatError(path + ": checkpoint metadata \"" + key + "\" is \"" + s + "\", not a count");
  return v;
}

}  // namespace

void save_checkpoint(const std::string& path, const Checkpoint& checkpoint) {
  StateDict tensors;
  const Checkpoint& c = checkpoint;
  for (const auto& [prefix, dict] : sections(c))
    for (const auto& [name, t] : *dict) tensors[prefix + name] = t;
  // u64 seed and offset kept bit for bit in i64 slots.
  tensors["rng.default"] = from_vector(std::vector<int64_t>{static_cast<int64_t>(c.rng.seed),
                                                            static_cast<int64_t>(c.rng.offset)}, {2});
  std::map<std::string, std::string> meta = {
      {"format", kFormat},
      {"epoch", std::to_string(c.epoch)},
      {"iteration", std::to_string(c.iteration)},
      {"loader.epoch", std::to_string(c.loader.epoch)},
      {"loader.batch", std::to_string(c.loader.batch)},
  };
  for (const auto& [key, value] : c.runner_text) meta["runner." + key] = value;
  for (const auto& [key, value] : c.info) meta["info." + key] = value;
  save_safetensors(path, tensors, meta);
}

Checkpoint load_checkpoint(const std::string& path) {
  SafetensorsFile file = load_safetensors(path);
  const auto format = file.metadata.find("format");
  if (format == file.metadata.end() || format->second != kFormat)
    throw FormatError(path + ": not an ember checkpoint (metadata \"format\" is " +
                      (format == file.metadata.end() ? std::string("missing") : "\"" + format->second + "\"") +
                      ", expected \"" + kFormat + "\")");
  Checkpoint c;
  c.epoch = parse_counter(path, file.metadata, "epoch");
  c.iteration = parse_counter(path, file.metadata, "iteration");
  c.loader = {parse_counter(path, file.metadata, "loader.epoch"), parse_counter(path, file.metadata, "loader.batch")};
  for (const auto& [key, value] : file.metadata) {
    if (key.starts_with("runner.")) c.runner_text[key.substr(7)] = value;
    if (key.starts_with("info.")) c.info[key.substr(5)] = value;
  }

  const auto rng = file.tensors.find("rng.default");
  if (rng == file.tensors.end() || rng->second.dtype() != DType::i64 || rng->second.shape() != Shape{2})
    throw FormatError(path + ": checkpoint lacks \"rng.default\" as an i64 tensor of shape (2)");
  const std::vector<int64_t> state = rng->second.to_vector<int64_t>();
  c.rng = {static_cast<uint64_t>(state[0]), static_cast<uint64_t>(state[1])};
  file.tensors.erase(rng);

  for (const auto& [name, t] : file.tensors) {
    bool placed = false;
    for (const auto& [prefix, dict] : sections(c))
      if (name.starts_with(prefix)) {
        (*dict)[name.substr(prefix.size())] = t;
        placed = true;
        break;
      }
    if (!placed) throw FormatError(path + ": unexpected tensor \"" + name + "\" in a checkpoint");
  }
  return c;
}

}  // namespace ember::train
