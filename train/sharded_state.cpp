#include "train/sharded_state.h"

#include <limits>
#include <set>
#include <unordered_map>

#include "autograd/grad_mode.h"
#include "tensor/decimal.h"
#include "tensor/ops.h"

namespace ember::train {

namespace {

// "state.<n>.<rest>" -> {n, rest}; nullopt for other keys.
std::optional<std::pair<size_t, std::string>> split_state_key(const std::string& key) {
  if (!key.starts_with("state.")) return std::nullopt;
  const size_t dot = key.find('.', 6);
  if (dot == std::string::npos) return std::nullopt;
  const auto n = parse_decimal(std::string_view(key).substr(6, dot - 6), std::numeric_limits<int32_t>::max());
  if (!n) return std::nullopt;
  return std::pair{static_cast<size_t>(*n), key.substr(dot + 1)};
}

const dist::ZeroPartition& partition_of(const TrainingPrecision& precision) {
  if (!precision.zero()) throw ValueError("sharded checkpoint state: the run has no ZeRO partition");
  return *precision.zero();
}

void check_one_group(const optim::Optimizer& optimizer) {
  if (optimizer.param_groups().size() != 1)
    throw NotImplementedError("sharded checkpoints: the optimizer has " + std::to_string(optimizer.param_groups().size()) +
                              " param groups; ZeRO runs save one");
}

// The shapes of the parameters ZeRO partitions, by their index among the parameters that require grad.
std::vector<std::pair<std::string, Shape>> partitioned(const nn::Module& module) {
  std::vector<std::pair<std::string, Shape>> out;
  for (const auto& [name, p] : module.named_parameters())
    if (p.requires_grad()) out.emplace_back(name, p.shape());
  return out;
}

Tensor snapshot(const Tensor& t) { return t.detach().to(kCPU).clone(); }

}  // namespace

void add_sharded_state(Checkpoint& c, const TrainingPrecision& precision, const nn::Module& module) {
  const dist::ZeroPartition& zero = partition_of(precision);
  check_one_group(precision.optimizer());
  autograd::NoGradGuard no_grad;
  const auto params = partitioned(module);
  std::set<std::string> sharded_names;
  for (const auto& [name, shape] : params) sharded_names.insert(name);
  const auto& info = zero.piece_info();
  const auto& pieces = zero.pieces();

  for (const auto& [name, t] : module.state_dict())
    if (!sharded_names.count(name)) c.model[name] = t;
  for (size_t n = 0; n < pieces.size(); ++n)
    c.pieces.push_back({"model." + info[n].name, params[info[n].parameter].second, info[n].offset, snapshot(pieces[n])});

  for (const auto& [key, value] : precision.optimizer().state_dict()) {
    if (key == "param_groups.0.params") {  // the parameters' logical indices
      std::vector<int64_t> all(params.size());
      for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<int64_t>(i);
      c.optimizer[key] = from_vector(all, {static_cast<int64_t>(all.size())});
      continue;
    }
    const auto state = split_state_key(key);
    if (!state) {
      c.optimizer[key] = value;
      continue;
    }
    const auto& [n, name] = *state;
    const auto& piece = info.at(n);
    const std::string logical = "optimizer.state." + std::to_string(piece.parameter) + "." + name;
    if (value.dim() == 0) {  // the step count, the same in every piece: saved by the first element's owner
      if (piece.offset == 0) c.pieces.push_back({logical, Shape{}, 0, value.reshape({1})});
    } else {
      c.pieces.push_back({logical, params[piece.parameter].second, piece.offset, value});
    }
  }

  for (const auto& [key, value] : precision.state_dict()) {
    if (!key.starts_with("master.")) {
      c.precision[key] = value;
      continue;
    }
    const size_t n = std::stoull(key.substr(7));
    if (pieces[n].dtype() == DType::f32) continue;  // offloaded: a float32 parameter's master is the parameter
    const auto& piece = info.at(n);
    c.pieces.push_back({"precision.master." + std::to_string(piece.parameter), params[piece.parameter].second,
                        piece.offset, value});
  }
}

void restore_sharded_state(const Checkpoint& c, TrainingPrecision& precision, nn::Module& module) {
  dist::ZeroPartition& zero = *precision.zero();
  check_one_group(precision.optimizer());
  autograd::NoGradGuard no_grad;
  const auto params = partitioned(module);
  const auto& info = zero.piece_info();
  const auto& pieces = zero.pieces();

  // The logical tensor `key` of `dict` (with a message naming `section`), whose elements must number
  // those of parameter i.
  const auto logical = [&](const StateDict& dict, const std::string& section, const std::string& key, size_t i) {
    const auto it = dict.find(key);
    if (it == dict.end()) throw ValueError("Runner: the checkpoint lacks " + section + "." + key);
    const int64_t expected = numel(params[i].second);
    if (it->second.numel() != expected)
      throw ValueError("Runner: the checkpoint's " + section + "." + key + " has shape " + to_string(it->second.shape()) +
                       ", the parameter " + params[i].first + " " + to_string(params[i].second));
    return it->second.reshape({expected});
  };
  const auto slice = [&](const Tensor& flat, size_t n) { return flat.narrow(0, info[n].offset, pieces[n].numel()).clone(); };

  // The model: the partitioned parameters by slices, the rest (buffers) whole.
  std::unordered_map<std::string, size_t> index_of;
  for (size_t i = 0; i < params.size(); ++i) index_of[params[i].first] = i;
  StateDict rest;
  for (const auto& [name, t] : module.state_dict())
    if (!index_of.count(name)) {
      const auto it = c.model.find(name);
      if (it == c.model.end()) throw ValueError("Runner: the checkpoint lacks model." + name);
      rest[name] = it->second;
    }
  for (const auto& [name, t] : c.model)
    if (!index_of.count(name) && !rest.count(name)) throw ValueError("Runner: unexpected model." + name + " in the checkpoint");
  std::vector<Tensor> piece_values;
  for (size_t n = 0; n < pieces.size(); ++n)
    piece_values.push_back(slice(logical(c.model, "model", info[n].name, info[n].parameter), n));

  // The optimizer: each piece's slice of its parameter's state.
  if (c.optimizer.count("param_groups.1.params"))
    throw ValueError("Runner: the checkpoint's optimizer has several param groups; this run's has one");
  StateDict optimizer;
  for (const auto& [key, value] : c.optimizer)
    if (key.starts_with("param_groups.0.") && key != "param_groups.0.params") optimizer[key] = value;
  std::vector<int64_t> own(pieces.size());
  for (size_t n = 0; n < pieces.size(); ++n) own[n] = static_cast<int64_t>(n);
  optimizer["param_groups.0.params"] = from_vector(own, {static_cast<int64_t>(own.size())});
  for (size_t n = 0; n < pieces.size(); ++n) {
    const std::string prefix = "state." + std::to_string(info[n].parameter) + ".";
    for (const auto& [key, value] : c.optimizer) {
      if (!key.starts_with(prefix)) continue;
      const std::string name = key.substr(prefix.size());
      optimizer["state." + std::to_string(n) + "." + name] =
          value.dim() == 0 ? value : slice(logical(c.optimizer, "optimizer", key, info[n].parameter), n);
    }
  }

  // The precision mode: the masters by slices, the scaler whole.
  StateDict mode;
  for (const auto& [key, value] : precision.state_dict()) {
    if (key.starts_with("master.")) {
      const size_t n = std::stoull(key.substr(7));
      // A float32 parameter's master (offloaded) is the parameter itself.
      mode[key] = pieces[n].dtype() == DType::f32
                      ? piece_values[n]
                      : slice(logical(c.precision, "precision", "master." + std::to_string(info[n].parameter), info[n].parameter), n);
    } else {
      const auto it = c.precision.find(key);
      if (it == c.precision.end()) throw ValueError("Runner: the checkpoint lacks precision." + key);
      mode[key] = it->second;
    }
  }
  for (const auto& [key, value] : c.precision)
    if (!key.starts_with("master.") && !mode.count(key)) throw ValueError("Runner: unexpected precision." + key + " in the checkpoint");

  module.load_state_dict(rest, /*strict=*/false);
  for (size_t n = 0; n < pieces.size(); ++n) {
    Tensor piece = pieces[n];
    copy_(piece, piece_values[n]);
  }
  precision.optimizer().load_state_dict(optimizer);
  precision.load_state_dict(mode);  // the masters, copied into the pieces in the naive modes
  zero.gather_updated_parameters();
}

}  // namespace ember::train
