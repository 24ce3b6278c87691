// The training precision modes (train/precision.h) for Python: ember.amp.TrainingPrecision drives a
// train::TrainingPrecision built over a module (a built-in one, or a Python module's bridge), with the
// optimizer it steps made from an ember.optim kind and options, as the ZeRO wrappers make theirs.
#include <nanobind/stl/map.h>
#include <nanobind/stl/tuple.h>

#include <type_traits>

#include "python/ember/bind_train.h"

namespace ember::python {

namespace {

// One option's value as T; TypeError naming the option and what came.
template <class T>
T option_value(const char* scaler, const std::string& key, nb::handle value) {
  try {
    return nb::cast<T>(value);
  } catch (const nb::cast_error&) {
    throw nb::type_error((std::string(scaler) + ": option '" + key + "' must be a " +
                          (std::is_same_v<T, bool> ? "bool" : std::is_integral_v<T> ? "whole number" : "number") +
                          ", got " +
                          Py_TYPE(value.ptr())->tp_name).c_str());
  }
}

// The scaler settings of ember.amp.TrainingPrecision(grad_scaler={...}, loss_scaler={...}), by
// the C++ options' names; ValueError for a name the options do not have.
void set_scaler_options(train::PrecisionOptions& o, const nb::dict& grad_scaler, const nb::dict& loss_scaler) {
  for (auto [key, value] : grad_scaler) {
    const std::string k = nb::cast<std::string>(nb::str(key));
    amp::GradScalerOptions& g = o.grad_scaler;
    if (k == "init_scale") g.init_scale = option_value<double>("grad_scaler", k, value);
    else if (k == "growth_factor") g.growth_factor = option_value<double>("grad_scaler", k, value);
    else if (k == "backoff_factor") g.backoff_factor = option_value<double>("grad_scaler", k, value);
    else if (k == "growth_interval") g.growth_interval = option_value<int64_t>("grad_scaler", k, value);
    else if (k == "enabled") g.enabled = option_value<bool>("grad_scaler", k, value);
    else throw ValueError("grad_scaler: unknown option '" + k + "' (it has init_scale, growth_factor, "
                          "backoff_factor, growth_interval, enabled)");
  }
  for (auto [key, value] : loss_scaler) {
    const std::string k = nb::cast<std::string>(nb::str(key));
    amp::DynamicLossScalerOptions& l = o.loss_scaler;
    if (k == "loss_scale") l.loss_scale = option_value<double>("loss_scaler", k, value);
    else if (k == "initial_scale_power") l.initial_scale_power = option_value<int>("loss_scaler", k, value);
    else if (k == "loss_scale_window") l.loss_scale_window = option_value<int64_t>("loss_scaler", k, value);
    else if (k == "hysteresis") l.hysteresis = option_value<int64_t>("loss_scaler", k, value);
    else if (k == "consecutive_hysteresis") l.consecutive_hysteresis = option_value<bool>("loss_scaler", k, value);
    else if (k == "min_loss_scale") l.min_loss_scale = option_value<double>("loss_scaler", k, value);
    else if (k == "max_loss_scale") l.max_loss_scale = option_value<double>("loss_scaler", k, value);
    else if (k == "raise_error_at_min_scale") l.raise_error_at_min_scale = option_value<bool>("loss_scaler", k, value);
    else throw ValueError("loss_scaler: unknown option '" + k + "' (it has loss_scale, initial_scale_power, "
                          "loss_scale_window, hysteresis, consecutive_hysteresis, min_loss_scale, max_loss_scale, "
                          "raise_error_at_min_scale)");
  }
}

nb::tuple outcome(const train::StepOutcome& o) { return nb::make_tuple(o.grad_norm, o.skipped); }

// The mode's autocast region, entered from Python and left at exit() (null in the modes without one).
struct PrecisionAutocast {
  std::unique_ptr<amp::Autocast> region;
};

}  // namespace

void bind_precision(nb::module_& m) {
  using train::TrainingPrecision;
  m.def("_precision_names", &train::precision_names, doc::train_precision_names);
  nb::class_<PrecisionAutocast>(m, "_PrecisionAutocast", "A precision mode's autocast region, until exit().")
      .def("exit", [](PrecisionAutocast& a) { a.region.reset(); }, "Leaves the region.");
  nb::class_<TrainingPrecision>(m, "_TrainingPrecision", doc::train_TrainingPrecision)
      .def(
          "__init__",
          [](TrainingPrecision* self, nn::Module& model, const std::string& mode, const std::string& kind,
             const optim::GroupOptions& options, const nb::dict& grad_scaler, const nb::dict& loss_scaler) {
            train::PrecisionOptions o;
            o.precision = train::parse_precision(mode);
            set_scaler_options(o, grad_scaler, loss_scaler);
            auto factory = [kind, options](std::vector<Tensor> params) {
              return make_optimizer(kind, std::move(params), options);
            };
            nb::gil_scoped_release release;
            new (self) TrainingPrecision(std::move(o), model, factory);
          },
          "model"_a, "mode"_a, "kind"_a, "options"_a, "grad_scaler"_a, "loss_scaler"_a, nb::keep_alive<1, 2>(),
          doc::train_TrainingPrecision_TrainingPrecision)
      .def("mode", [](const TrainingPrecision& p) { return std::string(train::precision_name(p.precision())); },
           doc::train_TrainingPrecision_precision)
      .def("optimizer", nb::overload_cast<>(&TrainingPrecision::optimizer), nb::rv_policy::reference_internal,
           doc::train_TrainingPrecision_optimizer)
      .def("input_dtype", &TrainingPrecision::input_dtype, doc::train_TrainingPrecision_input_dtype)
      .def("autocast", [](const TrainingPrecision& p, Device d) { return PrecisionAutocast{p.autocast(d)}; },
           "device"_a, doc::train_TrainingPrecision_autocast)
      .def("zero_grad", &TrainingPrecision::zero_grad, doc::train_TrainingPrecision_zero_grad)
      .def(
          "backward_and_step",
          [](TrainingPrecision& p, const Tensor& loss, double clip) {
            train::StepOutcome o;
            {
              nb::gil_scoped_release release;
              o = p.backward_and_step(loss, clip);
            }
            return outcome(o);
          },
          "loss"_a, "clip_grad_norm"_a, doc::train_TrainingPrecision_backward_and_step)
      .def("backward", &TrainingPrecision::backward, "loss"_a, nb::call_guard<nb::gil_scoped_release>(),
           doc::train_TrainingPrecision_backward)
      .def(
          "step",
          [](TrainingPrecision& p, double clip) {
            train::StepOutcome o;
            {
              nb::gil_scoped_release release;
              o = p.step(clip);
            }
            return outcome(o);
          },
          "clip_grad_norm"_a, doc::train_TrainingPrecision_step)
      .def("scales_loss", &TrainingPrecision::scales_loss, doc::train_TrainingPrecision_scales_loss)
      .def("loss_scale", &TrainingPrecision::loss_scale, doc::train_TrainingPrecision_loss_scale)
      .def("state_dict", &TrainingPrecision::state_dict, doc::train_TrainingPrecision_state_dict)
      .def("load_state_dict", &TrainingPrecision::load_state_dict, "state_dict"_a,
           doc::train_TrainingPrecision_load_state_dict);
}

}  // namespace ember::python
