// Optimization from Python: ember's optimizers (optim::SGD, Adam, AdamW, LAMB) as one handle class the
// Python classes of ember.optim wrap, the LR schedulers of optim/lr_scheduler.h, gradient clipping,
// autocast regions (tensor/autocast.h) and the GradScaler (optim/amp/grad_scaler.h).
//
// Hyperparameters cross as PyTorch's names with numbers ("lr", "momentum", "beta1", "nesterov" as
// 0/1): the Python side turns betas and booleans into that form, so the step reads exactly what
// the C++ optimizer would have been given.
#include <nanobind/stl/map.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/unique_ptr.h>

#include "python/ember/bind_train.h"

namespace ember::python {

DeviceType device_type_of(const std::string& name) {
  if (name == "cpu") return DeviceType::cpu;
  if (name == "cuda") return DeviceType::cuda;
  throw DeviceError("device_type must be 'cpu' or 'cuda', got '" + name + "'");
}

namespace {

// The kind's defaults with `options` laid over them; ValueError naming an option the kind lacks.
optim::GroupOptions merged(const char* kind, optim::GroupOptions defaults, const optim::GroupOptions& options) {
  for (const auto& [k, v] : options) {
    if (!defaults.count(k)) {
      std::string known;
      for (const auto& kv : defaults) known += (known.empty() ? "" : ", ") + kv.first;
      throw ValueError(std::string(kind) + ": unknown option '" + k + "' (it has " + known + ")");
    }
    defaults[k] = v;
  }
  return defaults;
}

}  // namespace

std::unique_ptr<optim::Optimizer> make_optimizer(const std::string& kind, std::vector<Tensor> params,
                                                 const optim::GroupOptions& options) {
  if (kind == "SGD")
    return std::make_unique<optim::SGD>(std::move(params),
                                        optim::SGDOptions::from(merged("SGD", optim::SGDOptions{}.to_map(), options)));
  if (kind == "Adam")
    return std::make_unique<optim::Adam>(std::move(params),
                                         optim::AdamOptions::from(merged("Adam", optim::AdamOptions{}.to_map(), options)));
  if (kind == "AdamW")
    return std::make_unique<optim::AdamW>(
        std::move(params), optim::AdamWOptions::from(merged("AdamW", optim::AdamWOptions{}.to_map(), options)));
  if (kind == "LAMB")
    return std::make_unique<optim::LAMB>(std::move(params),
                                         optim::LAMBOptions::from(merged("LAMB", optim::LAMBOptions{}.to_map(), options)));
  throw ValueError("optimizer kind must be SGD, Adam, AdamW or LAMB, got '" + kind + "'");
}

namespace {

using optim::LRScheduler;
using optim::Optimizer;

optim::ParamGroup& group_at(Optimizer& o, int64_t g) {
  auto& groups = o.param_groups();
  if (g < 0 || g >= static_cast<int64_t>(groups.size()))
    throw IndexError("param group " + std::to_string(g) + " out of range: the optimizer has " +
                     std::to_string(groups.size()));
  return groups[g];
}

optim::StepInputs step_inputs(const std::optional<Tensor>& found_inf, const std::optional<Tensor>& grad_scale) {
  optim::StepInputs in;
  if (found_inf) in.found_inf = *found_inf;
  if (grad_scale) in.grad_scale = *grad_scale;
  return in;
}

void bind_optimizer(nb::module_& m) {
  nb::class_<Optimizer>(m, "_Optimizer", "One of ember's C++ optimizers; ember.optim's classes wrap it.")
      .def("name", [](const Optimizer& o) { return std::string(o.name()); }, doc::optim_Optimizer_name)
      .def(
          "step",
          [](Optimizer& o, std::optional<Tensor> found_inf, std::optional<Tensor> grad_scale) {
            const optim::StepInputs in = step_inputs(found_inf, grad_scale);
            nb::gil_scoped_release release;
            o.step(in);
          },
          "found_inf"_a.none() = nb::none(), "grad_scale"_a.none() = nb::none(), doc::optim_Optimizer_step)
      .def("zero_grad", &Optimizer::zero_grad, "set_to_none"_a = true, doc::optim_Optimizer_zero_grad)
      .def("add_param_group", &Optimizer::add_param_group, "params"_a, "options"_a,
           doc::optim_Optimizer_add_param_group)
      .def("num_groups", [](const Optimizer& o) { return o.param_groups().size(); }, "The number of param groups.")
      .def("group_params", [](Optimizer& o, int64_t g) { return group_at(o, g).params; }, "group"_a,
           "The parameters of group g.")
      .def("group_options", [](Optimizer& o, int64_t g) { return group_at(o, g).options; }, "group"_a,
           "The hyperparameters of group g, by name.")
      .def(
          "set_group_option",
          [](Optimizer& o, int64_t g, const std::string& key, double value) {
            optim::ParamGroup& group = group_at(o, g);
            if (!group.options.count(key) && key != "initial_lr")
              throw ValueError(std::string(o.name()) + ": param groups have no option '" + key + "'");
            group.options[key] = value;
          },
          "group"_a, "key"_a, "value"_a, "Sets one hyperparameter of group g (what schedulers do to lr).")
      .def("defaults", &Optimizer::defaults, doc::optim_Optimizer_defaults)
      .def("state", [](const Optimizer& o, int64_t i) { return o.state(i); }, "index"_a,
           doc::optim_Optimizer_state)
      .def("num_params", &Optimizer::num_params, doc::optim_Optimizer_num_params)
      .def("steps_taken", &Optimizer::steps_taken, doc::optim_Optimizer_steps_taken)
      .def("is_elementwise", &Optimizer::is_elementwise, doc::optim_Optimizer_is_elementwise)
      .def("state_dict", &Optimizer::state_dict, doc::optim_Optimizer_state_dict)
      .def("load_state_dict", &Optimizer::load_state_dict, "state_dict"_a, doc::optim_Optimizer_load_state_dict);
  m.def("_make_optimizer", &make_optimizer, "kind"_a, "params"_a, "options"_a,
        "A new C++ optimizer of kind over params with options over its defaults.");
}

void bind_schedulers(nb::module_& m) {
  nb::class_<LRScheduler>(m, "_LRScheduler", doc::optim_LRScheduler)
      .def("step", &LRScheduler::step, doc::optim_LRScheduler_step)
      .def("rewind", &LRScheduler::rewind, "steps"_a, doc::optim_LRScheduler_rewind)
      .def("get_last_lr", &LRScheduler::get_last_lr, doc::optim_LRScheduler_get_last_lr)
      .def_prop_ro("last_epoch", &LRScheduler::last_epoch, doc::optim_LRScheduler_last_epoch)
      .def_prop_ro("base_lrs", &LRScheduler::base_lrs, doc::optim_LRScheduler_base_lrs)
      .def("state_dict", &LRScheduler::state_dict, doc::optim_LRScheduler_state_dict)
      .def("load_state_dict", &LRScheduler::load_state_dict, "state_dict"_a, "Restores a state dict.");
  // Each keeps its optimizer alive (keep_alive<1, 2>): it holds a reference to it.
  nb::class_<optim::StepLR, LRScheduler>(m, "_StepLR")
      .def(nb::init<Optimizer&, int64_t, double>(), "optimizer"_a, "step_size"_a, "gamma"_a, nb::keep_alive<1, 2>());
  nb::class_<optim::MultiStepLR, LRScheduler>(m, "_MultiStepLR")
      .def(nb::init<Optimizer&, std::vector<int64_t>, double>(), "optimizer"_a, "milestones"_a, "gamma"_a,
           nb::keep_alive<1, 2>());
  nb::class_<optim::CosineAnnealingLR, LRScheduler>(m, "_CosineAnnealingLR")
      .def(nb::init<Optimizer&, int64_t, double>(), "optimizer"_a, "T_max"_a, "eta_min"_a, nb::keep_alive<1, 2>());
  nb::class_<optim::LinearLR, LRScheduler>(m, "_LinearLR")
      .def(nb::init<Optimizer&, double, double, int64_t>(), "optimizer"_a, "start_factor"_a, "end_factor"_a,
           "total_iters"_a, nb::keep_alive<1, 2>());
  nb::class_<optim::OneCycleLR, LRScheduler>(m, "_OneCycleLR")
      .def(
          "__init__",
          [](optim::OneCycleLR* self, Optimizer& o, double max_lr, int64_t total_steps, double pct_start, bool cos,
             bool cycle_momentum, double base_momentum, double max_momentum, double div_factor, double final_div_factor,
             bool three_phase) {
            optim::OneCycleOptions opts{pct_start, cos, cycle_momentum, base_momentum, max_momentum,
                                        div_factor, final_div_factor, three_phase};
            new (self) optim::OneCycleLR(o, max_lr, total_steps, opts);
          },
          "optimizer"_a, "max_lr"_a, "total_steps"_a, "pct_start"_a, "cos_anneal"_a, "cycle_momentum"_a,
          "base_momentum"_a, "max_momentum"_a, "div_factor"_a, "final_div_factor"_a, "three_phase"_a,
          nb::keep_alive<1, 2>());
  nb::class_<optim::SequentialLR, LRScheduler>(m, "_SequentialLR")
      .def(nb::init<Optimizer&, std::vector<std::shared_ptr<LRScheduler>>, std::vector<int64_t>>(), "optimizer"_a,
           "schedulers"_a, "milestones"_a, nb::keep_alive<1, 2>(), nb::keep_alive<1, 3>());
}

void bind_clip(nb::module_& m) {
  m.def("_clip_grad_norm_",
        [](const std::vector<Tensor>& params, double max_norm, double norm_type, bool error_if_nonfinite) {
          nb::gil_scoped_release release;
          return optim::clip_grad_norm_(params, max_norm, norm_type, error_if_nonfinite);
        },
        "parameters"_a, "max_norm"_a, "norm_type"_a, "error_if_nonfinite"_a, doc::optim_clip_grad_norm_);
  m.def("_clip_grad_value_", &optim::clip_grad_value_, "parameters"_a, "clip_value"_a, doc::optim_clip_grad_value_);
  m.def("_total_grad_norm", &optim::total_grad_norm, "parameters"_a, "norm_type"_a, doc::optim_total_grad_norm);
}

// An autocast region entered and left from Python (a context manager's __enter__ and __exit__).
struct AutocastRegion {
  std::optional<amp::Autocast> region;
};

void bind_amp(nb::module_& m) {
  nb::class_<AutocastRegion>(m, "_AutocastRegion", "An amp::Autocast region; ember.amp.autocast drives it.")
      .def(nb::init<>())
      .def(
          "enter",
          [](AutocastRegion& r, const std::string& device_type, std::optional<DType> dtype, bool enabled, bool cache) {
            if (r.region) throw StateError("autocast: this region was entered already");
            r.region.emplace(device_type_of(device_type), dtype, enabled, cache);
          },
          "device_type"_a, "dtype"_a.none(), "enabled"_a, "cache_enabled"_a, doc::amp_Autocast_Autocast)
      .def("exit", [](AutocastRegion& r) { r.region.reset(); }, "Leaves the region: the previous state returns.");
  m.def("is_autocast_enabled",
        [](const std::string& device_type) { return amp::is_autocast_enabled(device_type_of(device_type)); },
        "device_type"_a = "cuda", doc::amp_is_autocast_enabled);
  m.def("get_autocast_dtype",
        [](const std::string& device_type) { return amp::get_autocast_dtype(device_type_of(device_type)); },
        "device_type"_a, "The dtype autocast lowers to on device_type.");
  m.def("is_autocast_cache_enabled", &amp::is_autocast_cache_enabled, doc::amp_is_autocast_cache_enabled);

  nb::class_<amp::GradScaler>(m, "_GradScaler", doc::amp_GradScaler)
      .def(
          "__init__",
          [](amp::GradScaler* self, double init_scale, double growth_factor, double backoff_factor,
             int64_t growth_interval, bool enabled) {
            new (self) amp::GradScaler({init_scale, growth_factor, backoff_factor, growth_interval, enabled});
          },
          "init_scale"_a, "growth_factor"_a, "backoff_factor"_a, "growth_interval"_a, "enabled"_a)
      .def("scale", &amp::GradScaler::scale, "loss"_a, doc::amp_GradScaler_scale)
      .def("unscale_", &amp::GradScaler::unscale_, "optimizer"_a,
           doc::amp_GradScaler_unscale_)
      .def(
          "step",
          [](amp::GradScaler& s, Optimizer& o) {
            nb::gil_scoped_release release;
            s.step(o);
          },
          "optimizer"_a, doc::amp_GradScaler_step)
      .def("update", &amp::GradScaler::update, "new_scale"_a.none() = nb::none(),
           doc::amp_GradScaler_update)
      .def("found_inf",
           [](const amp::GradScaler& s, const Optimizer& o) { return tensor_or_none(s.found_inf(o)); }, "optimizer"_a,
           doc::amp_GradScaler_found_inf)
      .def("get_scale", &amp::GradScaler::get_scale, doc::amp_GradScaler_get_scale)
      .def("scale_tensor", [](const amp::GradScaler& s) { return tensor_or_none(s.scale_tensor()); },
           doc::amp_GradScaler_scale_tensor)
      .def("is_enabled", &amp::GradScaler::is_enabled, "Whether scaling is on.")
      .def("state_dict", &amp::GradScaler::state_dict, doc::amp_GradScaler_state_dict)
      .def("load_state_dict", &amp::GradScaler::load_state_dict, "state_dict"_a, "Restores a state dict.");
}

}  // namespace

void bind_optim(nb::module_& m) {
  bind_optimizer(m);
  bind_schedulers(m);
  bind_clip(m);
  bind_amp(m);
}

}  // namespace ember::python
