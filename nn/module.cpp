// Module, Sequential, ModuleList.
#include "nn/module.h"

#include <algorithm>
#include <map>
#include <utility>

#include "autograd/grad_mode.h"
#include "tensor/error.h"
#include "tensor/printable.h"
#include "tensor/set_data.h"

namespace ember::nn {

namespace {
std::string join(const std::string& prefix, const std::string& name) {
  return prefix.empty() ? name : prefix + "." + name;
}
}  // namespace

void Module::check_name(const std::string& name, const char* what) const {
  if (name.empty() || name.find('.') != std::string::npos)
    throw ValueError(std::string("register_") + what + ": name '" + name + "' must be non-empty and contain no '.'");
  auto taken = [&](const auto& v) {
    return std::any_of(v.begin(), v.end(), [&](const auto& kv) { return kv.first == name; });
  };
  if (taken(params_) || taken(buffers_) || taken(children_))
    throw ValueError(std::string("register_") + what + ": " + this->name() + " already has a member named '" +
                     name + "'");
}

Tensor Module::register_parameter(const std::string& name, Tensor t, bool requires_grad) {
  check_name(name, "parameter");
  if (!t.defined()) throw ValueError("register_parameter: '" + name + "' is an undefined tensor");
  if (requires_grad && !t.is_floating_point())
    throw DTypeError("register_parameter: '" + name + "' requires grad but is " + dtype_name(t.dtype()));
  if (!t.is_leaf()) t = t.detach();
  t.requires_grad_(requires_grad);
  params_.emplace_back(name, t);
  return t;
}

Tensor Module::register_buffer(const std::string& name, Tensor t) {
  check_name(name, "buffer");
  if (!t.defined()) throw ValueError("register_buffer: '" + name + "' is an undefined tensor");
  buffers_.emplace_back(name, t);
  return t;
}

void Module::register_child(const std::string& name, std::shared_ptr<Module> m) {
  check_name(name, "module");
  if (!m) throw ValueError("register_module: '" + name + "' is null");
  children_.emplace_back(name, std::move(m));
}

std::shared_ptr<Module> Module::replace_module(const std::string& name, std::shared_ptr<Module> m) {
  auto slot = std::find_if(children_.begin(), children_.end(), [&](const auto& c) { return c.first == name; });
  if (slot == children_.end()) {
    std::string names;
    for (const auto& [n, c] : children_) names += (names.empty() ? "" : ", ") + n;
    throw ValueError("replace_module: " + this->name() + " has no child '" + name + "' (its children: " +
                     (names.empty() ? "none" : names) + ")");
  }
  if (!m) throw ValueError("replace_module: the new " + this->name() + "." + name + " is null");
  // A child that holds this module (or is it) would make the tree a cycle: forward and state_dict
  // would recurse without end.
  std::vector<const Module*> stack = {m.get()};
  while (!stack.empty()) {
    const Module* next = stack.back();
    stack.pop_back();
    if (next == this)
      throw ValueError("replace_module: the new " + this->name() + "." + name + " is " + this->name() +
                       " itself or holds it: the module tree would be a cycle");
    for (const auto& [n, c] : next->children_) stack.push_back(c.get());
  }
  rebind_child(name, m);  // may refuse: nothing has changed yet
  return std::exchange(slot->second, std::move(m));
}

void Module::rebind_child(const std::string& name, const std::shared_ptr<Module>&) {
  throw NotImplementedError("replace_module: " + this->name() + " cannot replace its child '" + name +
                            "' (it keeps pointers to its children that it does not update)");
}

void Module::throw_wrong_child_type(const std::string& name, const std::string& got, std::string expected) const {
  if (expected.empty())  // the type of the child being replaced
    for (const auto& [n, c] : children_)
      if (n == name) expected = c->name();
  throw ValueError("replace_module: " + this->name() + "." + name + " must be a " + expected +
                   " (the forward calls it as one), got a " + got);
}

void Module::collect_params(const std::string& prefix, bool recurse,
                            std::vector<std::pair<std::string, Tensor>>& out,
                            std::vector<const TensorImpl*>& seen) const {
  for (const auto& [n, t] : params_) {
    if (std::find(seen.begin(), seen.end(), t.impl()) != seen.end()) continue;
    seen.push_back(t.impl());
    out.emplace_back(join(prefix, n), t);
  }
  if (!recurse) return;
  for (const auto& [n, c] : children_) c->collect_params(join(prefix, n), true, out, seen);
}

void Module::collect_buffers(const std::string& prefix, bool recurse,
                             std::vector<std::pair<std::string, Tensor>>& out) const {
  for (const auto& [n, t] : buffers_) out.emplace_back(join(prefix, n), t);
  if (!recurse) return;
  for (const auto& [n, c] : children_) c->collect_buffers(join(prefix, n), true, out);
}

std::vector<std::pair<std::string, Tensor>> Module::named_parameters(bool recurse) const {
  std::vector<std::pair<std::string, Tensor>> out;
  std::vector<const TensorImpl*> seen;
  collect_params("", recurse, out, seen);
  return out;
}

std::vector<Tensor> Module::parameters(bool recurse) const {
  std::vector<Tensor> out;
  for (auto& kv : named_parameters(recurse)) out.push_back(kv.second);
  return out;
}

std::vector<std::pair<std::string, Tensor>> Module::named_buffers(bool recurse) const {
  std::vector<std::pair<std::string, Tensor>> out;
  collect_buffers("", recurse, out);
  return out;
}

std::vector<Tensor> Module::buffers(bool recurse) const {
  std::vector<Tensor> out;
  for (auto& kv : named_buffers(recurse)) out.push_back(kv.second);
  return out;
}

std::vector<std::shared_ptr<Module>> Module::children() const {
  std::vector<std::shared_ptr<Module>> out;
  for (const auto& kv : children_) out.push_back(kv.second);
  return out;
}

void Module::collect_modules(const std::string& prefix,
                             std::vector<std::pair<std::string, std::shared_ptr<Module>>>& out) {
  for (const auto& [n, c] : children_) {
    out.emplace_back(join(prefix, n), c);
    c->collect_modules(join(prefix, n), out);
  }
}

std::vector<std::pair<std::string, std::shared_ptr<Module>>> Module::named_modules() {
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> out;
  std::shared_ptr<Module> self = weak_from_this().lock();
  if (!self) throw ValueError("named_modules: " + name() + " must be owned by a std::shared_ptr");
  out.emplace_back("", self);
  collect_modules("", out);
  return out;
}

std::vector<std::shared_ptr<Module>> Module::modules() {
  std::vector<std::shared_ptr<Module>> out;
  for (auto& kv : named_modules()) out.push_back(kv.second);
  return out;
}

Tensor Module::parameter(const std::string& name) const {
  for (const auto& [n, t] : params_)
    if (n == name) return t;
  return {};
}

Tensor Module::buffer(const std::string& name) const {
  for (const auto& [n, t] : buffers_)
    if (n == name) return t;
  return {};
}

int64_t Module::num_parameters() const {
  int64_t n = 0;
  for (const auto& t : parameters()) n += t.numel();
  return n;
}

void Module::train(bool on) {
  training_ = on;
  for (auto& kv : children_) kv.second->train(on);
}

template <class F> void Module::for_each_tensor(F&& f) {
  for (auto& kv : params_) f(kv.second, true);
  for (auto& kv : buffers_) f(kv.second, false);
  for (auto& kv : children_) kv.second->for_each_tensor(f);
}

Module& Module::to(Device device) {
  NoGradGuard ng;
  for_each_tensor([&](Tensor& t, bool) {
    if (t.device() != device) set_data(t, t.detach().to(device));
  });
  return *this;
}

Module& Module::to(DType dtype) {
  return to(dtype, [](const Module&) { return false; });
}

Module& Module::to(DType dtype, const std::function<bool(const Module&)>& keep) {
  if (!is_floating(dtype)) throw DTypeError(std::string("Module::to: expected a floating dtype, got ") + dtype_name(dtype));
  if (keep(*this)) return *this;
  NoGradGuard ng;
  auto cast = [&](Tensor& t) {
    if (t.is_floating_point() && t.dtype() != dtype) set_data(t, t.detach().to(dtype));
  };
  for (auto& kv : params_) cast(kv.second);
  for (auto& kv : buffers_) cast(kv.second);
  for (auto& kv : children_) kv.second->to(dtype, keep);
  return *this;
}

void Module::zero_grad(bool set_to_none) {
  NoGradGuard ng;
  for (auto& p : parameters()) {
    Tensor g = p.grad();
    if (!g.defined()) continue;
    if (set_to_none) {
      p.set_grad(Tensor());
    } else {
      zero_(g);
    }
  }
}

HookHandle Module::register_forward_pre_hook(ForwardPreHook hook) {
  if (!hook) throw ValueError("register_forward_pre_hook: the hook is empty");
  if (!hooks_) hooks_ = std::make_shared<detail::ForwardHooks>();
  hooks_->pre.emplace_back(hooks_->next_id, std::move(hook));
  return HookHandle(hooks_, hooks_->next_id++);
}

HookHandle Module::register_forward_hook(ForwardHook hook) {
  if (!hook) throw ValueError("register_forward_hook: the hook is empty");
  if (!hooks_) hooks_ = std::make_shared<detail::ForwardHooks>();
  hooks_->post.emplace_back(hooks_->next_id, std::move(hook));
  return HookHandle(hooks_, hooks_->next_id++);
}

// Over copies, so that a hook may remove hooks (itself included) while they run.
const std::string& Module::range_label() {
  if (range_label_.empty()) range_label_ = name();
  return range_label_;
}

void Module::label_ranges() {
  for (auto& [path, m] : named_modules()) m->range_label_ = path.empty() ? m->name() : path + ": " + m->name();
}

void Module::run_forward_pre_hooks(const Tensor& input) {
  const auto hooks = hooks_->pre;
  for (const auto& [id, hook] : hooks) hook(*this, input);
}

void Module::run_forward_hooks(const Tensor& input, const Tensor& output) {
  const auto hooks = hooks_->post;
  for (const auto& [id, hook] : hooks) hook(*this, input, output);
}

void HookHandle::remove() {
  const auto hooks = hooks_.lock();
  if (!hooks) return;
  std::erase_if(hooks->pre, [&](const auto& entry) { return entry.first == id_; });
  std::erase_if(hooks->post, [&](const auto& entry) { return entry.first == id_; });
  hooks_.reset();
}

StateDict Module::state_dict() const {
  StateDict out;
  for (auto& [n, t] : named_parameters()) out.emplace(n, t.detach());
  for (auto& [n, t] : named_buffers()) out.emplace(n, t.detach());
  return out;
}

void Module::load_state_dict(const StateDict& state, bool strict) {
  std::vector<std::pair<std::string, Tensor>> own = named_parameters();
  for (auto& kv : named_buffers()) own.push_back(kv);
  std::vector<std::string> missing, mismatched, unexpected;
  std::map<std::string, bool> known;
  for (const auto& [n, t] : own) {
    known[n] = true;
    auto it = state.find(n);
    if (it == state.end()) {
      missing.push_back(n);
    } else if (!it->second.defined() || !(it->second.shape() == t.shape())) {
      mismatched.push_back(n + ": checkpoint " +
                           (it->second.defined() ? to_string(it->second.shape()) : std::string("undefined")) +
                           " vs model " + to_string(t.shape()));
    }
  }
  for (const auto& kv : state)
    if (!known.count(kv.first)) unexpected.push_back(printable(kv.first));  // a key from a file
  const bool bad = !mismatched.empty() || (strict && (!missing.empty() || !unexpected.empty()));
  if (bad) {
    // The first line says it all in short (a log or a terminal may show only it); the lists follow.
    std::string counts, first, lists;
    auto list = [&](const char* title, const std::vector<std::string>& v) {
      if (v.empty()) return;
      counts += (counts.empty() ? "" : ", ") + std::to_string(v.size()) + " " + title;
      if (first.empty()) first = std::string(title) + " " + v.front();
      lists += std::string("\n  ") + title + " (" + std::to_string(v.size()) + "):";
      for (size_t i = 0; i < v.size(); ++i) lists += (i ? "; " : " ") + v[i];
    };
    if (strict) list("missing keys", missing);
    if (strict) list("unexpected keys", unexpected);
    list("size mismatch", mismatched);
    throw ValueError("load_state_dict: the state does not fit " + name() + " (" + counts + "; the first: " + first + ")" +
                     lists);
  }
  NoGradGuard ng;
  for (auto& [n, t] : own) {
    auto it = state.find(n);
    if (it == state.end()) continue;
    Tensor dst = t;
    copy_(dst, it->second);
  }
}

void Module::str_into(std::string& out, int indent) const {
  out += name() + "(" + extra_repr();
  if (children_.empty()) {
    out += ")";
    return;
  }
  if (!extra_repr().empty()) out += ",";
  out += "\n";
  for (const auto& [n, c] : children_) {
    out += std::string(indent + 2, ' ') + "(" + n + "): ";
    c->str_into(out, indent + 2);
    out += "\n";
  }
  out += std::string(indent, ' ') + ")";
}

std::string Module::str() const {
  std::string out;
  str_into(out, 0);
  return out;
}

// ---- Sequential

Sequential::Sequential(std::vector<std::shared_ptr<UnaryModule>> layers) {
  for (auto& l : layers) append(std::move(l));
}

void Sequential::append(std::shared_ptr<UnaryModule> m) {
  register_child(std::to_string(layers_.size()), m);
  layers_.push_back(std::move(m));
}

const std::shared_ptr<UnaryModule>& Sequential::operator[](size_t i) const {
  if (i >= layers_.size())
    throw IndexError("Sequential: index " + std::to_string(i) + " out of range for size " + std::to_string(layers_.size()));
  return layers_[i];
}

Tensor Sequential::forward(const Tensor& x) {
  Tensor y = x;
  for (auto& l : layers_) y = (*l)(y);
  return y;
}

namespace {
// The index of child `name` of a container ("0", "1", ...).
size_t child_index(const std::string& name) { return static_cast<size_t>(std::stoull(name)); }
}  // namespace

void Sequential::rebind_child(const std::string& name, const std::shared_ptr<Module>& m) {
  layers_[child_index(name)] = child_as<UnaryModule>(name, m, "module with a forward of one tensor (a UnaryModule)");
}

// ---- ModuleList

void ModuleList::rebind_child(const std::string& name, const std::shared_ptr<Module>& m) {
  items_[child_index(name)] = m;
}

void ModuleList::append(std::shared_ptr<Module> m) {
  register_child(std::to_string(items_.size()), m);
  items_.push_back(std::move(m));
}

const std::shared_ptr<Module>& ModuleList::operator[](size_t i) const {
  if (i >= items_.size())
    throw IndexError("ModuleList: index " + std::to_string(i) + " out of range for size " + std::to_string(items_.size()));
  return items_[i];
}

void ModuleList::throw_wrong_type(size_t i) const {
  throw ValueError("ModuleList::at: module " + std::to_string(i) + " is a " + items_[i]->name() +
                   ", not the type asked for");
}

}  // namespace ember::nn
