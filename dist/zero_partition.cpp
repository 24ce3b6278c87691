#include "dist/zero_partition.h"

#include <algorithm>
#include <map>
#include <optional>
#include <tuple>
#include <unordered_map>

#include "autograd/engine.h"
#include "autograd/grad_mode.h"
#include "dist/data_parallel_common.h"
#include "dist/reducer.h"
#include "nn/checkpoint.h"
#include "tensor/ops.h"

namespace ember::dist {

namespace {

// Points `param`'s storage at `flat`'s elements from `offset` on (`param` is contiguous, so its
// strides stay right): every handle to the parameter, in the modules and in optimizers, then reads
// and writes the flat buffer, as after PyTorch's `p.data = flat[offset:].view_as(p)`.
void rebind(const Tensor& param, const Tensor& flat, int64_t offset) {
  TensorImpl* impl = param.impl();
  impl->storage = flat.storage();
  impl->offset = flat.offset() + offset;
}

// Each parameter starts on a 64-byte boundary of its unit, as a tensor of its own would: kernels
// may pick their vector paths, and so their order of summation, by alignment.
constexpr int64_t kParameterAlignment = 64;

int64_t bytes_of(const Tensor& t) { return t.defined() ? t.numel() * static_cast<int64_t>(dtype_size(t.dtype())) : 0; }

}  // namespace

void check_zero_options(const ZeroOptions& o) {
  const auto positive = [](const char* knob, int64_t v) {
    if (v < 1) throw ValueError(std::string("ZeRO: ") + knob + " must be >= 1, got " + std::to_string(v));
  };
  if (o.stage < 1 || o.stage > 3) throw ValueError("ZeRO: stage must be 1, 2 or 3, got " + std::to_string(o.stage));
  positive("reduce_bucket_size", o.reduce_bucket_size);
  positive("allgather_bucket_size", o.allgather_bucket_size);
  positive("stage3_prefetch_bucket_size", o.stage3_prefetch_bucket_size);
  if (o.min_num_params < 0) throw ValueError("ZeRO: min_num_params must be >= 0, got " + std::to_string(o.min_num_params));
  if (o.stage != 3 && (o.min_num_params > 0 || !o.wrap_module_types.empty()))
    throw ValueError("ZeRO: a wrap policy (min_num_params, wrap_module_types) decides stage 3's units; stage " +
                     std::to_string(o.stage) + " has none");
  if (o.offload_param && o.stage != 3)
    throw ValueError("ZeRO: offload_param moves stage 3's parameter shards to the host; stage " + std::to_string(o.stage) +
                     " keeps whole parameters on every rank");
  if (o.offload_param && !o.offload_optimizer)
    throw ValueError("ZeRO: offload_param keeps the parameter shards on the host, where the optimizer then steps them: "
                     "set offload_optimizer too");
  if (o.stage3_param_persistence_threshold < 0)
    throw ValueError("ZeRO: stage3_param_persistence_threshold must be >= 0, got " +
                     std::to_string(o.stage3_param_persistence_threshold));
}

struct ZeroPartition::State : std::enable_shared_from_this<State> {
  struct Unit {
    std::vector<size_t> members;   // indices into params
    std::vector<int64_t> offsets;  // each member's first element in the unit's flat space
    int64_t numel = 0, shard = 0;  // shard: elements per rank; the flat space is shard x ranks
    bool persistent = true;        // whole between uses (always at stages 1 and 2)
    Tensor full;                   // the whole parameters; released between uses unless persistent
    Tensor own;                    // this rank's shard: a view of full when persistent, else its own memory
                                   // (offload_param: always its own, on the host)
    Tensor grads;                  // this backward's gradients (stage 1: always, with .grad views)
    Tensor shard_grads;            // this rank's shard of the averaged gradients (offload_param: on the host)
    std::vector<Tensor> loose;     // without contiguous_gradients: the gradients until the unit is reduced
    size_t gather_ticket = 0;      // stage 3: the gather that makes full whole (0: none posted)
    bool whole = true;             // full holds the parameters (gathered, or persistent)
  };

  std::shared_ptr<ProcessGroup> group;
  ZeroOptions options;
  int rank = 0, ranks = 1;
  std::vector<std::pair<std::string, Tensor>> params;  // those requiring grad, in registration order
  std::vector<size_t> unit_of, slot_of;  // each parameter's unit and its place among the unit's members
  std::vector<Unit> units;  // in reduction order: the last registered parameters first
  std::vector<const nn::Module*> unit_owner;  // stage 3: the wrapped module each unit belongs to
  std::vector<Tensor> pieces;
  std::vector<PieceInfo> piece_info;
  std::vector<std::pair<size_t, int64_t>> piece_at;  // each piece's unit and offset in the unit's shard
  std::vector<nn::HookHandle> hooks;

  // Gradient accumulation (the reducer's sync is false under no_sync()): the gradients of earlier
  // backwards of this step are held, at stage 1 unreduced in the units' buffers, at stages 2 and 3
  // averaged in the shards, where each backward adds its own.
  bool carried = false;

  // Stage 3: the units in the order the last training forward fetched them, and this one's so far.
  std::vector<size_t> forward_order, fetching_order;
  size_t gathered_scopes = 0;  // live Gathered guards
  int64_t gathers = 0;         // units gathered so far (stage 3)

  // Launches the units' reductions in order as their gradients come; its communication thread runs
  // them and the gathers (last: its thread ends before the rest goes).
  std::optional<Reducer> reducer;

  // ---- construction

  void build_units(nn::Module& module) {
    std::unordered_map<const TensorImpl*, size_t> index_of;
    for (size_t i = 0; i < params.size(); ++i) index_of[params[i].second.impl()] = i;
    std::vector<std::vector<size_t>> groups;  // in registration order
    std::vector<const nn::Module*> group_owner;  // stage 3: each group's wrapped module
    if (options.stage == 3) {
      // One unit per wrapped module (wrapped_modules): the parameters of its subtree that no wrapped
      // module below it holds, split by dtype.
      const std::vector<std::shared_ptr<nn::Module>> modules = module.modules();  // depth first, the root first
      std::vector<size_t> parent(modules.size(), 0);
      std::unordered_map<const nn::Module*, size_t> position;
      for (size_t m = 0; m < modules.size(); ++m) position[modules[m].get()] = m;
      for (size_t m = 0; m < modules.size(); ++m)
        for (const auto& [name, child] : modules[m]->named_children()) parent[position.at(child.get())] = m;
      // Each module's own parameters (a shared one with the first module that has it).
      std::vector<std::vector<size_t>> own(modules.size());
      std::vector<bool> taken(params.size(), false);
      for (size_t m = 0; m < modules.size(); ++m)
        for (const Tensor& p : modules[m]->parameters(/*recurse=*/false)) {
          const auto it = index_of.find(p.impl());
          if (it == index_of.end() || taken[it->second]) continue;  // frozen, or shared and owned already
          taken[it->second] = true;
          own[m].push_back(it->second);
        }
      const std::vector<bool> wrapped = wrapped_modules(modules, parent, own);
      std::vector<std::map<DType, std::vector<size_t>>> by_owner(modules.size());
      for (size_t m = 0; m < modules.size(); ++m) {
        size_t owner = m;
        while (!wrapped[owner]) owner = parent[owner];
        for (size_t i : own[m]) by_owner[owner][params[i].second.dtype()].push_back(i);
      }
      for (size_t m = 0; m < modules.size(); ++m)
        for (auto& [dtype, members] : by_owner[m]) {
          groups.push_back(std::move(members));
          group_owner.push_back(modules[m].get());
        }
      std::reverse(groups.begin(), groups.end());
      std::reverse(group_owner.begin(), group_owner.end());
    } else {
      // Reverse registration order, up to reduce_bucket_size elements of one dtype per unit.
      std::vector<size_t> current;
      int64_t numel = 0;
      for (size_t k = params.size(); k-- > 0;) {
        const Tensor& p = params[k].second;
        if (!current.empty() && (params[current.front()].second.dtype() != p.dtype() ||
                                 numel + p.numel() > options.reduce_bucket_size)) {
          groups.push_back(std::move(current));
          current.clear();
          numel = 0;
        }
        current.push_back(k);
        numel += p.numel();
      }
      if (!current.empty()) groups.push_back(std::move(current));
    }
    unit_of.assign(params.size(), 0);
    slot_of.assign(params.size(), 0);
    unit_owner = std::move(group_owner);
    for (auto& members : groups) {
      Unit u;
      u.members = std::move(members);
      for (size_t i : u.members) {
        const int64_t align = kParameterAlignment / static_cast<int64_t>(dtype_size(params[i].second.dtype()));
        u.numel = (u.numel + align - 1) / align * align;
        u.offsets.push_back(u.numel);
        u.numel += params[i].second.numel();
        unit_of[i] = units.size();
        slot_of[i] = u.offsets.size() - 1;
      }
      u.shard = (u.numel + ranks - 1) / ranks;
      u.persistent = options.stage < 3 || u.numel <= options.stage3_param_persistence_threshold;
      units.push_back(std::move(u));
    }
  }

  // Stage 3: which of `modules` (depth first, the root first) own a unit, by the wrap policy. Without
  // one, every module with parameters of its own (its unit: those). With min_num_params, as FSDP's
  // size_based_auto_wrap_policy: from the leaves up, a module whose subtree holds at least that many
  // elements not in a wrapped module below it; with wrap_module_types, each module of those types. The
  // root always (it takes the rest). Only a UnaryModule is called, so only one can gather its unit.
  std::vector<bool> wrapped_modules(const std::vector<std::shared_ptr<nn::Module>>& modules,
                                    const std::vector<size_t>& parent, const std::vector<std::vector<size_t>>& own) {
    std::vector<bool> wrapped(modules.size(), false);
    const bool policy = options.min_num_params > 0 || !options.wrap_module_types.empty();
    std::vector<int64_t> unwrapped(modules.size(), 0);  // elements of the subtree not in a wrapped module below
    for (size_t m = modules.size(); m-- > 0;) {  // children come after their parent: from the leaves up
      for (size_t i : own[m]) unwrapped[m] += params[i].second.numel();
      const bool callable = dynamic_cast<const nn::UnaryModule*>(modules[m].get()) != nullptr;
      const auto& types = options.wrap_module_types;
      const bool by_type = std::find(types.begin(), types.end(), modules[m]->name()) != types.end();
      if (by_type && !callable)
        throw ValueError("ZeRO wrap_module_types: the modules of type \"" + modules[m]->name() +
                         "\" are not called (not a UnaryModule), so they cannot gather their parameters");
      if (!policy) wrapped[m] = !own[m].empty();
      else wrapped[m] = m == 0 || by_type || (callable && options.min_num_params > 0 && unwrapped[m] >= options.min_num_params);
      if (m > 0 && !wrapped[m]) unwrapped[parent[m]] += unwrapped[m];
    }
    wrapped[0] = true;
    for (const std::string& type : options.wrap_module_types)
      if (std::none_of(modules.begin(), modules.end(), [&](const auto& mod) { return mod->name() == type; }))
        throw ValueError("ZeRO wrap_module_types: the model has no module of type \"" + type + "\"");
    return wrapped;
  }

  // offload_param: `n` zeros in host memory, page-locked when the group serves a GPU, so that the
  // copies between it and the device run asynchronously on the communication thread's stream.
  Tensor host_buffer(int64_t n, DType dtype) const {
    Tensor t = zeros({n}, TensorOptions(dtype));
    return group->device().is_cuda() ? pin_memory(t) : t;
  }

  // Moves every parameter into its unit's flat buffer and cuts out this rank's shard and pieces.
  void place_parameters() {
    autograd::NoGradGuard no_grad;
    for (size_t k = 0; k < units.size(); ++k) {
      Unit& u = units[k];
      const Tensor& first = params[u.members.front()].second;
      const TensorOptions opts = TensorOptions(first.dtype()).with_device(first.device());
      u.full = zeros({u.shard * ranks}, opts);
      for (size_t j = 0; j < u.members.size(); ++j) {
        const Tensor& p = params[u.members[j]].second;
        Tensor slot = u.full.narrow(0, u.offsets[j], p.numel());
        copy_(slot, p.detach().reshape({p.numel()}));
        rebind(p, u.full, u.offsets[j]);
      }
      u.own = u.full.narrow(0, rank * u.shard, u.shard);
      if (options.offload_param) {
        Tensor host = host_buffer(u.shard, first.dtype());
        u.own = copy_(host, u.own);
      } else if (!u.persistent) {
        u.own = u.own.clone();
      }
      if (!u.persistent) release(u);
      u.loose.assign(u.members.size(), Tensor());
      if (options.stage == 1) {  // the whole gradients stay; the average of this rank's shard lands in place
        u.grads = zeros({u.shard * ranks}, opts);
        u.shard_grads = u.grads.narrow(0, rank * u.shard, u.shard);
      } else {
        u.shard_grads = options.offload_param ? host_buffer(u.shard, first.dtype()) : zeros({u.shard}, opts);
      }
    }
    // Pieces in parameter order.
    std::vector<std::tuple<size_t, size_t, int64_t, int64_t>> found;  // parameter, unit, start in the unit, length
    for (size_t k = 0; k < units.size(); ++k) {
      const Unit& u = units[k];
      const int64_t lo = rank * u.shard, hi = lo + u.shard;
      for (size_t j = 0; j < u.members.size(); ++j) {
        const int64_t a = std::max(lo, u.offsets[j]);
        const int64_t b = std::min(hi, u.offsets[j] + params[u.members[j]].second.numel());
        if (a < b) found.emplace_back(u.members[j], k, a, b - a);
      }
    }
    std::sort(found.begin(), found.end());
    for (const auto& [i, k, start, length] : found) {
      const Unit& u = units[k];
      Tensor piece = u.own.narrow(0, start - rank * u.shard, length).detach();
      piece.requires_grad_(true);
      pieces.push_back(piece);
      piece_info.push_back({i, params[i].first, start - u.offsets[slot_of[i]]});
      piece_at.emplace_back(k, start - rank * u.shard);
    }
  }

  // ---- stage 3: whole parameters only while in use

  void release(Unit& u) {
    u.full.storage()->release_memory();
    u.whole = false;
    u.gather_ticket = 0;
  }

  // Posts the gather of every rank's shard into `full`, in calls of at most allgather_bucket_size
  // elements; `version` (when set) is put back afterwards, for tensors saved for backward. An
  // offloaded shard is first copied from the host into this rank's slot, and gathered from there.
  size_t post_gather(const Tensor& full, const Tensor& own, int64_t shard, std::optional<uint64_t> version) {
    const int64_t chunk = std::max<int64_t>(1, options.allgather_bucket_size / ranks);
    return reducer->comm().post([this, full, own, shard, chunk, version] {
      for (int64_t at = 0; at < shard; at += chunk) {
        const int64_t n = std::min(chunk, shard - at);
        std::vector<Tensor> outputs;
        for (int r = 0; r < ranks; ++r) outputs.push_back(full.narrow(0, r * shard + at, n));
        Tensor input = own.narrow(0, at, n);
        if (options.offload_param) input = copy_(outputs[rank], input, /*non_blocking=*/true);
        group->all_gather(outputs, input);
      }
      if (version) full.storage()->restore_version(*version);
    }, full.device());
  }

  // Starts making unit k whole, unless it is or is on its way.
  void prefetch(size_t k) {
    Unit& u = units[k];
    if (u.whole || u.gather_ticket) return;
    const uint64_t version = u.full.storage()->version();
    ++gathers;
    u.full.storage()->restore_memory();
    u.gather_ticket = post_gather(u.full, u.own, u.shard, version);
  }

  void fetch(size_t k) {
    Unit& u = units[k];
    if (u.whole) return;
    prefetch(k);
    reducer->comm().wait(u.gather_ticket);
    u.whole = true;
    u.gather_ticket = 0;
  }

  // Unit k and those that followed it (forward) or preceded it (backward) in the last forward,
  // up to stage3_prefetch_bucket_size elements ahead.
  void fetch_with_prefetch(size_t k, bool backward) {
    prefetch(k);
    const auto at = std::find(forward_order.begin(), forward_order.end(), k);
    if (at != forward_order.end()) {
      int64_t ahead = 0;
      const auto step = [&](auto first, auto last) {
        for (auto it = first; it != last; ++it) {
          const Unit& next = units[*it];
          if (next.persistent || next.whole || next.gather_ticket) continue;
          if (ahead + next.numel > options.stage3_prefetch_bucket_size) break;
          ahead += next.numel;
          prefetch(*it);
        }
      };
      if (backward) step(std::make_reverse_iterator(at), forward_order.rend());
      else step(at + 1, forward_order.end());
    }
    fetch(k);
  }

  void on_module_pre_forward(size_t k) {
    if (nn::is_recomputing()) {
      // In backward: the units worth prefetching precede this one, and the gradient hooks fetch them.
      fetch(k);
      return;
    }
    if (autograd::GradMode::is_enabled()) fetching_order.push_back(k);
    fetch_with_prefetch(k, false);
  }

  void on_module_forward(size_t k, const Tensor& output) {
    // A checkpoint's recompute runs in backward, just before the unit's own backward: the unit stays
    // whole until its gradients are in (mark_ready), and the recompute's output gets none.
    if (nn::is_recomputing()) return;
    if (gathered_scopes == 0) release(units[k]);
    if (!autograd::GradMode::is_enabled() || !output.defined() || !output.requires_grad()) return;
    std::weak_ptr<State> weak = weak_from_this();
    output.register_hook([weak, k](const Tensor&) {
      if (auto self = weak.lock()) self->fetch_with_prefetch(k, true);
      return Tensor();
    });
  }

  // ---- gradients

  // Before a forward that will be differentiated: fresh gradient buffers and readiness.
  void prepare() {
    reducer->prepare();
    autograd::NoGradGuard no_grad;
    for (Unit& u : units) {
      u.loose.assign(u.members.size(), Tensor());
      if (options.stage == 1) {
        if (carried) continue;  // this backward adds to them
        zero_(u.grads);
        for (size_t j = 0; j < u.members.size(); ++j) {
          const Tensor& p = params[u.members[j]].second;
          p.set_grad(u.grads.narrow(0, u.offsets[j], p.numel()).view(p.shape()));
        }
      } else {
        u.grads = Tensor();
        for (size_t i : u.members) params[i].second.set_grad(Tensor());
      }
    }
    if (!fetching_order.empty()) forward_order = std::move(fetching_order);
    fetching_order.clear();
  }

  // The post-accumulate-grad hook of parameter i.
  void on_gradient(size_t i) {
    // Stage 1 under no_sync: the gradient stays in its buffer for the step's last backward, as DDP's.
    const bool keep = options.stage == 1 && !reducer->sync();
    if (!keep)
      reducer->begin([weak = weak_from_this()] {
        if (auto self = weak.lock()) self->end_of_backward();
      });
    autograd::NoGradGuard no_grad;
    Unit& u = units[unit_of[i]];
    const size_t j = slot_of[i];
    const Tensor& p = params[i].second;
    if (options.stage == 1) {
      Tensor view = u.grads.narrow(0, u.offsets[j], p.numel()).view(p.shape());
      if (p.grad().raw_data() != view.raw_data()) {  // a .grad replaced meanwhile: copied into the buffer
        copy_(view, p.grad());
        p.set_grad(view);
      }
      if (keep) {
        carried = true;
        return;
      }
    } else if (options.contiguous_gradients) {
      if (!u.grads.defined()) u.grads = zeros({u.shard * ranks}, TensorOptions(p.dtype()).with_device(p.device()));
      Tensor slot = u.grads.narrow(0, u.offsets[j], p.numel());
      copy_(slot, p.grad().reshape({p.numel()}));
      p.set_grad(Tensor());
    } else {
      u.loose[j] = p.grad();
      p.set_grad(Tensor());
    }
    mark_ready(i);
  }

  void mark_ready(size_t i) {
    if (options.stage == 1 && !reducer->sync()) return;  // kept unreduced, as DDP's no_sync
    reducer->mark_ready(i);
  }

  // The reducer's: unit k's gradients are all in, so its backward is over.
  void on_unit_filled(size_t k) {
    Unit& u = units[k];
    if (!u.persistent && gathered_scopes == 0) release(u);
  }

  // Averages unit k's gradients over the ranks into its shard_grads.
  void launch(size_t k) {
    Unit& u = units[k];
    autograd::NoGradGuard no_grad;
    if (!u.grads.defined()) {  // stages 2 and 3: the buffer made now (no contiguous_gradients, or no gradient came)
      const Tensor& first = params[u.members.front()].second;
      u.grads = zeros({u.shard * ranks}, TensorOptions(first.dtype()).with_device(first.device()));
    }
    for (size_t j = 0; j < u.members.size(); ++j)
      if (u.loose[j].defined()) {
        Tensor slot = u.grads.narrow(0, u.offsets[j], u.loose[j].numel());
        copy_(slot, u.loose[j].reshape({u.loose[j].numel()}));
        u.loose[j] = Tensor();
      }
    const Tensor grads = u.grads, shard_grads = u.shard_grads;
    if (options.stage > 1) u.grads = Tensor();  // freed once the reduction is done with it
    const int64_t start = rank * u.shard;
    const bool add = options.stage > 1 && carried;  // onto the earlier backwards' averages
    const size_t ticket = reducer->comm().post([this, grads, shard_grads, start, add] {
      Tensor own = grads.narrow(0, start, shard_grads.numel());
      if (options.reduce_scatter) {
        // Into the shard itself, unless it is added to or lives on the host (offload_param).
        own = add || options.offload_param ? empty(shard_grads.shape(), TensorOptions(grads.dtype()).with_device(grads.device()))
                                           : shard_grads;
        group->reduce_scatter(own, grads, ReduceOp::avg);
      } else {
        group->all_reduce(grads, ReduceOp::avg);
      }
      Tensor out = shard_grads;  // a handle the ops can write through (the captured one is const)
      if (add) add_(out, own.to(out.device()));
      else if (own.raw_data() != out.raw_data()) copy_(out, own);
    }, grads.device());
    if (!options.overlap_comm) reducer->comm().wait(ticket);
  }

  // The autograd callback: waits for every reduction, then gives each piece its averaged gradient.
  void end_of_backward() {
    carried = !reducer->sync();  // stages 2 and 3: the shards hold this backward's averages for the next
    const Reducer::Outcome outcome = reducer->finish();
    // A unit prefetched but never used in this backward is released too: its gather holds the
    // parameters from before the coming step, which its next use must not take as current.
    if (gathered_scopes == 0)
      for (Unit& u : units)
        if (!u.persistent && (u.whole || u.gather_ticket)) release(u);
    outcome.raise("ZeRO stage " + std::to_string(options.stage) + ": " + group->rank_text(), "units");
    for (size_t n = 0; n < pieces.size(); ++n) {
      const auto& [k, start] = piece_at[n];
      pieces[n].set_grad(units[k].shard_grads.narrow(0, start, pieces[n].numel()));
    }
  }

  void on_root_pre_forward(nn::Module& module) {
    if (options.broadcast_buffers && ranks > 1) {
      const std::vector<Tensor> buffers = module.buffers();
      if (!buffers.empty())
        reducer->comm().wait(reducer->comm().post([this, buffers] { broadcast_coalesced(*group, buffers); }, buffers.front().device()));
    }
    if (autograd::GradMode::is_enabled()) prepare();
  }

  void on_root_forward(const Tensor& output) {
    if (!autograd::GradMode::is_enabled() || !options.find_unused_parameters) return;
    if (options.stage == 1 && !reducer->sync()) return;  // nothing is reduced in this backward
    reducer->mark_unused(output);
  }
};

ZeroPartition::ZeroPartition(nn::Module& module, std::shared_ptr<ProcessGroup> group, ZeroOptions options)
    : state_(std::make_shared<State>()) {
  if (!group) throw ValueError("ZeroPartition: the process group is null");
  check_zero_options(options);
  State& s = *state_;
  s.group = std::move(group);
  s.options = options;
  s.rank = s.group->rank();
  s.ranks = s.group->size();
  for (auto& [name, p] : module.named_parameters())
    if (p.requires_grad()) s.params.emplace_back(name, p);
  if (s.params.empty()) throw ValueError("ZeroPartition: the module has no parameter that requires grad");
  for (const auto& [name, p] : s.params) {
    if (!(p.device() == s.group->device()))
      throw DeviceError("ZeroPartition: parameter " + name + " is on " + p.device().str() + " but the " +
                        s.group->backend_name() + " group serves " + s.group->device().str() +
                        " tensors: move the module first");
    if (!p.is_floating_point() || !p.is_contiguous())
      throw ValueError("ZeroPartition: parameter " + name + " (" + tensor_text(p) +
                       ") must be a contiguous floating-point tensor");
  }
  if (s.ranks > 1) {  // every rank starts from rank 0's state
    std::vector<Tensor> state = module.parameters();
    for (const Tensor& b : module.buffers()) state.push_back(b);
    broadcast_coalesced(*s.group, state);
  }
  s.build_units(module);
  s.place_parameters();
  if (s.pieces.empty())
    throw ValueError("ZeroPartition: " + s.group->rank_text() + " owns no element of the " +
                     std::to_string(s.params.size()) + " parameters: the model is too small to shard over " +
                     std::to_string(s.ranks) + " ranks");
  s.reducer.emplace(s.params, s.unit_of, [&s](size_t k) { s.launch(k); }, [&s](size_t k) { s.on_unit_filled(k); });

  std::weak_ptr<State> weak = state_;
  for (size_t i = 0; i < s.params.size(); ++i)
    s.params[i].second.register_post_accumulate_grad_hook([weak, i](const Tensor&) {
      if (auto self = weak.lock()) self->on_gradient(i);
    });
  s.hooks.push_back(module.register_forward_pre_hook([weak](nn::Module& m, const Tensor&) {
    if (auto self = weak.lock()) self->on_root_pre_forward(m);
  }));
  s.hooks.push_back(module.register_forward_hook([weak](nn::Module&, const Tensor&, const Tensor& y) {
    if (auto self = weak.lock()) self->on_root_forward(y);
  }));
  if (s.options.stage == 3) {
    // Each unit is whole around its wrapped module's calls.
    for (const auto& m : module.modules()) {
      std::vector<size_t> owned;
      for (size_t k = 0; k < s.units.size(); ++k)
        if (s.unit_owner[k] == m.get() && !s.units[k].persistent) owned.push_back(k);
      if (owned.empty()) continue;
      s.hooks.push_back(m->register_forward_pre_hook([weak, owned](nn::Module&, const Tensor&) {
        if (auto self = weak.lock())
          for (size_t k : owned) self->on_module_pre_forward(k);
      }));
      s.hooks.push_back(m->register_forward_hook([weak, owned](nn::Module&, const Tensor&, const Tensor& y) {
        if (auto self = weak.lock())
          for (size_t k : owned) self->on_module_forward(k, y);
      }));
    }
  }
}

ZeroPartition::~ZeroPartition() {
  for (nn::HookHandle& h : state_->hooks) h.remove();
}

int64_t ZeroPartition::unit_gathers() const { return state_->gathers; }

NoSync ZeroPartition::no_sync() { return NoSync(state_, &state_->reducer->sync()); }

void ZeroPartition::zero_grad() { state_->carried = false; }

const std::vector<Tensor>& ZeroPartition::pieces() const { return state_->pieces; }
const std::vector<ZeroPartition::PieceInfo>& ZeroPartition::piece_info() const { return state_->piece_info; }
int ZeroPartition::stage() const { return state_->options.stage; }
const ZeroOptions& ZeroPartition::options() const { return state_->options; }
ProcessGroup& ZeroPartition::process_group() const { return *state_->group; }

void ZeroPartition::gather_updated_parameters() {
  State& s = *state_;
  const bool offload = s.options.offload_param;  // the shards on the host: copied into full even on one rank
  if (s.ranks == 1 && !offload) return;
  for (State::Unit& u : s.units)
    if (u.persistent) s.post_gather(u.full, offload ? u.own : u.own.clone(), u.shard, std::nullopt);  // else own aliases full
  if (const auto failure = s.reducer->comm().drain()) std::rethrow_exception(failure);
}

void ZeroPartition::agree_on_overflow(const Tensor& found_inf) const {
  if (state_->ranks > 1) state_->group->all_reduce(found_inf, ReduceOp::max);
}

Tensor ZeroPartition::total_norm(const Tensor& local_norm) const {
  if (state_->ranks == 1) return local_norm.to(state_->group->device());  // offloaded: from the host
  autograd::NoGradGuard no_grad;
  Tensor squares = mul(local_norm, local_norm).to(state_->group->device());  // offloaded: from the host
  state_->group->all_reduce(squares, ReduceOp::sum);
  return sqrt(squares);
}

ZeroPartition::Gathered::~Gathered() {
  if (!state_ || --state_->gathered_scopes > 0) return;
  for (State::Unit& u : state_->units)
    if (!u.persistent && u.whole) state_->release(u);
}

ZeroPartition::Gathered::Gathered(Gathered&&) noexcept = default;

ZeroPartition::Gathered ZeroPartition::gathered() {
  State& s = *state_;
  if (s.reducer->in_backward()) throw StateError("ZeroPartition::gathered: not during a backward");
  ++s.gathered_scopes;
  Gathered guard(state_);
  for (size_t k = 0; k < s.units.size(); ++k) s.prefetch(k);
  for (size_t k = 0; k < s.units.size(); ++k) s.fetch(k);
  return guard;
}

std::vector<ZeroPartition::Unit> ZeroPartition::units() const {
  std::vector<Unit> out;
  for (const auto& u : state_->units) {
    Unit info{{}, u.numel, u.shard * state_->ranks, u.full.dtype(), u.persistent};
    for (size_t i : u.members) info.parameters.push_back(state_->params[i].first);
    out.push_back(std::move(info));
  }
  return out;
}

ZeroPartition::Memory ZeroPartition::memory() const {
  Memory m;
  for (const auto& u : state_->units) {
    if (!u.full.storage()->is_released()) m.parameters += bytes_of(u.full);
    m.gradients += bytes_of(u.grads);
    if (state_->options.offload_param) {
      m.offloaded += bytes_of(u.own) + bytes_of(u.shard_grads);
    } else {
      if (!u.persistent) m.parameters += bytes_of(u.own);
      if (state_->options.stage > 1) m.gradients += bytes_of(u.shard_grads);  // at stage 1 a view of grads
    }
    for (const Tensor& g : u.loose) m.gradients += bytes_of(g);
  }
  return m;
}

}  // namespace ember::dist
