/// @file
/// Module: the base of layers and models, in the shape of libtorch's C++ frontend (without its
/// Impl/ModuleHolder split): parameters, buffers and children registered by name, train/eval, to(),
/// state_dict, and PyTorch's forward hooks (which libtorch lacks). Sequential and ModuleList hold
/// children in order.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tensor/nvtx.h"
#include "tensor/ops.h"
#include "tensor/state_dict.h"

namespace ember::nn {

class Module;

/// Forward hooks in PyTorch's shape (register_forward_pre_hook / register_forward_hook), observing
/// only: the pre-hook sees the input of a call m(x), the hook its input and output once forward has
/// returned (forward itself is protected: see UnaryModule).
using ForwardPreHook = std::function<void(Module& module, const Tensor& input)>;
/// The hook of register_forward_hook: sees the module, its input and its output.
using ForwardHook = std::function<void(Module& module, const Tensor& input, const Tensor& output)>;

namespace detail {
struct ForwardHooks {
  std::vector<std::pair<uint64_t, ForwardPreHook>> pre;
  std::vector<std::pair<uint64_t, ForwardHook>> post;
  uint64_t next_id = 0;
};
}  // namespace detail

/// What registering a hook returns (PyTorch's RemovableHandle): remove() takes the hook off; it does
/// nothing the second time or once the module is gone.
class HookHandle {
 public:
  HookHandle() = default;
  void remove();  ///< Takes the hook off (a no-op the second time, or once the module is gone).

 private:
  friend class Module;
  HookHandle(std::weak_ptr<detail::ForwardHooks> hooks, uint64_t id) : hooks_(std::move(hooks)), id_(id) {}
  std::weak_ptr<detail::ForwardHooks> hooks_;
  uint64_t id_ = 0;
};

/// The base of layers and models (torch.nn.Module). Own modules through std::shared_ptr:
/// modules() and named_modules() need it.
class Module : public std::enable_shared_from_this<Module> {
 public:
  Module() = default;
  virtual ~Module() = default;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  /// The type's name for printing ("Linear", "Conv2d", ...); extra_repr gives its settings.
  virtual std::string name() const { return "Module"; }
  /// The settings str() prints in parentheses ("in_features=4, out_features=2").
  virtual std::string extra_repr() const { return ""; }
  /// The module tree in PyTorch's format: Name(extra) with children indented.
  std::string str() const;

  /// Stores t under `name` and returns it (the same handle). Names must be unique within a module
  /// and contain no '.' (ValueError otherwise, and for an undefined t); a parameter is made
  /// requires_grad(requires_grad) (DTypeError when t is not floating).
  Tensor register_parameter(const std::string& name, Tensor t, bool requires_grad = true);
  /// Stores a buffer under `name`, as register_parameter: state that is saved and moved with the
  /// module but not trained (running stats).
  Tensor register_buffer(const std::string& name, Tensor t);
  /// Stores child `m` under `name` (the rules of register_parameter; ValueError for a null m) and
  /// returns it.
  template <class M>
  std::shared_ptr<M> register_module(const std::string& name, std::shared_ptr<M> m) {
    register_child(name, m);
    return m;
  }
  /// Puts `m` in the place of child `name` and returns the child it replaces (PyTorch's
  /// `model.fc = nn.Linear(512, 3)`; libtorch's replace_module). The module's forward calls `m`
  /// from then on; optimizers made before still hold the old child's parameters. ValueError when
  /// there is no child `name`, m is null, or m is not of the type the forward calls there (a
  /// ResNet's fc must be a Linear); nothing changes then.
  std::shared_ptr<Module> replace_module(const std::string& name, std::shared_ptr<Module> m);

  /// Parameters of this module, then (recurse) of its children depth first, each in registration
  /// order as PyTorch lists them; a shared tensor once; dotted names ("layer1.0.conv1.weight").
  std::vector<Tensor> parameters(bool recurse = true) const;
  /// parameters() with their dotted names.
  std::vector<std::pair<std::string, Tensor>> named_parameters(bool recurse = true) const;
  /// Buffers of this module, then (recurse) of its children, ordered as parameters().
  std::vector<Tensor> buffers(bool recurse = true) const;
  /// buffers() with their dotted names.
  std::vector<std::pair<std::string, Tensor>> named_buffers(bool recurse = true) const;
  std::vector<std::shared_ptr<Module>> children() const;  ///< The direct children, in registration order.
  /// The direct children with their names.
  const std::vector<std::pair<std::string, std::shared_ptr<Module>>>& named_children() const { return children_; }
  /// This module and all descendants, depth first; ValueError when this module is not owned by a
  /// std::shared_ptr.
  std::vector<std::shared_ptr<Module>> modules();
  /// modules() with their dotted names ("" for this one).
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> named_modules();
  /// The parameter stored directly here under `name`; undefined when there is none.
  Tensor parameter(const std::string& name) const;
  /// The buffer stored directly here under `name`; undefined when there is none.
  Tensor buffer(const std::string& name) const;
  int64_t num_parameters() const;  ///< total elements of parameters()

  /// Sets training mode (or evaluation mode, `on` false) on this module and every descendant.
  virtual void train(bool on = true);
  void eval() { train(false); }  ///< train(false): evaluation mode (dropout off, batch norm on its running statistics).
  bool is_training() const { return training_; }  ///< Whether the module is in training mode (the default).

  /// Moves (casts) every parameter and buffer. Tensor identity is kept: the handles the layers and
  /// optimizers hold see the new storage (like PyTorch's `p.data = p.data.to(...)`); gradients are
  /// dropped. to(DType) casts floating tensors only (an i64 step counter stays i64).
  Module& to(Device device);
  /// Casts every floating parameter and buffer to `dtype`, keeping identity as to(Device) does;
  /// DTypeError for a non-floating dtype.
  Module& to(DType dtype);
  /// to(dtype) except in the modules for which `keep` is true and their descendants (naive AMP
  /// keeps batch norm in float32 this way).
  Module& to(DType dtype, const std::function<bool(const Module&)>& keep);
  /// Sets the gradients of all parameters to none (default) or to zero in place.
  void zero_grad(bool set_to_none = true);

  /// The name of this module's forward range on profiler timelines (tensor/nvtx.h): its dotted path
  /// and type once label_ranges() ran on a module above it ("layer1.0.conv1: Conv2d"), else its type.
  const std::string& range_label();
  /// Labels this module ("" path: its type) and every descendant by its dotted path from here.
  void label_ranges();

  /// Adds a hook that runs before each call m(x) of a UnaryModule, with its input; hooks run in
  /// registration order. Returns the handle that removes it; ValueError for an empty hook (as
  /// register_forward_hook).
  HookHandle register_forward_pre_hook(ForwardPreHook hook);
  /// Adds a hook that runs after each call m(x) of a UnaryModule, with its input and output.
  HookHandle register_forward_hook(ForwardHook hook);

  /// Parameters and buffers by dotted name; the tensors share storage with the module's (detached).
  StateDict state_dict() const;
  /// Copies values into the existing tensors (converting dtype/device). With strict, missing and
  /// unexpected keys are errors; shape mismatches always are. All problems are reported together
  /// in one ValueError; nothing is copied when there is any.
  void load_state_dict(const StateDict& state, bool strict = true);

 protected:
  /// Stores child `m` under `name` (register_module for any module type).
  void register_child(const std::string& name, std::shared_ptr<Module> m);
  /// replace_module's part in a module that keeps its own pointers to its children (the typed
  /// members its forward calls): point the one of child `name` at `m`, or throw ValueError when m
  /// cannot serve there. Runs before the child is swapped, so a refusal changes nothing. The
  /// default refuses every child (NotImplementedError): a module that keeps no such pointers, or
  /// keeps them up to date here, overrides it.
  virtual void rebind_child(const std::string& name, const std::shared_ptr<Module>& m);
  /// For rebind_child: `m`, the new child `name`, as a T; ValueError naming both types when it is not
  /// one (`expected` describes T, by default as the type of the child there now).
  template <class T>
  std::shared_ptr<T> child_as(const std::string& name, const std::shared_ptr<Module>& m,
                              const std::string& expected = "") const {
    auto typed = std::dynamic_pointer_cast<T>(m);
    if (!typed) throw_wrong_child_type(name, m->name(), expected);
    return typed;
  }
  /// For rebind_child: when `name` is `child`, points `member` at `m` as a T (child_as) and returns
  /// true; otherwise false.
  template <class T>
  bool rebind(const std::string& name, const char* child, const std::shared_ptr<Module>& m,
              std::shared_ptr<T>& member) const {
    if (name != child) return false;
    member = child_as<T>(name, m);
    return true;
  }
  /// The ValueError of a replacement child of type `got` that the forward cannot call at `name`,
  /// which must be an `expected` (by default the type of the child there now).
  [[noreturn]] void throw_wrong_child_type(const std::string& name, const std::string& got,
                                           std::string expected = "") const;
  /// Whether any forward hook is registered.
  bool has_forward_hooks() const { return hooks_ && (!hooks_->pre.empty() || !hooks_->post.empty()); }
  void run_forward_pre_hooks(const Tensor& input);  ///< Runs the pre-hooks on `input`, in registration order.
  /// Runs the hooks on `input` and `output`, in registration order.
  void run_forward_hooks(const Tensor& input, const Tensor& output);

 private:
  void check_name(const std::string& name, const char* what) const;
  void collect_params(const std::string& prefix, bool recurse, std::vector<std::pair<std::string, Tensor>>& out,
                      std::vector<const TensorImpl*>& seen) const;
  void collect_buffers(const std::string& prefix, bool recurse,
                       std::vector<std::pair<std::string, Tensor>>& out) const;
  void collect_modules(const std::string& prefix, std::vector<std::pair<std::string, std::shared_ptr<Module>>>& out);
  void str_into(std::string& out, int indent) const;
  template <class F> void for_each_tensor(F&& f);

  std::vector<std::pair<std::string, Tensor>> params_;
  std::vector<std::pair<std::string, Tensor>> buffers_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
  bool training_ = true;
  std::shared_ptr<detail::ForwardHooks> hooks_;  // made by the first registration
  std::string range_label_;                      // "": not yet asked for
};

/// A module with one tensor in and one out: what Sequential chains. It has one way in, the call
/// m(x) ((*model)(x) through a shared_ptr), which runs the forward hooks around forward(x), and with
/// profiler ranges on makes the call a range named range_label(). forward() is protected in every
/// module ember defines, and should be in yours: called directly it would skip the hooks, and with
/// them ZeRO-3's gathering of the module's parameters (PyTorch allows both calls; only one is right).
class UnaryModule : public Module {
 public:
  /// forward(x) with the forward hooks (and a profiler range) around it: how a module is called.
  /// With activation checkpointing on, the whole call is one nn::checkpoint region.
  Tensor operator()(const Tensor& x) { return checkpointed_ ? checkpointed_call(x) : call(x); }

  /// Turns activation checkpointing of this module's calls on or off (nn/checkpoint.h): its
  /// activations are recomputed in backward instead of kept.
  void set_activation_checkpointing(bool on) { checkpointed_ = on; }
  bool activation_checkpointing() const { return checkpointed_; }  ///< Whether calls are checkpointed.

 protected:
  /// The module's computation on x, which a subclass defines (no hooks run here: callers use m(x)).
  virtual Tensor forward(const Tensor& x) = 0;

 private:
  Tensor call(const Tensor& x) {
    if (!has_forward_hooks() && !nvtx::enabled()) return forward(x);
    std::optional<nvtx::ModuleScope> range;
    if (nvtx::enabled()) range.emplace(range_label());
    if (has_forward_hooks()) run_forward_pre_hooks(x);
    Tensor y = forward(x);
    if (has_forward_hooks()) run_forward_hooks(x, y);
    return y;
  }
  Tensor checkpointed_call(const Tensor& x);  // call(x) as a checkpoint region (nn/checkpoint.cpp)

  bool checkpointed_ = false;
};

/// Runs its children in order; children are named "0", "1", ...
class Sequential : public UnaryModule {
 public:
  Sequential() = default;
  explicit Sequential(std::vector<std::shared_ptr<UnaryModule>> layers);  ///< Holds `layers` in order.
  std::string name() const override { return "Sequential"; }
  template <class M>
  std::shared_ptr<M> push_back(std::shared_ptr<M> m) {  ///< Appends m, named by its index, and returns it.
    append(m);
    return m;
  }
  size_t size() const { return layers_.size(); }                   ///< Number of children.
  const std::shared_ptr<UnaryModule>& operator[](size_t i) const;  ///< Child i; IndexError when out of range.

 private:
  void append(std::shared_ptr<UnaryModule> m);
  std::vector<std::shared_ptr<UnaryModule>> layers_;
 protected:
  Tensor forward(const Tensor& x) override;                        ///< x through every child in order.
  /// Child i ("i") may become any UnaryModule.
  void rebind_child(const std::string& name, const std::shared_ptr<Module>& m) override;
};

/// Holds modules by index ("0", "1", ...) with no forward of its own.
class ModuleList : public Module {
 public:
  ModuleList() = default;
  std::string name() const override { return "ModuleList"; }
  template <class M>
  std::shared_ptr<M> push_back(std::shared_ptr<M> m) {  ///< Appends m, named by its index, and returns it.
    append(m);
    return m;
  }
  size_t size() const { return items_.size(); }               ///< Number of modules.
  const std::shared_ptr<Module>& operator[](size_t i) const;  ///< Module i; IndexError when out of range.
  /// The i-th module as M (checked).
  template <class M> std::shared_ptr<M> at(size_t i) const {
    auto p = std::dynamic_pointer_cast<M>((*this)[i]);
    if (!p) throw_wrong_type(i);
    return p;
  }
  auto begin() const { return items_.begin(); }  ///< Iteration over the modules, in order.
  auto end() const { return items_.end(); }      ///< The end of the iteration.

 private:
  void append(std::shared_ptr<Module> m);
  [[noreturn]] void throw_wrong_type(size_t i) const;
  std::vector<std::shared_ptr<Module>> items_;
 protected:
  /// Module i ("i") may become any module (at() checks the type where it is used).
  void rebind_child(const std::string& name, const std::shared_ptr<Module>& m) override;
};

}  // namespace ember::nn
