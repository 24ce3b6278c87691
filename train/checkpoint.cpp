#include "train/checkpoint.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <filesystem>
#include <optional>
#include <string_view>
#include <utility>

#include "tensor/atomic_file.h"
#include "tensor/decimal.h"
#include "tensor/ops.h"
#include "tensor/printable.h"
#include "tensor/safetensors.h"

namespace ember::train {

namespace {

namespace fs = std::filesystem;

constexpr const char* kFormat = "ember-checkpoint/1";
constexpr const char* kShardFormat = "ember-checkpoint-shard/1";
constexpr int64_t kMaxShards = 1 << 16;

// The state dicts of a checkpoint (const or not) with the prefixes their tensors get in the file.
template <class C>
auto sections(C& c) {
  return std::array{std::pair{std::string("model."), &c.model}, std::pair{std::string("optimizer."), &c.optimizer},
                    std::pair{std::string("scheduler."), &c.scheduler}, std::pair{std::string("precision."), &c.precision},
                    std::pair{std::string("runner."), &c.runner}};
}

int64_t parse_counter(const std::string& path, const std::map<std::string, std::string>& meta, const std::string& key) {
  const auto it = meta.find(key);
  if (it == meta.end()) throw FormatError(printable_path(path) + ": checkpoint metadata lacks \"" + key + "\"");
  const auto v = parse_decimal(it->second, kMaxExactCount);
  if (!v)
    throw FormatError(printable_path(path) + ": checkpoint metadata \"" + key + "\" is \"" + printable(it->second, 40) +
                      "\", not a count from 0 to 2^53");
  return *v;
}

// "32,16" for a shape; "" for a 0-dim tensor.
std::string shape_text(const Shape& shape) {
  std::string out;
  for (const int64_t dim : shape) {
    if (!out.empty()) out += ',';
    out += std::to_string(dim);
  }
  return out;
}

// The shape in shape_text's form, or nullopt when it is malformed or holds more than 2^62 elements.
std::optional<Shape> parse_shape(const std::string& text) {
  Shape shape;
  int64_t elements = 1;
  for (size_t at = 0; at < text.size();) {
    const size_t comma = std::min(text.find(',', at), text.size());
    const auto dim = parse_decimal(std::string_view(text).substr(at, comma - at), int64_t(1) << 62);
    if (!dim || __builtin_mul_overflow(elements, *dim, &elements) || elements > (int64_t(1) << 62)) return std::nullopt;
    shape.push_back(*dim);
    at = comma + 1;
    if (comma + 1 == text.size()) return std::nullopt;  // a trailing comma
  }
  return shape;
}

// Where the shards of the checkpoint at `path` live: "<path without .safetensors>.shards".
fs::path shards_dir(const std::string& path) {
  std::string stem = path;
  if (stem.ends_with(".safetensors")) stem.resize(stem.size() - std::string(".safetensors").size());
  return fs::path(stem + ".shards");
}

Tensor rng_tensor(const GeneratorState& rng) {
  // u64 seed and offset kept bit for bit in i64 slots.
  return from_vector(std::vector<int64_t>{static_cast<int64_t>(rng.seed), static_cast<int64_t>(rng.offset)}, {2});
}

GeneratorState rng_of(const std::string& path, const StateDict& tensors) {
  const auto rng = tensors.find("rng.default");
  if (rng == tensors.end() || rng->second.dtype() != DType::i64 || rng->second.shape() != Shape{2})
    throw FormatError(printable_path(path) + ": checkpoint lacks \"rng.default\" as an i64 tensor of shape (2)");
  const std::vector<int64_t> state = rng->second.to_vector<int64_t>();
  return {static_cast<uint64_t>(state[0]), static_cast<uint64_t>(state[1])};
}

// The index file: the whole tensors and the counters, plus `extra` metadata.
void save_index(const std::string& path, const Checkpoint& c, const std::map<std::string, std::string>& extra) {
  StateDict tensors;
  for (const auto& [prefix, dict] : sections(c))
    for (const auto& [name, t] : *dict) tensors[prefix + name] = t;
  tensors["rng.default"] = rng_tensor(c.rng);
  std::map<std::string, std::string> meta = {
      {"format", kFormat},
      {"epoch", std::to_string(c.epoch)},
      {"iteration", std::to_string(c.iteration)},
      {"loader.epoch", std::to_string(c.loader.epoch)},
      {"loader.batch", std::to_string(c.loader.batch)},
  };
  for (const auto& [key, value] : c.runner_text) meta["runner." + key] = value;
  for (const auto& [key, value] : c.info) meta["info." + key] = value;
  for (const auto& [key, value] : extra) meta[key] = value;
  save_safetensors(path, tensors, meta);
}

// Every rank's `failed` flag; true when any rank's is set. `text` becomes the error of every rank.
void raise_if_any_failed(dist::ProcessGroup& group, bool failed, const std::string& what, const std::string& own_error) {
  Tensor flags = zeros({group.size()}, DType::f32);
  if (failed) {
    Tensor own = flags.narrow(0, group.rank(), 1);
    fill_(own, Scalar(1.0));
  }
  flags = flags.to(group.device());
  group.all_reduce(flags, dist::ReduceOp::max);
  const std::vector<float> f = flags.to_vector<float>();
  std::string ranks;
  for (int r = 0; r < group.size(); ++r)
    if (f[static_cast<size_t>(r)] != 0) ranks += (ranks.empty() ? "" : ", ") + std::to_string(r);
  if (ranks.empty()) return;
  throw IOError(group.rank_text() + ": " + what + " failed on rank(s) " + ranks + (own_error.empty() ? "" : ": " + own_error));
}

// The pieces of every shard of the index at `path`, put together into `c`'s sections.
void load_shards(const std::string& path, const std::map<std::string, std::string>& meta, Checkpoint& c) {
  const auto count = parse_decimal(meta.at("shards"), kMaxShards);
  if (!count || *count < 1)
    throw FormatError(printable_path(path) + ": checkpoint metadata \"shards\" is \"" + printable(meta.at("shards"), 40) + "\", not a count of 1 to " +
                      std::to_string(kMaxShards));
  struct Piece {
    int64_t offset;
    Tensor values;
    std::string file;
  };
  struct Logical {
    Shape shape;
    DType dtype;
    std::string file;  // where it was first seen
    std::vector<Piece> pieces;
  };
  std::map<std::string, Logical> logical;
  for (int64_t r = 0; r < *count; ++r) {
    const auto entry = meta.find("shard." + std::to_string(r));
    if (entry == meta.end()) throw FormatError(printable_path(path) + ": checkpoint metadata lacks \"shard." + std::to_string(r) + "\"");
    const fs::path rel(entry->second);
    if (rel.is_absolute() || rel.empty() || std::any_of(rel.begin(), rel.end(), [](const fs::path& part) { return part == ".."; }))
      throw FormatError(printable_path(path) + ": shard " + std::to_string(r) + " path \"" + printable(entry->second) +
                        "\" leaves the checkpoint's directory");
    const std::string file = (fs::path(path).parent_path() / rel).string();
    SafetensorsFile shard = load_safetensors(file);
    const auto format = shard.metadata.find("format");
    if (format == shard.metadata.end() || format->second != kShardFormat)
      throw FormatError(printable_path(file) + ": not an ember checkpoint shard (metadata \"format\" is " +
                        (format == shard.metadata.end() ? std::string("missing") : "\"" + printable(format->second, 40) + "\"") + ")");
    c.rank_rngs.push_back(rng_of(file, shard.tensors));
    shard.tensors.erase("rng.default");
    for (auto& [name, values] : shard.tensors) {
      const size_t at = name.rfind('@');
      const auto offset = at == std::string::npos ? std::nullopt : parse_decimal(std::string_view(name).substr(at + 1), int64_t(1) << 62);
      if (!offset) throw FormatError(printable_path(file) + ": tensor \"" + printable(name) + "\" is not named <key>@<offset>");
      const std::string key = name.substr(0, at);
      const auto shape_entry = shard.metadata.find("shape." + key);
      const auto shape = shape_entry == shard.metadata.end() ? std::nullopt : parse_shape(shape_entry->second);
      if (!shape)
        throw FormatError(printable_path(file) + ": no valid \"shape." + printable(key) + "\" in the metadata for tensor \"" + printable(name) + "\"");
      if (values.dim() != 1 || *offset + values.numel() > numel(*shape))
        throw FormatError(printable_path(file) + ": piece \"" + printable(name) + "\" of shape " + to_string(values.shape()) +
                          " does not fit in a tensor of shape " + to_string(*shape));
      auto [it, fresh] = logical.try_emplace(key, Logical{*shape, values.dtype(), file, {}});
      if (!fresh && (it->second.shape != *shape || it->second.dtype != values.dtype()))
        throw FormatError(printable_path(file) + ": \"" + printable(key) + "\" is " + dtype_name(values.dtype()) + " " + to_string(*shape) + " here but " +
                          dtype_name(it->second.dtype) + " " + to_string(it->second.shape) + " in " + it->second.file);
      it->second.pieces.push_back({*offset, values, file});
    }
  }
  for (auto& [key, t] : logical) {
    std::sort(t.pieces.begin(), t.pieces.end(), [](const Piece& a, const Piece& b) { return a.offset < b.offset; });
    // The pieces must tile the shape the metadata names before it is allocated: a shape of 2^60
    // elements is a file's error, to be named with the file, not an allocation's.
    const int64_t total = numel(t.shape);
    int64_t covered = 0;
    for (const Piece& p : t.pieces) {
      if (p.offset != covered)
        throw FormatError(printable_path(path) + ": the shards " + (p.offset > covered ? "leave out" : "hold twice") + " elements [" +
                          std::to_string(std::min(p.offset, covered)) + ", " + std::to_string(std::max(p.offset, covered)) +
                          ") of \"" + printable(key) + "\" (" + p.file + ")");
      covered += p.values.numel();
    }
    if (covered != total)
      throw FormatError(printable_path(path) + ": the shards leave out elements [" + std::to_string(covered) + ", " + std::to_string(total) +
                        ") of \"" + printable(key) + "\" (its shape " + to_string(t.shape) + " is from \"shape." +
                        printable(key) + "\" in " + t.file + ")");
    Tensor whole = empty(t.shape, t.dtype);
    Tensor flat = whole.view({total});
    for (const Piece& p : t.pieces) {
      Tensor slot = flat.narrow(0, p.offset, p.values.numel());
      copy_(slot, p.values);
    }
    bool placed = false;
    for (const auto& [prefix, dict] : sections(c))
      if (key.starts_with(prefix)) {
        if (!dict->emplace(key.substr(prefix.size()), whole).second)
          throw FormatError(printable_path(path) + ": \"" + printable(key) + "\" is both whole in the index and in pieces in the shards");
        placed = true;
        break;
      }
    if (!placed) throw FormatError(printable_path(path) + ": unexpected tensor \"" + printable(key) + "\" in the shards");
  }
}

}  // namespace

void remove_checkpoint(const std::string& path) {
  std::error_code ignored;
  fs::remove(path, ignored);
  fs::remove_all(shards_dir(path), ignored);
}

void save_checkpoint(const std::string& path, const Checkpoint& checkpoint, dist::ProcessGroup& group) {
  const int rank = group.rank(), ranks = group.size();
  // A token of rank 0's clock names this save's shards apart from an earlier save's of the same name.
  Tensor token = scalar_tensor(static_cast<int64_t>(std::chrono::steady_clock::now().time_since_epoch().count()), DType::i64)
                     .to(group.device());
  group.broadcast(token, 0);
  const std::string token_text = std::to_string(token.item<int64_t>());
  const fs::path dir = shards_dir(path);
  const auto shard_name = [&](int r) {
    return "rank" + std::to_string(r) + "-of-" + std::to_string(ranks) + "." + token_text +
           ".safetensors";
  };
  std::string error;
  try {
    fs::create_directories(dir);
    StateDict tensors;
    std::map<std::string, std::string> meta = {{"format", kShardFormat}};
    for (const TensorPiece& p : checkpoint.pieces) {
      if (p.values.dim() != 1 || p.offset < 0 || p.offset + p.values.numel() > numel(p.shape))
        throw ValueError("save_checkpoint: piece of " + p.key + " at " + std::to_string(p.offset) + " (" +
                         to_string(p.values.shape()) + ") does not fit in its shape " + to_string(p.shape));
      tensors[p.key + "@" + std::to_string(p.offset)] = p.values;
      meta["shape." + p.key] = shape_text(p.shape);
    }
    tensors["rng.default"] = rng_tensor(checkpoint.rng);
    save_safetensors((dir / shard_name(rank)).string(), tensors, meta);
  } catch (const std::exception& e) {
    error = e.what();
  }
  raise_if_any_failed(group, !error.empty(), "writing the shards of " + path, error);
  if (rank == 0) {
    try {
      std::map<std::string, std::string> shards = {{"shards", std::to_string(ranks)}};
      for (int r = 0; r < ranks; ++r) shards["shard." + std::to_string(r)] = (dir.filename() / shard_name(r)).string();
      save_index(path, checkpoint, shards);
      // The shards of an earlier save under this name are no longer named by the index.
      std::error_code ignored;
      for (const auto& entry : fs::directory_iterator(dir, ignored)) {
        const std::string name = entry.path().filename().string();
        bool current = false;
        for (int r = 0; r < ranks && !current; ++r) current = name == shard_name(r);
        if (!current) fs::remove(entry.path(), ignored);
      }
    } catch (const std::exception& e) {
      error = e.what();
    }
  }
  raise_if_any_failed(group, !error.empty(), "writing the index " + path, error);
}

void save_checkpoint(const std::string& path, const Checkpoint& checkpoint) {
  if (!checkpoint.pieces.empty())
    throw ValueError("save_checkpoint: " + printable_path(path) + ": a checkpoint with sharded pieces is saved by every rank of its group");
  save_index(path, checkpoint, {});
  std::error_code ignored;
  fs::remove_all(shards_dir(path), ignored);  // of an earlier sharded save under this name
}

Checkpoint load_checkpoint(const std::string& path) {
  SafetensorsFile file = load_safetensors(path);
  const auto format = file.metadata.find("format");
  if (format == file.metadata.end() || format->second != kFormat)
    throw FormatError(printable_path(path) + ": not an ember checkpoint (metadata \"format\" is " +
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

  c.rng = rng_of(path, file.tensors);
  file.tensors.erase("rng.default");

  for (const auto& [name, t] : file.tensors) {
    bool placed = false;
    for (const auto& [prefix, dict] : sections(c))
      if (name.starts_with(prefix)) {
        (*dict)[name.substr(prefix.size())] = t;
        placed = true;
        break;
      }
    if (!placed) throw FormatError(printable_path(path) + ": unexpected tensor \"" + printable(name) + "\" in a checkpoint");
  }
  if (file.metadata.count("shards")) load_shards(path, file.metadata, c);
  return c;
}

}  // namespace ember::train
