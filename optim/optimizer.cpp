#include "optim/optimizer.h"

#include <array>
#include <cmath>
#include <limits>
#include <set>
#include <sstream>

#include "autograd/grad_mode.h"
#include "tensor/capture.h"
#include "tensor/decimal.h"
#include "tensor/error.h"
#include "tensor/nvtx.h"
#include "tensor/ops.h"

namespace ember::optim {

double ParamGroup::get(const std::string& key) const {
  auto it = options.find(key);
  if (it == options.end()) throw ValueError("param group has no option '" + key + "'");
  return it->second;
}

Tensor scalar_f64(double v) { return scalar_tensor(v, TensorOptions(DType::f64)); }

void Optimizer::add_param_group(std::vector<Tensor> params, const GroupOptions& overrides) {
  // The options first: a derived constructor's defaults are checked here, before its parameters.
  GroupOptions options = defaults_;
  for (const auto& [k, v] : overrides) {
    if (!defaults_.count(k) && k != "initial_lr")
      throw ValueError(std::string(name()) + ": unknown option '" + k + "' for a param group");
    options[k] = v;
  }
  check_options(options);
  if (params.empty()) throw ValueError(std::string(name()) + ": a param group needs at least one parameter");
  for (size_t i = 0; i < params.size(); ++i) {
    if (!params[i].defined())
      throw ValueError(std::string(name()) + ": parameter " + std::to_string(i) + " of the new group is undefined");
    if (!params[i].is_floating_point())
      throw DTypeError(std::string(name()) + ": parameter " + std::to_string(i) + " is " +
                       dtype_name(params[i].dtype()) + ", optimizers update floating tensors only");
    // A tensor made by an op never receives .grad (PyTorch refuses it the same way).
    if (!params[i].is_leaf())
      throw ValueError(std::string(name()) + ": parameter " + std::to_string(i) +
                       " is not a leaf (it was made by an op); optimize the leaf it came from, or a detach()");
    for (const auto& g : groups_)
      for (const auto& q : g.params)
        if (q.is_same(params[i]))
          throw ValueError(std::string(name()) + ": parameter " + std::to_string(i) +
                           " of the new group is already in another group");
    // Listed twice, a parameter would be stepped twice per step (PyTorch warns of it; ember refuses).
    for (size_t j = 0; j < i; ++j)
      if (params[j].is_same(params[i]))
        throw ValueError(std::string(name()) + ": parameters " + std::to_string(j) + " and " + std::to_string(i) +
                         " of the new group are the same tensor");
  }
  groups_.push_back(ParamGroup{std::move(params), std::move(options)});
}

namespace {

// found_inf or grad_scale: a one-element f32 tensor on `device`.
void check_step_input(const char* who, const char* what, const Tensor& t, Device device) {
  if (!t.defined()) return;
  if (t.dtype() != DType::f32 || t.numel() != 1)
    throw DTypeError(std::string(who) + ".step: " + what + " must be a one-element float32 tensor, got " +
                     dtype_name(t.dtype()) + " of shape " + to_string(t.shape()));
  if (!(t.device() == device))
    throw DeviceError(std::string(who) + ".step: " + what + " is on " + t.device().str() + ", the parameters on " +
                      device.str());
}

std::string number(double v) {
  std::ostringstream out;
  out << v;
  return out.str();
}

// What a group's step kernels read from memory (optim/primitives/steps.h): its lr, and its momentum
// (SGD) or beta1 (Adam, LAMB), the values schedulers change each step; 0 where it has neither.
const char* scheduled_key(const ParamGroup& g) { return g.options.count("momentum") ? "momentum" : "beta1"; }
std::array<double, 2> scheduled_values(const ParamGroup& g) {
  const auto it = g.options.find(scheduled_key(g));
  return {g.lr(), it == g.options.end() ? 0.0 : it->second};
}

}  // namespace

std::vector<double> Optimizer::launch_hyperparameters() const {
  std::vector<double> values;
  for (const ParamGroup& group : groups_)
    for (const auto& [name, value] : group.options) {
      // initial_lr is the schedulers' alone; whether momentum is on changes the step's work (SGD's buffers).
      if (name == "lr" || name == "initial_lr" || (name == "beta1" && scheduled_key(group) == name)) continue;
      values.push_back(name == "momentum" ? static_cast<double>(value != 0) : value);
    }
  return values;
}

void Optimizer::stage_hyperparameters() {
  NoGradGuard no_grad;
  staged_.resize(groups_.size());
  for (size_t g = 0; g < groups_.size(); ++g) {
    const std::array<double, 2> values = scheduled_values(groups_[g]);
    const Device device = groups_[g].params.front().device();
    Staged& staged = staged_[g];
    const bool placed = staged.tensor.defined() && staged.tensor.device() == device;
    if (placed && staged.values == values) continue;
    if (capture::active()) {  // a value written now would be baked into the graph, not read at each replay
      const size_t i = placed && staged.values[0] == values[0] ? 1 : 0;
      capture::refuse(std::string(name()) + ".step: the " + (i == 0 ? "lr" : scheduled_key(groups_[g])) +
                      " of param group " + std::to_string(g) + " is " + number(values[i]) + " while the step kernels read " +
                      (placed ? number(staged.values[i]) : std::string("none yet")) +
                      " (set learning rates and momentum before the step; CompiledStep stages them before each replay)");
    }
    if (!placed) staged.tensor = zeros({2}, TensorOptions(DType::f64).with_device(device));
    for (size_t i = 0; i < values.size(); ++i) {  // fills: queued after the kernels that read the old values
      if (placed && staged.values[i] == values[i]) continue;
      Tensor slot = select(staged.tensor, 0, static_cast<int64_t>(i));
      fill_(slot, values[i]);
    }
    staged.values = values;
  }
}

void Optimizer::step(const StepInputs& inputs) {
  const nvtx::Range range(name(), ".step");
  NoGradGuard no_grad;
  stage_hyperparameters();  // in a captured step: only checks that they were staged
  int64_t index = 0;
  for (size_t g = 0; g < groups_.size(); ++g) {
    const ParamGroup& group = groups_[g];
    Batch batch;
    batch.has_found_inf = inputs.found_inf.defined();
    batch.has_grad_scale = inputs.grad_scale.defined();
    if (batch.has_found_inf) batch.inputs.push_back(inputs.found_inf);
    if (batch.has_grad_scale) batch.inputs.push_back(inputs.grad_scale);
    batch.inputs.push_back(staged_[g].tensor);
    for (const auto& param : group.params) {
      const int64_t i = index++;
      Tensor grad = param.grad();
      if (!grad.defined()) continue;
      const std::string which = std::string(name()) + ".step: parameter " + std::to_string(i);
      if (!(grad.shape() == param.shape()))
        throw ShapeError(which + " has shape " + to_string(param.shape()) + ", its gradient " + to_string(grad.shape()));
      if (grad.dtype() != param.dtype())
        throw DTypeError(which + " is " + dtype_name(param.dtype()) + ", its gradient " + dtype_name(grad.dtype()));
      if (!(grad.device() == param.device()))
        throw DeviceError(which + " is on " + param.device().str() + ", its gradient on " + grad.device().str());
      if (!param.is_contiguous())
        throw ValueError(which + " of shape " + to_string(param.shape()) +
                         " is not contiguous; the step kernels update contiguous parameters");
      // The kernels index state and parameter alike: a parameter changed since its state was made
      // (p.data = a bigger tensor, .double()) would have them read and write past the state.
      for (const auto& [key, state] : state_[i]) {
        if (key == "step") continue;  // the 0-dim count
        const auto described = [](const Tensor& t) {
          return to_string(t.shape()) + " " + dtype_name(t.dtype()) + " on " + t.device().str();
        };
        if (!(state.shape() == param.shape()) || state.dtype() != param.dtype() || state.device() != param.device())
          throw ValueError(which + ": the state '" + key + "' of a parameter " + described(param) + " is " +
                           described(state) + ": the parameter changed after its state was made (p.data = ..., "
                           ".to(), .double()); make a new optimizer for it");
      }
      check_step_input(name(), "found_inf", inputs.found_inf, param.device());
      check_step_input(name(), "grad_scale", inputs.grad_scale, param.device());
      batch.params.push_back(param);  // a handle: updates write into the parameter's storage
      batch.inputs.push_back(grad.contiguous());
      batch.states.push_back(&state_[i]);
    }
    if (!batch.params.empty()) step_group(group, batch);
  }
  ++steps_taken_;
}

std::vector<Tensor> Optimizer::step_operands(const Batch& batch, const std::vector<std::string>& keys) {
  std::vector<Tensor> operands = batch.params;
  for (const std::string& key : keys) {
    for (size_t i = 0; i < batch.params.size(); ++i) {
      ParamState& st = *batch.states[i];
      auto it = st.find(key);
      if (it == st.end()) it = st.emplace(key, zeros_like(batch.params[i])).first;
      operands.push_back(it->second);
    }
  }
  for (size_t i = 0; i < batch.params.size(); ++i) {
    ParamState& st = *batch.states[i];
    auto it = st.find("step");
    if (it == st.end())
      it = st.emplace("step", zeros({}, TensorOptions(DType::f64).with_device(batch.params[i].device()))).first;
    operands.push_back(it->second);
  }
  return operands;
}

void Optimizer::zero_grad(bool set_to_none) {
  for (const auto& group : groups_) {
    for (const auto& p : group.params) {
      Tensor g = p.grad();
      if (!g.defined()) continue;
      if (set_to_none) {
        p.set_grad(Tensor());
      } else {
        NoGradGuard no_grad;
        zero_(g);
      }
    }
  }
}

const ParamState& Optimizer::state(int64_t index) const {
  static const ParamState empty;
  auto it = state_.find(index);
  return it == state_.end() ? empty : it->second;
}

int64_t Optimizer::num_params() const {
  int64_t n = 0;
  for (const auto& g : groups_) n += static_cast<int64_t>(g.params.size());
  return n;
}

StateDict Optimizer::state_dict() const {
  StateDict d;
  for (const auto& [i, st] : state_)
    for (const auto& [k, t] : st) {
      const Tensor host = t.to(kCPU);
      d["state." + std::to_string(i) + "." + k] = host.is_same(t) ? t.clone() : host;
    }
  int64_t index = 0;
  for (size_t g = 0; g < groups_.size(); ++g) {
    const std::string pre = "param_groups." + std::to_string(g) + ".";
    for (const auto& [k, v] : groups_[g].options) d[pre + k] = scalar_f64(v);
    std::vector<int64_t> ids;
    for (size_t j = 0; j < groups_[g].params.size(); ++j) ids.push_back(index++);
    d[pre + "params"] = from_vector(ids, {static_cast<int64_t>(ids.size())});
  }
  return d;
}

namespace {

// Splits "a.b.rest" into a, b and rest (rest may hold dots); false when there are fewer parts.
bool split3(const std::string& key, std::string& a, std::string& b, std::string& rest) {
  const size_t p1 = key.find('.');
  if (p1 == std::string::npos) return false;
  const size_t p2 = key.find('.', p1 + 1);
  if (p2 == std::string::npos) return false;
  a = key.substr(0, p1);
  b = key.substr(p1 + 1, p2 - p1 - 1);
  rest = key.substr(p2 + 1);
  return !b.empty() && !rest.empty();
}

// "lr, momentum, weight_decay"
std::string option_names(const GroupOptions& options) {
  std::string names;
  for (const auto& [name, value] : options) names += (names.empty() ? "" : ", ") + name;
  return names;
}

int64_t parse_index(const std::string& s, const std::string& key) {
  const auto index = parse_decimal(s, std::numeric_limits<int32_t>::max());
  if (!index) throw ValueError("optimizer state_dict: bad index '" + s + "' in key '" + key + "'");
  return *index;
}

}  // namespace

void Optimizer::load_state_dict(const StateDict& dict) {
  const std::string who = std::string(name()) + ".load_state_dict: ";
  // Sort the entries into groups and per-parameter state, checking everything before changing anything.
  std::map<int64_t, GroupOptions> group_opts;
  std::map<int64_t, Tensor> group_ids;  // each group's "params": the ids its state keys use
  std::map<int64_t, ParamState> saved_state;  // by the saved id
  for (const auto& [key, t] : dict) {
    std::string kind, idx, rest;
    if (!split3(key, kind, idx, rest) || (kind != "state" && kind != "param_groups"))
      throw ValueError(who + "unexpected key '" + key + "'");
    const int64_t i = parse_index(idx, key);
    if (!t.defined()) throw ValueError(who + "entry '" + key + "' is undefined");
    if (kind == "param_groups") {
      if (rest == "params") group_ids[i] = t;
      else if (const GroupOptions& known = i < static_cast<int64_t>(groups_.size()) ? groups_[static_cast<size_t>(i)].options : defaults_;
               !known.count(rest) && rest != "initial_lr")  // initial_lr: a scheduler's, in any optimizer's groups
        throw ValueError(who + "'" + key + "' is not an option of " + name() + " (" + option_names(known) +
                         "): the dict was written by another optimizer");
      else if (t.numel() != 1) throw ValueError(who + "option '" + key + "' has " + std::to_string(t.numel()) + " elements, expected 1");
      else group_opts[i][rest] = t.item<double>();
    } else {
      saved_state[i][rest] = t;
    }
  }
  if (group_ids.size() != groups_.size())
    throw ValueError(who + "the dict has " + std::to_string(group_ids.size()) + " param groups, the optimizer " +
                     std::to_string(groups_.size()));
  // Each index read from a key is checked as a key: a count that matches says nothing of which groups.
  for (const auto& [g, opts] : group_opts)
    if (g >= static_cast<int64_t>(groups_.size()))
      throw ValueError(who + "'param_groups." + std::to_string(g) + "." + opts.begin()->first + "' names param group " +
                       std::to_string(g) + ", the optimizer has " + std::to_string(groups_.size()));
  // The options each group will have, as its constructor checks them.
  for (const auto& [g, opts] : group_opts) {
    GroupOptions merged = groups_[static_cast<size_t>(g)].options;
    for (const auto& [k, v] : opts) merged[k] = v;
    if (const auto it = merged.find("initial_lr"); it != merged.end() && !(it->second >= 0 && std::isfinite(it->second)))
      throw ValueError(who + "param_groups." + std::to_string(g) + ".initial_lr is " + decimal_text(it->second) +
                       ", not a learning rate");
    try {
      check_options(merged);
    } catch (const ValueError& e) {
      throw ValueError(who + "param_groups." + std::to_string(g) + ": " + e.what());
    }
  }
  // PyTorch's rule: the ids of the dict's "params" lists, in order, name the optimizer's parameters
  // in order; "state.<id>" belongs to the parameter its id names.
  std::vector<const Tensor*> params;
  std::map<int64_t, size_t> position_of_id;
  for (size_t g = 0; g < groups_.size(); ++g) {
    auto it = group_ids.find(static_cast<int64_t>(g));
    if (it == group_ids.end()) throw ValueError(who + "the dict lacks param_groups." + std::to_string(g) + ".params");
    const Tensor& ids = it->second;
    if (ids.numel() != static_cast<int64_t>(groups_[g].params.size()))
      throw ValueError(who + "param group " + std::to_string(g) + " has " + std::to_string(ids.numel()) +
                       " params in the dict, " + std::to_string(groups_[g].params.size()) + " in the optimizer");
    const std::vector<double> values = ids.to(DType::f64).contiguous().to_vector<double>();
    for (size_t j = 0; j < values.size(); ++j) {
      const double id = values[j];
      if (!(id >= 0 && id <= std::numeric_limits<int32_t>::max() && id == std::floor(id)))
        throw ValueError(who + "param_groups." + std::to_string(g) + ".params holds " + decimal_text(id) +
                         ", not a parameter id");
      if (!position_of_id.emplace(static_cast<int64_t>(id), params.size()).second)
        throw ValueError(who + "parameter id " + decimal_text(id) + " is listed twice in the param groups");
      params.push_back(&groups_[g].params[j]);
    }
  }
  std::map<int64_t, ParamState> new_state;  // by position
  for (auto& [id, st] : saved_state) {
    const auto at = position_of_id.find(id);
    if (at == position_of_id.end())
      throw ValueError(who + "state for parameter id " + std::to_string(id) + ", which no param group lists (" +
                       std::to_string(params.size()) + " parameters)");
    const Tensor& p = *params[at->second];
    for (auto& [k, t] : st) {
      const std::string entry = "state." + std::to_string(id) + "." + k;
      if (k == "step") {
        if (t.numel() != 1) throw ValueError(who + entry + " is not a scalar");
        const double step = t.item<double>();
        if (!is_exact_count(step))
          throw ValueError(who + entry + " is " + decimal_text(step) + ", not a step count");
        t = scalar_f64(step).to(p.device());  // the kernels advance it there
        continue;
      }
      if (!(t.shape() == p.shape()))
        throw ValueError(who + entry + " has shape " + to_string(t.shape()) + ", its parameter " + to_string(p.shape()));
      if (!t.is_floating_point())
        throw ValueError(who + entry + " is " + dtype_name(t.dtype()) + "; optimizer state is floating");
      t = t.to(p.dtype()).to(p.device()).clone();  // a private copy, like the parameter's own state
    }
    new_state[static_cast<int64_t>(at->second)] = std::move(st);
  }
  for (auto& [g, opts] : group_opts)
    for (auto& [k, v] : opts) groups_[static_cast<size_t>(g)].options[k] = v;
  state_ = std::move(new_state);
}

}  // namespace ember::optim
