/// @file
/// Custom differentiable functions, as torch::autograd::Function: a forward written with ember ops
/// and a hand-written backward, joined into the graph as one node.
///
///   struct ScaledSwish : autograd::Function<ScaledSwish> {
///     static constexpr const char* name = "scaled_swish";   // optional: errors and autocast use it
///     static Tensor forward(autograd::FunctionContext& ctx, const Tensor& x, double beta) {
///       ctx.save_for_backward({x});
///       ctx.saved_data["beta"] = beta;
///       return x * sigmoid(x * beta);
///     }
///     static std::vector<Tensor> backward(autograd::FunctionContext& ctx, std::vector<Tensor> grads) {
///       const Tensor x = ctx.saved_tensors()[0];
///       const double beta = std::any_cast<double>(ctx.saved_data["beta"]);
///       const Tensor s = sigmoid(x * beta);
///       return {grads[0] * (s + x * beta * s * (1.0 - s)), Tensor()};  // one per forward argument
///     }
///   };
///   Tensor y = ScaledSwish::apply(x, 1.5);
///
/// forward runs with grad mode off, so its ops record nothing; apply() records one node whose backward
/// is the user's. Save inputs and outputs for backward: an intermediate made in forward has no history,
/// so a double backward through it would not see how it depends on the inputs (recompute it instead). The ops in forward and backward are ember's, so the function runs on any device the
/// ops do. backward's ops are recorded when the engine runs with create_graph, so double backward works
/// as far as they are differentiable. backward returns one entry per forward argument after each
/// std::vector<Tensor> argument is spread into its elements (libtorch's rule): the gradient of a tensor
/// argument, or an undefined Tensor for none; a defined entry for a non-tensor argument is an error.
/// When the function has a `name` that amp::register_policy() registered, autocast casts its tensor
/// arguments as that policy says and is off inside forward, as for a built-in op; without one, the ops
/// inside forward are autocast one by one. Autocast is off in backward (the forward's dtypes hold).
/// In-place functions (PyTorch's mark_dirty) are not supported: forward must not write its inputs.
#pragma once

#include <any>
#include <concepts>
#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

#include "autograd/grad_mode.h"
#include "autograd/node.h"
#include "autograd/saved_tensor.h"
#include "tensor/autocast.h"

namespace ember::autograd {

class FunctionNode;

/// What a custom function's forward leaves for its backward (libtorch's AutogradContext).
class FunctionContext {
 public:
  /// Keeps tensors for backward (inputs, outputs or intermediates of forward); a later in-place
  /// write to one of them makes saved_tensors() raise. Replaces what an earlier call saved.
  void save_for_backward(std::vector<Tensor> tensors);
  /// The saved tensors, in the order saved. AutogradError after they were freed by a backward
  /// without retain_graph, or when one was written in place since.
  std::vector<Tensor> saved_tensors() const;
  /// Non-tensor values for backward (sizes, flags, scalars), read with std::any_cast.
  std::unordered_map<std::string, std::any> saved_data;
  /// Whether forward argument `index` (counted as backward's results are) needs a gradient: false for
  /// a non-tensor argument and when nothing is recorded. IndexError beyond the last argument.
  bool needs_input_grad(size_t index) const;
  /// Outputs that get no gradient (indices, masks): they are returned without a grad_fn, and backward
  /// receives zeros for them. Call in forward with tensors forward returns.
  void mark_non_differentiable(const std::vector<Tensor>& outputs);

 private:
  friend class FunctionNode;
  std::vector<Tensor> to_save_;            // what forward asked to save, until the node records it
  std::vector<SavedTensor> saved_;         // the same, once recorded (outputs kept without a cycle)
  std::vector<bool> needs_input_grad_;     // by argument slot
  std::vector<const TensorImpl*> non_differentiable_;
  FunctionNode* owner_ = nullptr;          // the node, for saved outputs' history and messages
  bool recorded_ = false;                  // the node recorded forward's outputs
};

/// The graph node of one call of a custom function (built by Function<Derived>::apply).
class FunctionNode final : public Node {
 public:
  /// The user's backward, as apply() adapts it.
  using Backward = std::function<std::vector<Tensor>(FunctionContext&, std::vector<Tensor>)>;
  /// A node for function `name` whose forward took `slot_count` arguments (tensor lists spread);
  /// `tensor_slot[i]` is the argument slot of tensor input i.
  FunctionNode(std::string name, Backward backward, size_t slot_count, std::vector<size_t> tensor_slot,
               const std::vector<Tensor>& inputs);

  const char* name() const override { return name_.c_str(); }
  std::vector<Tensor> apply(std::vector<Tensor>&& grad_outputs) override;
  void release_saved() override;
  FunctionContext& context() { return ctx_; }  ///< The context forward fills.

  /// After forward: wires the edges to the inputs when recording, gives the differentiable outputs
  /// this node as grad_fn (an output that is an input is first made an alias of it) and keeps what
  /// forward saved. Returns the outputs the caller gets. A no-op on `outputs` when not recording.
  std::vector<Tensor> record(const std::vector<Tensor>& inputs, std::vector<Tensor> outputs);

 private:
  std::string name_;
  Backward backward_;
  size_t slot_count_;
  std::vector<size_t> tensor_slot_;
  std::vector<TensorMeta> input_meta_;
  FunctionContext ctx_;
};

namespace detail {
// Whether to record: grad mode on and some input requires grad.
bool function_records(const std::vector<Tensor>& inputs);
// Casts `inputs` in place as the registered autocast policy of `name` says; true when `name` has one
// (then forward runs with autocast paused).
bool function_autocast(const std::string& name, std::vector<Tensor>& inputs);
template <class T>
inline constexpr bool is_tensor_v = std::same_as<std::remove_cvref_t<T>, Tensor>;
template <class T>
inline constexpr bool is_tensor_list_v = std::same_as<std::remove_cvref_t<T>, std::vector<Tensor>>;

// An argument as forward receives it: tensors (and lists) by value, so that the autocast casts can
// stand in for them; anything else as the caller passed it.
template <class T>
using forwarded_arg_t = std::conditional_t<is_tensor_v<T> || is_tensor_list_v<T>, std::remove_cvref_t<T>, T&&>;
}  // namespace detail

/// The base of a custom function (see the file's description): Derived declares static forward and
/// backward, and optionally `static constexpr const char* name`.
template <class Derived>
struct Function {
  /// Runs Derived::forward(ctx, args...) and records Derived::backward for its outputs. Returns what
  /// forward returns (a Tensor or a std::vector<Tensor>).
  template <class... Args>
  static auto apply(Args&&... args) {
    std::string name = "custom function";
    if constexpr (requires { Derived::name; }) name = Derived::name;
    std::vector<Tensor> inputs;
    std::vector<size_t> tensor_slot;
    size_t slots = 0;
    const auto collect = [&]<class A>(const A& a) {
      if constexpr (detail::is_tensor_v<A>) {
        inputs.push_back(a);
        tensor_slot.push_back(slots++);
      } else if constexpr (detail::is_tensor_list_v<A>) {
        for (const Tensor& t : a) {
          inputs.push_back(t);
          tensor_slot.push_back(slots++);
        }
      } else {
        ++slots;
      }
    };
    (collect(args), ...);
    const bool paused = detail::function_autocast(name, inputs);
    auto node = std::make_shared<FunctionNode>(name, &Derived::backward, slots, tensor_slot, inputs);

    // forward's arguments: the (possibly cast) inputs in place of the caller's tensors, in order
    // (a braced list evaluates left to right).
    size_t next = 0;
    const auto substitute = [&]<class A>(A&& a) -> detail::forwarded_arg_t<A> {
      if constexpr (detail::is_tensor_v<A>) {
        return inputs[next++];
      } else if constexpr (detail::is_tensor_list_v<A>) {
        std::vector<Tensor> list(inputs.begin() + static_cast<std::ptrdiff_t>(next),
                                 inputs.begin() + static_cast<std::ptrdiff_t>(next + a.size()));
        next += a.size();
        return list;
      } else {
        return std::forward<A>(a);
      }
    };
    std::tuple<detail::forwarded_arg_t<Args>...> forward_args{substitute(std::forward<Args>(args))...};
    auto result = [&] {
      NoGradGuard no_grad;
      std::optional<amp::detail::Pause> no_autocast;
      if (paused) no_autocast.emplace();
      return std::apply([&](auto&&... a) { return Derived::forward(node->context(), std::forward<decltype(a)>(a)...); },
                        std::move(forward_args));
    }();
    using Result = decltype(result);
    static_assert(std::same_as<Result, Tensor> || std::same_as<Result, std::vector<Tensor>>,
                  "a custom function's forward returns a Tensor or a std::vector<Tensor>");
    if constexpr (std::same_as<Result, Tensor>) {
      return node->record(inputs, {std::move(result)})[0];
    } else {
      return node->record(inputs, std::move(result));
    }
  }
};

}  // namespace ember::autograd

namespace ember {
using autograd::Function;
using autograd::FunctionContext;
}  // namespace ember
