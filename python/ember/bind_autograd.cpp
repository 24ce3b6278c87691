// Autograd from Python: the tensor attributes (requires_grad, grad, grad_fn, backward, hooks), grad mode,
// autograd.grad, gradcheck, graph nodes, and custom functions written in Python.
//
// A Python autograd.Function runs on ember's own mechanism (autograd/function.h): apply() makes a
// FunctionNode whose backward calls the class's Python backward with the GIL held, so the engine treats
// it as any other node (double backward included, as the Python backward's ember ops are recorded
// under create_graph). backward and grad release the GIL while the engine runs; hooks and Python
// backwards take it back.
#include <nanobind/stl/pair.h>
#include <nanobind/stl/shared_ptr.h>

#include <atomic>

#include "python/ember/bind.h"

namespace ember::python {

namespace {

using autograd::FunctionContext;
using autograd::FunctionNode;
using autograd::Node;

// ---- hooks

// What register_hook returns: remove() makes the hook a no-op (ember keeps hooks for the tensor's life).
struct HookHandle {
  std::shared_ptr<std::atomic<bool>> removed = std::make_shared<std::atomic<bool>>(false);
  void remove() { removed->store(true); }
};

GradHook python_grad_hook(nb::handle fn, std::shared_ptr<std::atomic<bool>> removed) {
  PyRef f(fn);
  return [f, removed](const Tensor& grad) -> Tensor {
    if (removed->load()) return Tensor();
    nb::gil_scoped_acquire gil;
    nb::object r = f.handle()(nb::cast(grad));
    if (r.is_none()) return Tensor();  // keep the gradient
    if (!is_tensor(r.ptr()))
      throw nb::type_error(("a gradient hook must return None or a Tensor, got " + std::string(Py_TYPE(r.ptr())->tp_name)).c_str());
    return nb::cast<Tensor>(r);
  };
}

nb::tuple tuple_of(const std::vector<Tensor>& ts) {
  nb::list out;
  for (const Tensor& t : ts) out.append(tensor_or_none(t));
  return nb::tuple(out);
}

// ---- custom functions

// The `ctx` of a Python custom function: what forward leaves for backward. Arbitrary attributes may be
// set on it (dynamic_attr). It reaches the node weakly: the node owns the ctx (through its backward).
struct FunctionCtx {
  std::weak_ptr<FunctionNode> node;
  std::vector<bool> needs_input_grad;
  bool in_forward = true;

  std::shared_ptr<FunctionNode> alive(const char* what) const {
    std::shared_ptr<FunctionNode> n = node.lock();
    if (!n) throw AutogradError(std::string(what) + ": this custom function's graph was freed");
    return n;
  }
};

// The node's backward: calls cls.backward(ctx, *grads) with the GIL and reads one gradient (or None)
// per forward argument.
FunctionNode::Backward python_backward(nb::handle backward, nb::handle ctx, std::string name) {
  PyRef fn(backward), ctx_ref(ctx);
  return [fn, ctx_ref, name](FunctionContext&, std::vector<Tensor> grads) -> std::vector<Tensor> {
    nb::gil_scoped_acquire gil;
    nb::list args;
    args.append(ctx_ref.handle());
    for (const Tensor& g : grads) args.append(tensor_or_none(g));
    nb::object r = fn.handle()(*nb::tuple(args));
    std::vector<Tensor> out;
    const auto take = [&](nb::handle item) {
      if (item.is_none()) out.emplace_back();
      else if (is_tensor(item.ptr())) out.push_back(nb::cast<Tensor>(item));
      else throw nb::type_error((name + ".backward must return Tensors or None (one per forward argument), got " +
                                 Py_TYPE(item.ptr())->tp_name).c_str());
    };
    if (PyTuple_Check(r.ptr()) || PyList_Check(r.ptr())) {
      for (nb::handle item : nb::borrow<nb::sequence>(r)) take(item);
    } else {
      take(r);
    }
    return out;
  };
}

nb::object function_apply(nb::handle cls, nb::args args) {
  const std::string name = nb::cast<std::string>(cls.attr("__name__"));
  std::vector<Tensor> inputs;
  std::vector<size_t> tensor_slot;
  for (size_t i = 0; i < args.size(); ++i)
    if (is_tensor(args[i].ptr())) {
      inputs.push_back(nb::cast<Tensor>(args[i]));
      tensor_slot.push_back(i);
    }
  nb::object ctx = nb::cast(FunctionCtx{});
  FunctionCtx& c = nb::cast<FunctionCtx&>(ctx);
  auto node = std::make_shared<FunctionNode>(name, python_backward(cls.attr("backward"), ctx, name), args.size(),
                                             tensor_slot, inputs);
  c.node = node;
  for (size_t i = 0; i < args.size(); ++i) c.needs_input_grad.push_back(node->context().needs_input_grad(i));

  nb::object result;
  {
    autograd::NoGradGuard no_grad;  // forward's ops record nothing: the node stands for them
    nb::list forward_args;
    forward_args.append(ctx);
    for (nb::handle a : args) forward_args.append(a);
    result = cls.attr("forward")(*nb::tuple(forward_args));
  }
  c.in_forward = false;

  // Outputs: a tensor, or a tuple/list whose tensors get the node (other entries pass through).
  const bool single = is_tensor(result.ptr());
  if (!single && !PyTuple_Check(result.ptr()) && !PyList_Check(result.ptr()))
    throw nb::type_error((name + ".forward must return a Tensor or a tuple of them, got " +
                          Py_TYPE(result.ptr())->tp_name).c_str());
  std::vector<nb::object> items;
  if (single) items.push_back(result);
  else for (nb::handle h : nb::borrow<nb::sequence>(result)) items.push_back(nb::borrow(h));
  std::vector<Tensor> outputs;
  for (const nb::object& o : items) outputs.push_back(is_tensor(o.ptr()) ? nb::cast<Tensor>(o) : Tensor());
  outputs = node->record(inputs, std::move(outputs));
  if (single) return nb::cast(outputs[0]);
  nb::list out;
  for (size_t i = 0; i < items.size(); ++i) out.append(outputs[i].defined() ? nb::cast(outputs[i]) : items[i]);
  return nb::tuple(out);
}

}  // namespace

// ---- tensors from Python: one tensor or a sequence (None entries: undefined), and Python functions
// of tensors (gradcheck's, a checkpointed region)

std::vector<Tensor> tensor_list(nb::handle h, const char* what, bool allow_none) {
  std::vector<Tensor> out;
  if (h.is_none()) return out;
  if (is_tensor(h.ptr())) return {nb::cast<Tensor>(h)};
  if (!PySequence_Check(h.ptr())) throw nb::type_error((std::string(what) + ": expected a Tensor or a sequence of Tensors").c_str());
  for (nb::handle item : nb::borrow<nb::sequence>(h)) {
    if (item.is_none() && allow_none) out.emplace_back();
    else if (is_tensor(item.ptr())) out.push_back(nb::cast<Tensor>(item));
    else throw nb::type_error((std::string(what) + ": expected Tensors" + (allow_none ? " or None" : "") + ", got " +
                               Py_TYPE(item.ptr())->tp_name).c_str());
  }
  return out;
}

std::function<std::vector<Tensor>(const std::vector<Tensor>&)> tensor_function(nb::handle fn, std::string what) {
  PyRef f(fn);
  return [f, what = std::move(what)](const std::vector<Tensor>& xs) -> std::vector<Tensor> {
    nb::gil_scoped_acquire gil;
    nb::list args;
    for (const Tensor& x : xs) args.append(nb::cast(x));
    return tensor_list(f.handle()(*nb::tuple(args)), what.c_str(), false);
  };
}


void bind_autograd(nb::module_& m) {
  nb::class_<Node>(m, "Node", doc::autograd_Node)
      .def("name", &Node::name, doc::autograd_Node_name)
      .def_prop_ro(
          "next_functions",
          [](const Node& n) {
            nb::list out;
            for (const autograd::Edge& e : n.next_edges())
              out.append(nb::make_tuple(e.fn ? nb::cast(e.fn) : nb::none(), e.input_nr));
            return nb::tuple(out);
          },
          "(node, input_nr) for each input of the forward op; None where no gradient flows.")
      .def("__repr__", [](const Node& n) { return std::string("<ember.autograd.Node '") + n.name() + "'>"; });

  nb::class_<HookHandle>(m, "RemovableHandle", "What register_hook returns; remove() turns the hook off.")
      .def("remove", &HookHandle::remove, "Turns the hook off (it then leaves gradients as they are).");

  nb::class_<FunctionCtx>(m, "FunctionCtx", nb::dynamic_attr(),
                          "The ctx of a custom autograd.Function: save tensors for backward and set any attribute.")
      .def("save_for_backward",
           [](FunctionCtx& c, nb::args tensors) {
             if (!c.in_forward) throw AutogradError("save_for_backward: call it in forward");
             c.alive("save_for_backward")->context().save_for_backward(tensor_list(tensors, "save_for_backward", true));
           },
           "tensors"_a, doc::autograd_FunctionContext_save_for_backward)
      .def_prop_ro("saved_tensors",
                   [](const FunctionCtx& c) { return tuple_of(c.alive("saved_tensors")->context().saved_tensors()); },
                   doc::autograd_FunctionContext_saved_tensors)
      .def_prop_ro("needs_input_grad",
                   [](const FunctionCtx& c) {
                     nb::list out;
                     for (bool b : c.needs_input_grad) out.append(nb::bool_(b));
                     return nb::tuple(out);
                   },
                   "For each forward argument, whether its gradient is needed (False for non-tensors).")
      .def("mark_non_differentiable",
           [](FunctionCtx& c, nb::args tensors) {
             c.alive("mark_non_differentiable")->context().mark_non_differentiable(tensor_list(tensors, "mark_non_differentiable", false));
           },
           "tensors"_a, doc::autograd_FunctionContext_mark_non_differentiable)
      .def("set_materialize_grads",
           [](FunctionCtx&, bool value) {
             if (!value) throw NotImplementedError("set_materialize_grads(False): ember always passes zeros for missing gradients");
           },
           "value"_a, "ember always materializes missing gradients as zeros; only True is accepted.");

  m.def("_function_apply", &function_apply, "cls"_a, "args"_a, "Runs a Python autograd.Function (Function.apply).");

  // ---- grad mode
  m.def("is_grad_enabled", &autograd::GradMode::is_enabled, doc::autograd_GradMode_is_enabled);
  m.def("_set_grad_enabled", &autograd::GradMode::set_enabled, "enabled"_a, doc::autograd_GradMode_set_enabled);
  m.def("is_anomaly_enabled", &autograd::AnomalyMode::is_enabled, doc::autograd_AnomalyMode_is_enabled);
  m.def("_set_anomaly_enabled", &autograd::AnomalyMode::set_enabled, "enabled"_a,
        doc::autograd_AnomalyMode_set_enabled);

  // ---- engine entry points
  m.def("_backward",
        [](nb::handle tensors, nb::handle grad_tensors, bool retain_graph, bool create_graph) {
          const std::vector<Tensor> roots = tensor_list(tensors, "backward", false);
          const std::vector<Tensor> grads = tensor_list(grad_tensors, "backward: grad_tensors", true);
          nb::gil_scoped_release release;
          autograd::backward(roots, grads, retain_graph, create_graph);
        },
        "tensors"_a, "grad_tensors"_a.none(), "retain_graph"_a, "create_graph"_a,
        "Accumulates the gradients of tensors into the leaves' .grad.");
  m.def("_grad",
        [](nb::handle outputs, nb::handle inputs, nb::handle grad_outputs, bool retain_graph, bool create_graph,
           bool allow_unused) {
          const std::vector<Tensor> outs = tensor_list(outputs, "grad: outputs", false);
          const std::vector<Tensor> ins = tensor_list(inputs, "grad: inputs", false);
          const std::vector<Tensor> gos = tensor_list(grad_outputs, "grad: grad_outputs", true);
          std::vector<Tensor> result;
          {
            nb::gil_scoped_release release;
            result = autograd::grad(outs, ins, gos, retain_graph, create_graph, allow_unused);
          }
          return tuple_of(result);
        },
        "outputs"_a, "inputs"_a, "grad_outputs"_a.none(), "retain_graph"_a, "create_graph"_a, "allow_unused"_a,
        "The gradients of outputs with respect to inputs (None for unused ones when allowed).");
  m.def("_gradcheck",
        [](nb::handle fn, const std::vector<Tensor>& inputs, double eps, double atol, double rtol, bool second_order) {
          const autograd::MultiFunction f = tensor_function(fn, "gradcheck: the function's result");
          const GradcheckResult r = second_order ? autograd::gradgradcheck(f, inputs, eps, atol, rtol)
                                                 : autograd::gradcheck(f, inputs, eps, atol, rtol);
          return nb::make_tuple(r.entries, r.max_abs_error);
        },
        "fn"_a, "inputs"_a, "eps"_a, "atol"_a, "rtol"_a, "second_order"_a,
        "ember's gradcheck (or gradgradcheck) of fn at inputs: (entries compared, largest error).");

  // ---- tensor attributes
  tensor_class()
      .def_prop_rw("requires_grad", &Tensor::requires_grad,
                   [](Tensor& t, bool v) { t.requires_grad_(v); },
                   "Whether gradients flow to this tensor; settable on leaves (floating dtypes only).")
      .def_prop_rw("grad", [](const Tensor& t) { return tensor_or_none(t.grad()); },
                   [](Tensor& t, std::optional<Tensor> g) {
                     // As PyTorch: an assigned gradient has the tensor's dtype and device (set_grad checks the shape).
                     if (g && g->dtype() != t.dtype())
                       throw DTypeError(std::string("grad: assigned a ") + dtype_name(g->dtype()) + " gradient to a " +
                                        dtype_name(t.dtype()) + " tensor");
                     if (g && g->device() != t.device())
                       throw DeviceError("grad: assigned a gradient on " + g->device().str() + " to a tensor on " +
                                         t.device().str());
                     t.set_grad(g ? *g : Tensor());
                   },
                   nb::arg("grad").none(),
                   "The gradient backward accumulated (None before any); set it to a tensor of this shape, dtype and "
                   "device, or None.")
      .def_prop_ro("grad_fn",
                   [](const Tensor& t) -> nb::object {
                     const std::shared_ptr<Node>& fn = t.grad_fn();
                     return fn ? nb::cast(fn) : nb::none();
                   },
                   doc::Tensor_grad_fn)
      .def_prop_ro("is_leaf", &Tensor::is_leaf, doc::Tensor_is_leaf)
      .def_prop_ro("retains_grad",
                   [](const Tensor& t) { return t.autograd_meta() && t.autograd_meta()->retained_grad != nullptr; },
                   "Whether retain_grad() was called on this non-leaf.")
      .def_prop_rw("data", [](const Tensor& t) { return t.detach(); }, &set_data,
                   "The tensor without history (detach()). Assigning points this tensor at another's elements, "
                   "keeping its identity (what Module.to does to parameters, as torch's p.data = ...).")
      .def("retain_grad", &Tensor::retain_grad, doc::Tensor_retain_grad)
      .def(
          "register_hook",
          [](const Tensor& t, nb::handle fn) {
            HookHandle h;
            t.register_hook(python_grad_hook(fn, h.removed));
            return h;
          },
          "hook"_a,
          "Calls hook(grad) each time backward computes this tensor's gradient; a returned tensor replaces it. "
          "The graph keeps the hook: a hook that refers to this tensor keeps both alive (the reference passes "
          "through C++, which Python's garbage collector does not see).")
      .def(
          "register_post_accumulate_grad_hook",
          [](const Tensor& t, nb::handle fn) {
            HookHandle h;
            PyRef f(fn);
            auto removed = h.removed;
            t.register_post_accumulate_grad_hook([f, removed](const Tensor& leaf) {
              if (removed->load()) return;
              nb::gil_scoped_acquire gil;
              f.handle()(nb::cast(leaf));
            });
            return h;
          },
          "hook"_a, "Calls hook(tensor) after backward added into this leaf's .grad.");
}

}  // namespace ember::python
