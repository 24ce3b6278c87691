// The autocast policy table, the thread-local region state and the weight cast cache.
#include "tensor/autocast.h"

#include <map>
#include <mutex>
#include <shared_mutex>
#include <unordered_map>

#include "autograd/grad_mode.h"
#include "tensor/ops.h"

namespace ember::amp {

namespace {

using enum Policy;

// docs/reference.md#autocast (PyTorch aten/src/ATen/autocast_mode.cpp) with ember's op names. Every op
// front end that computes is listed: views, creation, casts and in-place forms are not autocast.
constexpr OpPolicy kTable[] = {
    // lower precision: §1's matmul, mm, bmm, einsum, conv2d, conv_transpose2d, linear (attention's
    // projections use linear), scaled_dot_product_attention.
    {"matmul", lower},
    {"mm", lower},
    {"bmm", lower},
    {"einsum", lower},
    {"conv2d", lower},
    {"conv_transpose2d", lower},
    {"linear", lower},
    {"scaled_dot_product_attention", lower},
    // fp32: §1's exp, log, log1p, pow (tensor and scalar exponents), reciprocal, rsqrt, layer_norm,
    // norms, logsumexp and every loss.
    {"exp", fp32},
    {"log", fp32},
    {"log1p", fp32},
    {"pow", fp32},
    {"pow_scalar", fp32},
    {"reciprocal", fp32},
    {"rsqrt", fp32},
    {"layer_norm", fp32},
    {"norm", fp32},
    {"logsumexp", fp32},
    {"cross_entropy", fp32},
    {"nll_loss", fp32},
    {"mse_loss", fp32},
    // fp32 unless a dtype is given: §1's sum, prod, softmax, log_softmax, cumsum, cumprod.
    {"sum", fp32_unless_dtype},
    {"prod", fp32_unless_dtype},
    {"softmax", fp32_unless_dtype},
    {"log_softmax", fp32_unless_dtype},
    {"cumsum", fp32_unless_dtype},
    {"cumprod", fp32_unless_dtype},
    // promote: §1's cat, stack, scatter_add, and index_put for ember's indexed accumulate index_add.
    // where is in no list of §1 (PyTorch's where promotes by itself, as ember's does): listed here
    // so that its mixed inputs follow the same rule under autocast.
    {"cat", promote},
    {"stack", promote},
    {"scatter_add", promote},
    {"index_add", promote},
    {"where", promote},
    // In no list: the input types.
    {"neg", none},
    {"abs", none},
    {"sign", none},
    {"square", none},
    {"relu", none},
    {"clamp", none},
    {"sqrt", none},
    {"sin", none},
    {"cos", none},
    {"tanh", none},
    {"sigmoid", none},
    {"gelu", none},
    {"gelu_tanh", none},
    {"silu", none},
    {"erf", none},
    {"add", none},
    {"sub", none},
    {"mul", none},
    {"div", none},
    {"maximum", none},
    {"minimum", none},
    {"eq", none},
    {"ne", none},
    {"lt", none},
    {"le", none},
    {"gt", none},
    {"ge", none},
    {"logical_not", none},
    {"masked_fill", none},
    {"index_select", none},
    {"gather", none},
    {"mean", none},
    {"amax", none},
    {"amin", none},
    {"max", none},
    {"min", none},
    {"argmax", none},
    {"argmin", none},
    {"sort", none},
    {"topk", none},
    {"var", none},
    {"std", none},
    {"batch_norm", none},  // half input with f32 weight, bias and statistics, as cuDNN's (§1)
    {"max_pool2d", none},
    {"avg_pool2d", none},
    {"adaptive_avg_pool2d", none},
    {"embedding", none},
    {"dropout", none},
};

constexpr size_t kDeviceTypes = 2;
size_t slot(DeviceType t) { return static_cast<size_t>(t); }

struct State {
  std::array<bool, kDeviceTypes> enabled{false, false};
  std::array<DType, kDeviceTypes> dtype{DType::bf16, DType::f16};  // PyTorch's defaults: CPU bf16, CUDA f16
  bool cache_enabled = true;
  int nesting = 0;  // live Autocast regions, disabled ones included (PyTorch counts them too)
};
thread_local State state;

// Keyed by the tensor itself (its impl, held alive by the entry so the address is not reused);
// an entry is stale once the tensor's storage was swapped or written (version counter).
struct CacheKey {
  const TensorImpl* impl;
  DType dtype;
  bool operator==(const CacheKey&) const = default;
};
struct CacheKeyHash {
  size_t operator()(const CacheKey& k) const {
    return std::hash<const void*>()(k.impl) ^ (static_cast<size_t>(k.dtype) << 1);
  }
};
struct CacheEntry {
  Tensor source;
  const Storage* storage;
  uint64_t version;
  Tensor cast;
};
thread_local std::unordered_map<CacheKey, CacheEntry, CacheKeyHash> cache;

bool eligible(const Tensor& x, DeviceType device_type) {
  return x.defined() && is_floating(x.dtype()) && x.dtype() != DType::f64 && x.device().type == device_type &&
         !x.impl()->is_wrapped_number;
}

// PyTorch's can_try_cache, plus grad mode: a cast made under no_grad has no autograd node and
// must not be handed to a later use that needs the weight's gradient.
bool cacheable(const Tensor& x, DType dtype) {
  return state.nesting > 0 && state.cache_enabled && is_reduced_float(dtype) && x.dtype() == DType::f32 &&
         x.requires_grad() && x.is_leaf() && !x.impl()->is_view && autograd::GradMode::is_enabled();
}

}  // namespace

const char* policy_name(Policy p) {
  switch (p) {
    case none: return "none";
    case lower: return "lower";
    case fp32: return "fp32";
    case fp32_unless_dtype: return "fp32_unless_dtype";
    case promote: return "promote";
  }
  return "?";
}

std::span<const OpPolicy> policy_table() { return kTable; }

namespace {
std::optional<Policy> built_in_policy(std::string_view op) {
  static const std::unordered_map<std::string_view, Policy> by_name = [] {
    std::unordered_map<std::string_view, Policy> m;
    for (const OpPolicy& e : kTable) m.emplace(e.op, e.policy);
    return m;
  }();
  const auto it = by_name.find(op);
  return it == by_name.end() ? std::nullopt : std::optional(it->second);
}

// User ops' policies: read on every autocast call of an op outside the table, written rarely.
struct Registry {
  std::shared_mutex mutex;
  std::map<std::string, Policy, std::less<>> policies;
};
Registry& registry() {
  static Registry r;
  return r;
}
}  // namespace

std::optional<Policy> find_policy(std::string_view op) {
  if (const auto p = built_in_policy(op)) return p;
  Registry& r = registry();
  const std::shared_lock lock(r.mutex);
  const auto it = r.policies.find(op);
  return it == r.policies.end() ? std::nullopt : std::optional(it->second);
}

Policy policy_of(std::string_view op) {
  if (const auto p = find_policy(op)) return *p;
  throw ValueError("autocast: op '" + std::string(op) +
                   "' has no policy: it is not built in (tensor/autocast.cpp) and was not given one with "
                   "amp::register_policy()");
}

void register_policy(std::string op, Policy policy) {
  if (op.empty()) throw ValueError("amp::register_policy: the op name is empty");
  if (const auto p = built_in_policy(op))
    throw ValueError("amp::register_policy: '" + op + "' is a built-in op (policy " + policy_name(*p) +
                     "); choose another name for a user op");
  Registry& r = registry();
  const std::unique_lock lock(r.mutex);
  const auto [it, inserted] = r.policies.try_emplace(op, policy);
  if (!inserted && it->second != policy)
    throw ValueError("amp::register_policy: '" + op + "' is registered with policy " + policy_name(it->second) +
                     ", not " + policy_name(policy));
}

Autocast::Autocast(DeviceType device_type, std::optional<DType> dtype, bool enabled, bool cache_enabled)
    : device_type_(device_type),
      prev_enabled_(state.enabled[slot(device_type)]),
      prev_dtype_(state.dtype[slot(device_type)]),
      prev_cache_enabled_(state.cache_enabled) {
  const DType d = dtype.value_or(prev_dtype_);
  if (!is_reduced_float(d))
    throw ValueError(std::string("Autocast: dtype must be float16 or bfloat16, got ") + dtype_name(d));
  ++state.nesting;
  state.enabled[slot(device_type)] = enabled;
  state.dtype[slot(device_type)] = d;
  state.cache_enabled = cache_enabled;
}

Autocast::~Autocast() {
  state.enabled[slot(device_type_)] = prev_enabled_;
  state.dtype[slot(device_type_)] = prev_dtype_;
  state.cache_enabled = prev_cache_enabled_;
  if (--state.nesting == 0) cache.clear();
}

bool is_autocast_enabled(DeviceType device_type) { return state.enabled[slot(device_type)]; }
DType get_autocast_dtype(DeviceType device_type) { return state.dtype[slot(device_type)]; }
bool is_autocast_cache_enabled() { return state.cache_enabled; }

Tensor cached_cast(const Tensor& x, DType dtype) {
  if (x.dtype() == dtype || !cacheable(x, dtype)) return to(x, dtype);
  const CacheKey key{x.impl(), dtype};
  const auto it = cache.find(key);
  if (it != cache.end() && it->second.storage == x.storage().get() && it->second.version == x.version())
    return it->second.cast;
  Tensor cast = to(x, dtype);
  cache.insert_or_assign(key, CacheEntry{x, x.storage().get(), x.version(), cast});
  return cast;
}

int64_t cast_cache_size() { return static_cast<int64_t>(cache.size()); }

namespace detail {

bool any_enabled() { return state.enabled[0] || state.enabled[1]; }

void apply_policy(std::string_view op, std::optional<DType> dtype, Tensor* args, size_t n) {
  const Policy p = policy_of(op);
  if (p == none || (p == fp32_unless_dtype && dtype)) return;
  const Tensor* first = nullptr;
  for (size_t i = 0; i < n && !first; ++i)
    if (args[i].defined()) first = &args[i];
  if (!first) return;
  const DeviceType device_type = first->device().type;  // the device the op runs on
  if (!state.enabled[slot(device_type)]) return;
  std::optional<DType> target;
  if (p == lower) {
    target = state.dtype[slot(device_type)];
  } else if (p == promote) {
    for (size_t i = 0; i < n; ++i)
      if (eligible(args[i], device_type)) target = target ? promote_types(*target, args[i].dtype()) : args[i].dtype();
    if (!target) return;
  } else {
    target = DType::f32;
  }
  for (size_t i = 0; i < n; ++i)
    if (eligible(args[i], device_type) && args[i].dtype() != *target)
      args[i] = p == lower ? cached_cast(args[i], *target) : to(args[i], *target);
}

Pause::Pause() : saved_(state.enabled), engaged_(any_enabled()) {
  if (engaged_) state.enabled.fill(false);
}

Pause::~Pause() {
  if (engaged_) state.enabled = saved_;
}

}  // namespace detail

namespace {
std::optional<std::vector<Tensor>> cast_list(std::string_view op, const std::vector<Tensor>& tensors) {
  if (!detail::any_enabled()) return std::nullopt;
  std::vector<Tensor> cast = tensors;
  detail::apply_policy(op, std::nullopt, cast.data(), cast.size());
  return cast;
}
}  // namespace

OpArgList::OpArgList(std::string_view op, const std::vector<Tensor>& tensors)
    : source_(&tensors), cast_(cast_list(op, tensors)) {}

}  // namespace ember::amp
