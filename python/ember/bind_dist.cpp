// Distributed training from Python: process groups (dist/init.h's init_process_group from torchrun's
// variables, the collectives of dist/process_group.h), DistributedDataParallel, ZeroOptimizer and the
// DataParallel of every strategy (DDP, ZeRO-1/2/3). ember.distributed and ember.nn.parallel wrap
// them. Every collective and wait releases the GIL and is bounded by the group's timeout (or the
// call's), raising DistributedError naming the rank and operation when it passes.
#include <nanobind/stl/chrono.h>
#include <nanobind/stl/map.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/unique_ptr.h>

#include "python/ember/bind_train.h"

namespace ember::python {

namespace {

using dist::ProcessGroup;
using dist::ReduceOp;
using std::chrono::milliseconds;

ReduceOp reduce_op(const std::string& name) {
  if (name == "sum") return ReduceOp::sum;
  if (name == "avg") return ReduceOp::avg;
  if (name == "max") return ReduceOp::max;
  if (name == "min") return ReduceOp::min;
  throw ValueError("reduce op must be 'sum', 'avg', 'max' or 'min', got '" + name + "'");
}

milliseconds millis(double seconds) {
  // Bounded so that the milliseconds fit an int64 (inf or 1e300 would overflow the conversion).
  if (!(seconds > 0 && seconds <= 1e9))
    throw ValueError("timeout must be a positive number of seconds, at most 1e9, got " + decimal_text(seconds));
  return milliseconds(static_cast<int64_t>(seconds * 1000.0 + 0.5));
}

dist::CollectiveOptions collective(std::optional<double> timeout_s) {
  dist::CollectiveOptions o;
  if (timeout_s) o.timeout = millis(*timeout_s);
  return o;
}

// A Work, or its wait, as async_op chooses.
nb::object finish(std::shared_ptr<dist::Work> work, bool async_op) {
  if (async_op) return nb::cast(work);
  {
    nb::gil_scoped_release release;
    work->wait();
  }
  return nb::none();
}

std::shared_ptr<nn::UnaryModule> unary_module(const std::shared_ptr<nn::Module>& m, const char* who) {
  auto u = std::dynamic_pointer_cast<nn::UnaryModule>(m);
  if (!u) throw ValueError(std::string(who) + ": the module must have a forward of one tensor, " + m->name() + " has not");
  return u;
}

dist::DDPOptions ddp_options(double bucket_cap_mb, double first_bucket_mb, bool find_unused, bool broadcast_buffers,
                             std::optional<bool> use_ring) {
  dist::DDPOptions o;
  o.bucket_cap_mb = bucket_cap_mb;
  o.first_bucket_mb = first_bucket_mb;
  o.find_unused_parameters = find_unused;
  o.broadcast_buffers = broadcast_buffers;
  o.use_ring = use_ring;
  return o;
}

// DeepSpeed's zero_optimization keys (dist::ZeroOptions) from a dict; ValueError naming an unknown one.
dist::ZeroOptions zero_options(const nb::dict& d) {
  dist::ZeroOptions o;
  for (auto [key_h, value] : d) {
    const std::string key = nb::cast<std::string>(key_h);
    if (key == "stage") o.stage = nb::cast<int>(value);
    else if (key == "reduce_bucket_size") o.reduce_bucket_size = nb::cast<int64_t>(value);
    else if (key == "allgather_bucket_size") o.allgather_bucket_size = nb::cast<int64_t>(value);
    else if (key == "overlap_comm") o.overlap_comm = nb::cast<bool>(value);
    else if (key == "contiguous_gradients") o.contiguous_gradients = nb::cast<bool>(value);
    else if (key == "reduce_scatter") o.reduce_scatter = nb::cast<bool>(value);
    else if (key == "stage3_prefetch_bucket_size") o.stage3_prefetch_bucket_size = nb::cast<int64_t>(value);
    else if (key == "stage3_param_persistence_threshold") o.stage3_param_persistence_threshold = nb::cast<int64_t>(value);
    else if (key == "min_num_params") o.min_num_params = nb::cast<int64_t>(value);
    else if (key == "wrap_module_types") o.wrap_module_types = nb::cast<std::vector<std::string>>(value);
    else if (key == "offload_optimizer") o.offload_optimizer = nb::cast<bool>(value);
    else if (key == "offload_param") o.offload_param = nb::cast<bool>(value);
    else if (key == "find_unused_parameters") o.find_unused_parameters = nb::cast<bool>(value);
    else if (key == "broadcast_buffers") o.broadcast_buffers = nb::cast<bool>(value);
    else throw ValueError("ZeRO: unknown option '" + key + "'");
  }
  dist::check_zero_options(o);
  return o;
}

// What a ZeRO wrapper builds its optimizer with: the Python optimizer's kind and options.
dist::ZeroOptimizer::InnerFactory optimizer_factory(std::string kind, optim::GroupOptions options) {
  return [kind = std::move(kind), options = std::move(options)](std::vector<Tensor> params) {
    return make_optimizer(kind, std::move(params), options);
  };
}

// A NoSync or Gathered guard held by a Python context manager until __exit__.
struct NoSyncGuard {
  std::optional<dist::NoSync> guard;
};
struct GatheredGuard {
  std::optional<dist::ZeroPartition::Gathered> guard;
};

nb::list units_of(const dist::ZeroPartition& p) {
  nb::list out;
  for (const auto& u : p.units()) {
    nb::dict d;
    d["parameters"] = u.parameters;
    d["numel"] = u.numel;
    d["padded"] = u.padded;
    d["dtype"] = u.dtype;
    d["persistent"] = u.persistent;
    out.append(d);
  }
  return out;
}

nb::dict memory_of(const dist::ZeroPartition& p) {
  const auto mem = p.memory();
  nb::dict d;
  d["parameters"] = mem.parameters;
  d["gradients"] = mem.gradients;
  d["offloaded"] = mem.offloaded;
  return d;
}

void bind_groups(nb::module_& m) {
  nb::class_<dist::Work>(m, "_Work", "The handle of an asynchronous collective (async_op=True).")
      .def(
          "wait",
          [](dist::Work& w, std::optional<double> timeout_s) {
            std::optional<milliseconds> t;
            if (timeout_s) t = millis(*timeout_s);
            nb::gil_scoped_release release;
            w.wait(t);
            return true;
          },
          "timeout"_a.none() = nb::none(), doc::dist_Work_wait)
      .def("is_completed", &dist::Work::is_completed, doc::dist_Work_is_completed);

  nb::class_<ProcessGroup>(m, "_ProcessGroup", "A process group; ember.distributed holds the default one.")
      .def("rank", &ProcessGroup::rank, doc::dist_ProcessGroup_rank)
      .def("size", &ProcessGroup::size, doc::dist_ProcessGroup_size)
      .def("backend", &ProcessGroup::backend_name, doc::dist_ProcessGroup_backend_name)
      .def("device", &ProcessGroup::device, doc::dist_ProcessGroup_device)
      .def("timeout_s", [](const ProcessGroup& g) { return g.timeout().count() / 1000.0; },
           "The bound of each collective, in seconds.")
      .def("set_timeout_s", [](ProcessGroup& g, double s) { g.set_timeout(millis(s)); }, "seconds"_a,
           "Sets the bound of each collective.")
      .def(
          "all_reduce",
          [](ProcessGroup& g, const Tensor& t, const std::string& op, bool async_op, std::optional<double> timeout) {
            return finish(g.all_reduce_async(t, reduce_op(op), collective(timeout)), async_op);
          },
          "tensor"_a, "op"_a, "async_op"_a, "timeout"_a.none(), doc::dist_ProcessGroup_all_reduce_async)
      .def(
          "broadcast",
          [](ProcessGroup& g, const Tensor& t, int src, bool async_op, std::optional<double> timeout) {
            return finish(g.broadcast_async(t, src, collective(timeout)), async_op);
          },
          "tensor"_a, "src"_a, "async_op"_a, "timeout"_a.none(), doc::dist_ProcessGroup_broadcast_async)
      .def(
          "all_gather",
          [](ProcessGroup& g, const std::vector<Tensor>& outputs, const Tensor& input, bool async_op,
             std::optional<double> timeout) {
            return finish(g.all_gather_async(outputs, input, collective(timeout)), async_op);
          },
          "tensor_list"_a, "tensor"_a, "async_op"_a, "timeout"_a.none(), "Gathers rank r's tensor into tensor_list[r].")
      .def(
          "all_gather_into_tensor",
          [](ProcessGroup& g, const Tensor& output, const Tensor& input, bool async_op, std::optional<double> timeout) {
            return finish(g.all_gather_async(output, input, collective(timeout)), async_op);
          },
          "output"_a, "input"_a, "async_op"_a, "timeout"_a.none(), "Gathers every rank's input into output, in rank order.")
      .def(
          "reduce_scatter_tensor",
          [](ProcessGroup& g, const Tensor& output, const Tensor& input, const std::string& op, bool async_op,
             std::optional<double> timeout) {
            return finish(g.reduce_scatter_async(output, input, reduce_op(op), collective(timeout)), async_op);
          },
          "output"_a, "input"_a, "op"_a, "async_op"_a, "timeout"_a.none(), doc::dist_ProcessGroup_reduce_scatter_async)
      .def(
          "send",
          [](ProcessGroup& g, const Tensor& t, int dst, int tag, bool async_op, std::optional<double> timeout) {
            return finish(g.send_async(t, dst, tag, collective(timeout)), async_op);
          },
          "tensor"_a, "dst"_a, "tag"_a, "async_op"_a, "timeout"_a.none(), doc::dist_ProcessGroup_send_async)
      .def(
          "recv",
          [](ProcessGroup& g, const Tensor& t, int src, int tag, bool async_op, std::optional<double> timeout) {
            return finish(g.recv_async(t, src, tag, collective(timeout)), async_op);
          },
          "tensor"_a, "src"_a, "tag"_a, "async_op"_a, "timeout"_a.none(), doc::dist_ProcessGroup_recv_async)
      .def(
          "barrier",
          [](ProcessGroup& g, bool async_op, std::optional<double> timeout) {
            return finish(g.barrier_async(collective(timeout)), async_op);
          },
          "async_op"_a, "timeout"_a.none(), doc::dist_ProcessGroup_barrier_async);

  m.def(
      "_init_process_group",
      [](const std::string& backend, const std::string& init_method, std::optional<int> rank,
         std::optional<int> world_size, double timeout_s, const std::string& master_addr, std::optional<int> store_port,
         std::optional<bool> debug) {
        dist::InitOptions o;
        o.backend = backend;
        o.init_method = init_method;
        o.rank = rank;
        o.world_size = world_size;
        o.timeout = millis(timeout_s);
        o.master_addr = master_addr;
        o.store_port = store_port;
        o.debug = debug;
        nb::gil_scoped_release release;  // the rendezvous waits for the other ranks
        return dist::init_process_group(o);
      },
      "backend"_a, "init_method"_a, "rank"_a.none(), "world_size"_a.none(), "timeout"_a, "master_addr"_a,
      "store_port"_a.none(), "debug"_a.none(),
      "dist::init_process_group: the options given, the rest from torchrun's (or Open MPI's, Slurm's) variables.");
}

void bind_wrappers(nb::module_& m) {
  nb::class_<NoSyncGuard>(m, "_NoSyncGuard", "Holds a no_sync() guard until exit().")
      .def("exit", [](NoSyncGuard& g) { g.guard.reset(); }, "Restores gradient averaging.");
  nb::class_<GatheredGuard>(m, "_GatheredGuard", "Holds a gathered() guard until exit().")
      .def("exit", [](GatheredGuard& g) { g.guard.reset(); }, "Lets ZeRO-3 shard the parameters again.");

  m.def(
      "_distributed_data_parallel",
      [](std::shared_ptr<nn::Module> module, std::shared_ptr<ProcessGroup> group, double bucket_cap_mb,
         double first_bucket_mb, bool find_unused, bool broadcast_buffers,
         std::optional<bool> use_ring) -> std::shared_ptr<nn::Module> {
        auto u = unary_module(module, "DistributedDataParallel");
        const dist::DDPOptions o = ddp_options(bucket_cap_mb, first_bucket_mb, find_unused, broadcast_buffers, use_ring);
        nb::gil_scoped_release release;  // the construction broadcasts rank 0's state
        return std::make_shared<dist::DistributedDataParallel>(u, group, o);
      },
      "module"_a, "process_group"_a, "bucket_cap_mb"_a, "first_bucket_mb"_a, "find_unused_parameters"_a,
      "broadcast_buffers"_a, "use_ring"_a.none(), doc::dist_DistributedDataParallel_DistributedDataParallel);
  m.def(
      "_ddp_no_sync",
      [](nn::Module& ddp) {
        auto* d = dynamic_cast<dist::DistributedDataParallel*>(&ddp);
        if (!d) throw ValueError("no_sync: not a DistributedDataParallel");
        auto g = std::make_unique<NoSyncGuard>();
        g->guard.emplace(d->no_sync());
        return g;
      },
      "ddp"_a, "Turns gradient averaging off until the guard's exit().");
  m.def(
      "_ddp_buckets",
      [](nn::Module& ddp) {
        auto* d = dynamic_cast<dist::DistributedDataParallel*>(&ddp);
        if (!d) throw ValueError("buckets: not a DistributedDataParallel");
        nb::list out;
        for (const auto& b : d->buckets()) out.append(nb::make_tuple(b.parameters, b.numel, b.dtype));
        return out;
      },
      "ddp"_a, "(parameter names, elements, dtype) of each bucket, in launch order.");

  nb::class_<dist::ZeroOptimizer>(m, "_ZeroOptimizer", "dist::ZeroOptimizer; ember.distributed.ZeroOptimizer wraps it.")
      .def(
          "__init__",
          [](dist::ZeroOptimizer* self, nn::Module& module, std::shared_ptr<ProcessGroup> group, const std::string& kind,
             const optim::GroupOptions& options, const nb::dict& zero) {
            const dist::ZeroOptions z = zero_options(zero);
            auto factory = optimizer_factory(kind, options);
            nb::gil_scoped_release release;
            new (self) dist::ZeroOptimizer(module, std::move(group), factory, z);
          },
          "module"_a, "process_group"_a, "kind"_a, "options"_a, "zero"_a, nb::keep_alive<1, 2>())
      .def(
          "step",
          [](dist::ZeroOptimizer& z) {
            nb::gil_scoped_release release;
            z.step();
          },
          doc::dist_ZeroOptimizer_step)
      .def("zero_grad", &dist::ZeroOptimizer::zero_grad, doc::dist_ZeroOptimizer_zero_grad)
      .def(
          "clip_grad_norm_",
          [](dist::ZeroOptimizer& z, double max_norm) {
            nb::gil_scoped_release release;
            return z.clip_grad_norm_(max_norm);
          },
          "max_norm"_a, doc::dist_ZeroOptimizer_clip_grad_norm_)
      .def("inner", &dist::ZeroOptimizer::inner, nb::rv_policy::reference_internal, doc::dist_ZeroOptimizer_inner)
      .def("pieces", [](dist::ZeroOptimizer& z) { return z.partition().pieces(); }, doc::dist_ZeroPartition_pieces)
      .def("units", [](dist::ZeroOptimizer& z) { return units_of(z.partition()); }, "The partition's units.")
      .def("memory", [](dist::ZeroOptimizer& z) { return memory_of(z.partition()); }, "Bytes this rank holds.")
      .def("stage", [](dist::ZeroOptimizer& z) { return z.partition().stage(); }, doc::dist_ZeroPartition_stage)
      .def(
          "no_sync",
          [](dist::ZeroOptimizer& z) {
            auto g = std::make_unique<NoSyncGuard>();
            g->guard.emplace(z.partition().no_sync());
            return g;
          },
          "Gradient accumulation until the guard's exit().")
      .def(
          "gathered",
          [](dist::ZeroOptimizer& z) {
            auto g = std::make_unique<GatheredGuard>();
            g->guard.emplace(z.partition().gathered());
            return g;
          },
          "Every parameter whole until the guard's exit().");

  nb::class_<dist::DataParallel, nn::Module>(m, "_DataParallel", "dist::DataParallel of one strategy.")
      .def(
          "__init__",
          [](dist::DataParallel* self, std::shared_ptr<nn::Module> model, std::shared_ptr<ProcessGroup> group,
             const std::string& kind, const optim::GroupOptions& options, const std::string& strategy,
             double bucket_cap_mb, double first_bucket_mb, bool find_unused, bool broadcast_buffers, const nb::dict& zero) {
            dist::DataParallelOptions o;
            o.strategy = dist::parse_strategy(strategy);
            o.ddp = ddp_options(bucket_cap_mb, first_bucket_mb, find_unused, broadcast_buffers, std::nullopt);
            o.zero = zero_options(zero);
            auto u = unary_module(model, "DataParallel");
            auto factory = optimizer_factory(kind, options);
            nb::gil_scoped_release release;
            new (self) dist::DataParallel(u, std::move(group), factory, o);
          },
          "model"_a, "process_group"_a, "kind"_a, "options"_a, "strategy"_a, "bucket_cap_mb"_a, "first_bucket_mb"_a,
          "find_unused_parameters"_a, "broadcast_buffers"_a, "zero"_a)
      .def(
          "step",
          [](dist::DataParallel& d) {
            nb::gil_scoped_release release;
            d.step();
          },
          doc::dist_DataParallel_step)
      .def("zero_grad", &dist::DataParallel::zero_grad, doc::dist_DataParallel_zero_grad)
      .def(
          "clip_grad_norm_",
          [](dist::DataParallel& d, double max_norm) {
            nb::gil_scoped_release release;
            return d.clip_grad_norm_(max_norm);
          },
          "max_norm"_a, doc::dist_DataParallel_clip_grad_norm_)
      .def("optimizer", &dist::DataParallel::optimizer, nb::rv_policy::reference_internal,
           doc::dist_DataParallel_optimizer)
      .def("strategy", [](const dist::DataParallel& d) { return std::string(dist::strategy_name(d.strategy())); },
           "'ddp', 'zero1', 'zero2' or 'zero3'.")
      .def(
          "no_sync",
          [](dist::DataParallel& d) {
            auto g = std::make_unique<NoSyncGuard>();
            g->guard.emplace(d.no_sync());
            return g;
          },
          "Gradient accumulation until the guard's exit().")
      .def(
          "gathered",
          [](dist::DataParallel& d) {
            auto g = std::make_unique<GatheredGuard>();
            auto held = d.gathered();
            if (held) g->guard.emplace(std::move(*held));
            return g;
          },
          "Every parameter whole until the guard's exit() (ZeRO-3; nothing to do otherwise).")
      .def("units",
           [](dist::DataParallel& d) -> nb::object {
             if (auto* p = d.zero_partition()) return units_of(*p);
             return nb::none();
           },
           "The ZeRO partition's units, or None under DDP.")
      .def("memory",
           [](dist::DataParallel& d) -> nb::object {
             if (auto* p = d.zero_partition()) return memory_of(*p);
             return nb::none();
           },
           "Bytes this rank holds under ZeRO, or None under DDP.");
}

}  // namespace

void bind_dist(nb::module_& m) {
  bind_groups(m);
  bind_wrappers(m);
}

}  // namespace ember::python
