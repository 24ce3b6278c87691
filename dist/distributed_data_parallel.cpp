#include "dist/distributed_data_parallel.h"

#include "autograd/engine.h"
#include "autograd/grad_mode.h"
#include <optional>

#include "dist/data_parallel_common.h"
#include "dist/reducer.h"
#include "dist/ring_all_reduce.h"

namespace ember::dist {

namespace {

int64_t bytes_of_mb(double mb) { return static_cast<int64_t>(mb * 1024 * 1024); }

}  // namespace

struct DistributedDataParallel::State : std::enable_shared_from_this<State> {
  struct Bucket {
    Tensor flat;                  // its parameters' gradients back to back
    std::vector<size_t> members;  // indices into params
  };

  std::shared_ptr<ProcessGroup> group;
  DDPOptions options;
  std::vector<std::pair<std::string, Tensor>> params;  // those requiring grad, in registration order
  std::vector<Tensor> views;                           // params[i]'s .grad: a view into its bucket
  std::vector<size_t> bucket_of;
  std::vector<Bucket> buckets;  // in launch order: the last registered parameters first

  bool prepared = false;  // a forward of the DDP module has set up the buckets' views
  // Launches the buckets in order as their gradients come, and averages them on its communication
  // thread while backward goes on (last: its thread ends before the rest goes).
  std::optional<Reducer> reducer;

  void build_buckets() {
    const int64_t first_cap = bytes_of_mb(options.first_bucket_mb), cap = bytes_of_mb(options.bucket_cap_mb);
    struct Pending {
      std::vector<size_t> members;
      int64_t numel = 0;
    } current;
    const auto close = [&] {
      if (current.members.empty()) return;
      const Tensor& p = params[current.members.front()].second;
      Bucket b;
      b.flat = zeros({current.numel}, TensorOptions(p.dtype()).with_device(p.device()));
      b.members = current.members;
      int64_t at = 0;
      for (size_t i : b.members) {
        const Tensor& q = params[i].second;
        views[i] = b.flat.narrow(0, at, q.numel()).view(q.shape());
        bucket_of[i] = buckets.size();
        at += q.numel();
      }
      buckets.push_back(std::move(b));
      current = {};
    };
    for (size_t k = params.size(); k-- > 0;) {
      const Tensor& p = params[k].second;
      if (!current.members.empty()) {
        const Tensor& head = params[current.members.front()].second;
        const int64_t limit = buckets.empty() ? first_cap : cap;
        const bool other_kind = head.dtype() != p.dtype() || !(head.device() == p.device());
        if (other_kind || (current.numel + p.numel()) * dtype_size(p.dtype()) > limit) close();
      }
      current.members.push_back(k);
      current.numel += p.numel();
    }
    close();
  }

  // Before a forward that will be differentiated: every .grad is its bucket view (zero_grad may
  // have set it to none; a gradient held elsewhere is copied in), and the per-backward state is fresh.
  void prepare() {
    prepared = true;
    reducer->prepare();
    for (size_t i = 0; i < params.size(); ++i) {
      const Tensor& p = params[i].second;
      const Tensor g = p.grad();
      if (g.defined() && g.raw_data() == views[i].raw_data()) continue;
      if (g.defined()) copy_(views[i], g);
      else zero_(views[i]);
      p.set_grad(views[i]);
    }
  }

  // The hook of parameter i: its gradient is complete in this backward.
  // Before any forward of the DDP module (a backward through the wrapped module called directly),
  // the gradients stay local, as PyTorch's reducer ignores hooks it does not expect.
  void on_gradient(size_t i) {
    if (!reducer->sync() || !prepared) return;
    reducer->begin([weak = weak_from_this()] {
      if (auto self = weak.lock()) self->end_of_backward();
    });
    // AccumulateGrad writes into the view; a .grad replaced meanwhile is copied back into it.
    const Tensor& p = params[i].second;
    if (p.grad().raw_data() != views[i].raw_data()) {
      copy_(views[i], p.grad());
      p.set_grad(views[i]);
    }
    reducer->mark_ready(i);
  }

  void launch(size_t b) {
    const Tensor flat = buckets[b].flat;
    reducer->comm().post([this, flat] {
      if (*options.use_ring) ring_all_reduce(*group, flat, ReduceOp::avg);
      else group->all_reduce(flat, ReduceOp::avg);
    }, flat.device());
  }

  // The autograd callback: waits for every bucket; raises what the reductions raised, or names the
  // parameters that got no gradient.
  void end_of_backward() {
    reducer->finish().raise("DistributedDataParallel: rank " + std::to_string(group->rank()), "buckets");
  }
};

DistributedDataParallel::DistributedDataParallel(std::shared_ptr<nn::UnaryModule> module, std::shared_ptr<ProcessGroup> group,
                                                 DDPOptions options)
    : module_(std::move(module)), state_(std::make_shared<State>()) {
  if (!module_) throw ValueError("DistributedDataParallel: the module is null");
  if (!group) throw ValueError("DistributedDataParallel: the process group is null");
  if (!(options.bucket_cap_mb > 0) || !(options.first_bucket_mb > 0))
    throw ValueError("DistributedDataParallel: bucket_cap_mb (" + std::to_string(options.bucket_cap_mb) +
                     ") and first_bucket_mb (" + std::to_string(options.first_bucket_mb) + ") must be positive");
  register_module("module", module_);
  State& s = *state_;
  s.group = std::move(group);
  s.options = options;
  if (!s.options.use_ring) s.options.use_ring = s.group->backend_name() != "nccl";
  for (auto& [name, p] : module_->named_parameters())
    if (p.requires_grad()) s.params.emplace_back(name, p);
  if (s.params.empty()) throw ValueError("DistributedDataParallel: the module has no parameter that requires grad");
  for (const auto& [name, p] : s.params)
    if (!(p.device() == s.group->device()))
      throw DeviceError("DistributedDataParallel: parameter " + name + " is on " + p.device().str() + " but the " +
                        s.group->backend_name() + " group serves " + s.group->device().str() +
                        " tensors: move the module first");
  s.views.resize(s.params.size());
  s.bucket_of.resize(s.params.size());
  s.build_buckets();
  s.reducer.emplace(s.params, s.bucket_of, [&s](size_t b) { s.launch(b); });

  // Every rank starts from rank 0's parameters and buffers.
  if (s.group->size() > 1) {
    autograd::NoGradGuard no_grad;
    std::vector<Tensor> state = module_->parameters();
    for (const Tensor& b : module_->buffers()) state.push_back(b);
    broadcast_coalesced(*s.group, state);
  }
  std::weak_ptr<State> weak = state_;
  for (size_t i = 0; i < s.params.size(); ++i)
    s.params[i].second.register_post_accumulate_grad_hook([weak, i](const Tensor&) {
      if (auto self = weak.lock()) self->on_gradient(i);
    });
}

DistributedDataParallel::~DistributedDataParallel() = default;

ProcessGroup& DistributedDataParallel::process_group() const { return *state_->group; }

std::string DistributedDataParallel::extra_repr() const {
  return "world_size=" + std::to_string(state_->group->size()) + ", buckets=" + std::to_string(state_->buckets.size()) +
         ", " + (*state_->options.use_ring ? "ring_all_reduce" : state_->group->backend_name() + " all_reduce");
}

Tensor DistributedDataParallel::forward(const Tensor& x) {
  State& s = *state_;
  if (s.options.broadcast_buffers && s.group->size() > 1) {
    const std::vector<Tensor> buffers = module_->buffers();
    if (!buffers.empty()) {
      autograd::NoGradGuard no_grad;
      broadcast_coalesced(*s.group, buffers);
    }
  }
  const bool differentiated = autograd::GradMode::is_enabled();
  if (differentiated) s.prepare();
  Tensor y = (*module_)(x);
  if (differentiated && s.reducer->sync() && s.options.find_unused_parameters) s.reducer->mark_unused(y);
  return y;
}

NoSync DistributedDataParallel::no_sync() { return NoSync(state_, &state_->reducer->sync()); }

std::vector<DistributedDataParallel::Bucket> DistributedDataParallel::buckets() const {
  std::vector<Bucket> out;
  for (const auto& b : state_->buckets) {
    Bucket info{{}, b.flat.numel(), b.flat.dtype()};
    for (size_t i : b.members) info.parameters.push_back(state_->params[i].first);
    out.push_back(std::move(info));
  }
  return out;
}

}  // namespace ember::dist
