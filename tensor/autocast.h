/// @file
/// amp::Autocast, torch.autocast for ember: a thread-local RAII region in which op front ends cast
/// their arguments as one policy table says (`docs/reference.md#autocast`), with a per-region weight cast cache.
#pragma once

#include <array>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "tensor/tensor.h"

namespace ember::amp {

/// What autocast does to an op's eligible arguments: floating tensors on the region's device type
/// that are not f64 (PyTorch's is_eligible). Other arguments pass unchanged.
enum class Policy : uint8_t {
  none,               ///< in no list: the op runs in its input types
  lower,              ///< cast to the region's dtype (f16 or bf16)
  fp32,               ///< cast to f32
  fp32_unless_dtype,  ///< cast to f32, unless the call gives an explicit dtype
  promote,            ///< cast to the widest eligible dtype among the arguments
};
const char* policy_name(Policy p);  ///< "lower", "fp32", ...

/// An op's entry in the policy table.
struct OpPolicy {
  std::string_view op;  ///< the op front end's name ("matmul")
  Policy policy;        ///< what autocast does to its arguments
};

/// The one table: every op front end that consults autocast, by name, with its policy.
std::span<const OpPolicy> policy_table();
/// The policy of `op`, built in or registered; ValueError naming it when neither has it.
Policy policy_of(std::string_view op);
/// The policy of `op`, built in or registered; none when neither has it.
std::optional<Policy> find_policy(std::string_view op);
/// Gives a user op an autocast policy (torch.amp.custom_fwd's role): its front end can then call
/// autocast_args(op, ...) as a built-in op does, and an autograd::Function whose name is `op` has its
/// tensor arguments cast and autocast off inside its forward. Any thread, any time; registering the
/// same policy again does nothing. ValueError for an empty name, a built-in op's name, or a name
/// already registered with another policy.
void register_policy(std::string op, Policy policy);

/// torch.autocast(device_type, dtype, enabled, cache_enabled): while alive, ops on tensors of
/// `device_type` made on this thread follow the policy table. dtype f16 or bf16; by default the
/// current one (f16 on CUDA and bf16 on the CPU outside any region, as PyTorch). Regions nest: the
/// previous state returns at destruction, and enabled = false turns autocast off inside. The weight
/// cast cache (cache_enabled) lives until the outermost region ends. In-place ops are not autocast.
class Autocast {
 public:
  /// Enters the region; DTypeError for a dtype other than f16 or bf16.
  explicit Autocast(DeviceType device_type, std::optional<DType> dtype = {}, bool enabled = true,
                    bool cache_enabled = true);
  ~Autocast();
  Autocast(const Autocast&) = delete;
  Autocast& operator=(const Autocast&) = delete;

 private:
  DeviceType device_type_;
  bool prev_enabled_;
  DType prev_dtype_;
  bool prev_cache_enabled_;
};

/// Whether autocast is on for `device_type` on this thread (torch.is_autocast_enabled; with
/// get_autocast_dtype and is_autocast_cache_enabled, this thread's autocast state).
bool is_autocast_enabled(DeviceType device_type);
DType get_autocast_dtype(DeviceType device_type);  ///< The dtype `lower` casts to on `device_type`.
bool is_autocast_cache_enabled();                  ///< Whether the weight cast cache is on in this region.

/// x cast to dtype. Inside a region with the cache on, with grad mode on, an f32 leaf that requires
/// grad (a weight) cast to f16/bf16 is cast once and reused until the region ends or x is written
/// in place (its version changes); the cast stays an autograd node, so x still gets its gradient.
Tensor cached_cast(const Tensor& x, DType dtype);
/// Entries in this thread's cast cache (0 outside any region).
int64_t cast_cache_size();

namespace detail {
bool any_enabled();
// Casts the eligible tensors of args[0, n) in place as op's policy says for this thread's state.
void apply_policy(std::string_view op, std::optional<DType> dtype, Tensor* args, size_t n);

// Turns autocast off on this thread while alive: an op's inner ops and the vjps are not autocast
// again (PyTorch's autocast wrappers run the op below the Autocast dispatch key).
class Pause {
 public:
  Pause();
  ~Pause();
  Pause(const Pause&) = delete;
  Pause& operator=(const Pause&) = delete;

 private:
  std::array<bool, 2> saved_{};
  bool engaged_ = false;
};

template <size_t N>
std::array<Tensor, N> autocast(std::string_view op, std::optional<DType> dtype, std::array<Tensor, N> args) {
  if (any_enabled()) apply_policy(op, dtype, args.data(), N);
  return args;
}
}  // namespace detail

/// An op's arguments after autocast, with autocast paused until the op returns. Unpack it with a
/// structured binding at the top of the front end: auto [a, b] = amp::autocast_args("matmul", a0, b0);
template <size_t N>
class OpArgs {
 public:
  /// Casts `args` as op's policy says (a given dtype turns fp32_unless_dtype off) and pauses autocast.
  OpArgs(std::string_view op, std::optional<DType> dtype, std::array<Tensor, N> args)
      : args_(detail::autocast(op, dtype, std::move(args))) {}
  template <size_t I>
  /// The I-th argument after the cast (what a structured binding reads).
  const Tensor& get() const {
    return std::get<I>(args_);
  }

 private:
  std::array<Tensor, N> args_;
  detail::Pause pause_;  // declared after args_: the casts run before autocast pauses
};

/// The same for ops taking a list of tensors (cat, stack); tensors() holds the casts, or the
/// caller's list itself (which must outlive this) when autocast is off: no copy then.
class OpArgList {
 public:
  /// Casts `tensors` as op's policy says and pauses autocast.
  OpArgList(std::string_view op, const std::vector<Tensor>& tensors);
  const std::vector<Tensor>& tensors() const { return cast_ ? *cast_ : *source_; }  ///< The arguments after the cast.

 private:
  const std::vector<Tensor>* source_;
  std::optional<std::vector<Tensor>> cast_;
  detail::Pause pause_;
};

/// The helper every op front end calls first: its arguments cast as the table says for `op`.
template <class... Ts>
  requires(std::same_as<Ts, Tensor> && ...)
OpArgs<sizeof...(Ts)> autocast_args(std::string_view op, const Ts&... args) {
  return {op, std::nullopt, {args...}};
}
/// For ops with a dtype argument: a given dtype turns fp32_unless_dtype off for the call.
template <class... Ts>
  requires(std::same_as<Ts, Tensor> && ...)
OpArgs<sizeof...(Ts)> autocast_args(std::string_view op, std::optional<DType> dtype, const Ts&... args) {
  return {op, dtype, {args...}};
}
/// For ops taking a list of tensors (cat, stack).
inline OpArgList autocast_args(std::string_view op, const std::vector<Tensor>& tensors) { return {op, tensors}; }

}  // namespace ember::amp

// Structured bindings of OpArgs.
/// @cond
template <size_t N>
struct std::tuple_size<ember::amp::OpArgs<N>> : std::integral_constant<size_t, N> {};
template <size_t I, size_t N>
struct std::tuple_element<I, ember::amp::OpArgs<N>> {
  using type = const ember::Tensor;
};
/// @endcond
