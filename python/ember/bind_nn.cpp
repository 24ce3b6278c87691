// nn from Python: ember's C++ modules (layers and models) as handles that ember.nn's Python classes
// wrap, the bridge that puts a Python module into a C++ module tree (what DDP and ZeRO take),
// parameter initialisation (nn.init) and activation checkpointing.
//
// A C++ module is bound once, as the opaque class _Module: the Python wrapper (ember.nn's _CppModule)
// asks it for its own parameters, buffers and children and mirrors them, so the Python tree has the
// C++ tree's dotted names and the very same tensors. Its forward runs in C++ with the GIL released;
// hooks registered through it run in C++ too, wherever the module is called from.
#include <nanobind/stl/array.h>
#include <nanobind/stl/function.h>
#include <nanobind/stl/map.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/tuple.h>

#include <mutex>
#include <shared_mutex>

#include "python/ember/bind.h"
#include "python/ember/ember_headers_train.h"

namespace ember::python {

namespace {

using nn::Module;
using nn::UnaryModule;

// ---- forwards against child replacement. Forwards run with the GIL released, so one Python thread
// could replace a child (resnet.fc = ...) while another's forward walks the tree, and free the old
// child under it. A thread's outermost forward holds this lock shared (a Python child's forward
// calls C++ modules again, nested); a replacement holds it alone.
std::shared_mutex& tree_mutex() {
  static std::shared_mutex m;
  return m;
}
thread_local int t_forwards_running = 0;

// f(), a forward, run while the tree lock is held shared by this thread.
template <class F>
auto run_forward(F&& f) {
  std::shared_lock<std::shared_mutex> lock;
  if (t_forwards_running == 0) lock = std::shared_lock<std::shared_mutex>(tree_mutex());
  ++t_forwards_running;
  struct Leave {
    ~Leave() { --t_forwards_running; }
  } leave;
  return f();
}

// Module::replace_module once no forward runs. From inside a forward of this thread (a Python
// child's forward) it would wait for itself: refused.
void replace_child(Module& parent, const std::string& name, std::shared_ptr<Module> child) {
  if (t_forwards_running > 0)
    throw StateError(parent.name() + "." + name + ": a child of a C++ module cannot be replaced while a forward " +
                     "runs in this thread (from a module's forward or hook); replace it between forwards");
  nb::gil_scoped_release release;  // a forward in another thread may need the GIL (a Python child) to finish
  std::unique_lock<std::shared_mutex> lock(tree_mutex());
  parent.replace_module(name, std::move(child));
}

UnaryModule& unary(Module& m, const char* what) {
  auto* u = dynamic_cast<UnaryModule*>(&m);
  if (!u) throw NotImplementedError(std::string(what) + ": " + m.name() + " has no forward of one tensor");
  return *u;
}

// The hyperparameters of a built-in layer, by PyTorch's attribute names (model.fc.in_features); empty
// for a module that has none.
nb::dict config(Module& m) {
  nb::dict d;
  const auto pair = [](int64_t v) { return nb::make_tuple(v, v); };
  if (auto* l = dynamic_cast<nn::Linear*>(&m)) {
    d["in_features"] = l->in_features;
    d["out_features"] = l->out_features;
  } else if (auto* c = dynamic_cast<nn::Conv2d*>(&m)) {
    d["in_channels"] = c->in_channels;
    d["out_channels"] = c->out_channels;
    d["kernel_size"] = pair(c->kernel_size);
    d["stride"] = pair(c->stride);
    d["padding"] = pair(c->padding);
    d["dilation"] = pair(c->dilation);
    d["groups"] = c->groups;
  } else if (auto* t = dynamic_cast<nn::ConvTranspose2d*>(&m)) {
    d["in_channels"] = t->in_channels;
    d["out_channels"] = t->out_channels;
    d["kernel_size"] = pair(t->kernel_size);
    d["stride"] = pair(t->stride);
    d["padding"] = pair(t->padding);
    d["output_padding"] = pair(t->output_padding);
    d["dilation"] = pair(t->dilation);
    d["groups"] = t->groups;
  } else if (auto* b = dynamic_cast<nn::BatchNorm2d*>(&m)) {
    d["num_features"] = b->num_features;
    d["eps"] = b->eps;
    d["momentum"] = b->momentum;
    d["affine"] = b->weight.defined();
    d["track_running_stats"] = b->running_mean.defined();
  } else if (auto* n = dynamic_cast<nn::LayerNorm*>(&m)) {
    d["normalized_shape"] = nb::tuple(make_size(n->normalized_shape));
    d["eps"] = n->eps;
    d["elementwise_affine"] = n->weight.defined();
  } else if (auto* p = dynamic_cast<nn::Dropout*>(&m)) {
    d["p"] = p->p;
  } else if (auto* e = dynamic_cast<nn::Embedding*>(&m)) {
    d["num_embeddings"] = e->num_embeddings;
    d["embedding_dim"] = e->embedding_dim;
  } else if (auto* mp = dynamic_cast<nn::MaxPool2d*>(&m)) {
    d["kernel_size"] = mp->kernel_size;
    d["stride"] = mp->stride;
    d["padding"] = mp->padding;
  } else if (auto* ap = dynamic_cast<nn::AvgPool2d*>(&m)) {
    d["kernel_size"] = ap->kernel_size;
    d["stride"] = ap->stride;
    d["padding"] = ap->padding;
  } else if (auto* aa = dynamic_cast<nn::AdaptiveAvgPool2d*>(&m)) {
    d["output_size"] = nb::make_tuple(aa->output_size[0], aa->output_size[1]);
  } else if (auto* f = dynamic_cast<nn::Flatten*>(&m)) {
    d["start_dim"] = f->start_dim;
    d["end_dim"] = f->end_dim;
  } else if (auto* g = dynamic_cast<nn::GELU*>(&m)) {
    d["approximate"] = g->tanh_approximation ? "tanh" : "none";
  } else if (auto* a = dynamic_cast<nn::MultiheadAttention*>(&m)) {
    d["embed_dim"] = a->embed_dim;
    d["num_heads"] = a->num_heads;
    d["head_dim"] = a->head_dim;
    d["dropout"] = a->dropout;
    d["batch_first"] = true;
  } else if (auto* pe = dynamic_cast<nn::PatchEmbed*>(&m)) {
    d["num_patches"] = pe->num_patches;
  } else if (auto* r = dynamic_cast<nn::RecurrentLayer*>(&m)) {
    d["input_size"] = r->input_size;
    d["hidden_size"] = r->hidden_size;
    d["num_layers"] = r->options.num_layers;
    d["bias"] = r->options.bias;
    d["batch_first"] = r->options.batch_first;
    d["dropout"] = r->options.dropout;
    d["bidirectional"] = r->options.bidirectional;
    d["proj_size"] = r->proj_size;
    if (auto* rnn = dynamic_cast<nn::RNN*>(&m)) d["nonlinearity"] = rnn->nonlinearity;
  } else if (auto* rc = dynamic_cast<nn::RecurrentCell*>(&m)) {
    d["input_size"] = rc->input_size;
    d["hidden_size"] = rc->hidden_size;
    d["bias"] = rc->bias_ih.defined();
    if (auto* cell = dynamic_cast<nn::RNNCell*>(&m)) d["nonlinearity"] = cell->nonlinearity;
  }
  return d;
}

// The settings a forward reads on each call, which may change after construction (dropout.p = 0.2).
void set_config(Module& m, const std::string& key, nb::handle value) {
  // A number, or a TypeError naming the setting (nb::cast alone throws std::bad_cast).
  const auto number = [&] {
    double v = 0;
    if (!nb::try_cast<double>(value, v))
      throw nb::type_error((m.name() + "." + key + " must be a number, got " + Py_TYPE(value.ptr())->tp_name).c_str());
    return v;
  };
  if (auto* p = dynamic_cast<nn::Dropout*>(&m); p && key == "p") {
    const double v = number();
    if (!(v >= 0 && v <= 1)) throw ValueError("Dropout: p must be in [0, 1], got " + decimal_text(v));
    p->p = v;
  } else if (auto* b = dynamic_cast<nn::BatchNorm2d*>(&m); b && (key == "eps" || key == "momentum")) {
    (key == "eps" ? b->eps : b->momentum) = number();
  } else if (auto* n = dynamic_cast<nn::LayerNorm*>(&m); n && key == "eps") {
    n->eps = number();
  } else {
    throw NotImplementedError(m.name() + "." + key + " is fixed at construction in ember's C++ layer: build a new layer");
  }
}

// The forward of RNN, GRU (c0 None) and LSTM: (output, h_n, c_n), c_n None but for an LSTM.
std::tuple<Tensor, Tensor, std::optional<Tensor>> recurrent_forward(Module& m, const Tensor& input,
                                                                    const Tensor& h0, std::optional<Tensor> c0) {
  nn::RecurrentOutput out;
  if (auto* lstm = dynamic_cast<nn::LSTM*>(&m)) {
    nb::gil_scoped_release release;
    out = run_forward([&] { return lstm->forward(input, h0, c0 ? *c0 : Tensor()); });
  } else {
    if (c0) throw ValueError(m.name() + ": only an LSTM takes a cell state c0");
    auto* rnn = dynamic_cast<nn::RNN*>(&m);
    auto* gru = dynamic_cast<nn::GRU*>(&m);
    if (!rnn && !gru) throw NotImplementedError(m.name() + " is not an RNN, LSTM or GRU");
    nb::gil_scoped_release release;
    out = run_forward([&] { return rnn ? rnn->forward(input, h0) : gru->forward(input, h0); });
  }
  return {out.output, out.h_n, out.c_n.defined() ? std::optional<Tensor>(out.c_n) : std::nullopt};
}

// The forward of RNNCell, GRUCell (cx None) and LSTMCell: (h', c'), c' None but for an LSTMCell.
std::pair<Tensor, std::optional<Tensor>> recurrent_cell_forward(Module& m, const Tensor& input, const Tensor& hx,
                                                                std::optional<Tensor> cx) {
  if (auto* lstm = dynamic_cast<nn::LSTMCell*>(&m)) {
    nb::gil_scoped_release release;
    const nn::LSTMState s = run_forward([&] { return lstm->forward(input, hx, cx ? *cx : Tensor()); });
    return {s.h, s.c};
  }
  if (cx) throw ValueError(m.name() + ": only an LSTMCell takes a cell state cx");
  auto* rnn = dynamic_cast<nn::RNNCell*>(&m);
  auto* gru = dynamic_cast<nn::GRUCell*>(&m);
  if (!rnn && !gru) throw NotImplementedError(m.name() + " is not an RNNCell, LSTMCell or GRUCell");
  nb::gil_scoped_release release;
  return {run_forward([&] { return rnn ? rnn->forward(input, hx) : gru->forward(input, hx); }), std::nullopt};
}

// A Python module standing in a C++ module tree: it registers the Python module's own parameters and
// buffers (the same tensors) and children (C++ modules, or bridges of Python ones), so DDP and ZeRO
// see the dotted names and tensors the Python module has, and its forward calls back into Python.
// It refers to the Python module weakly: the Python side owns the bridge, not the reverse.
class PythonModule final : public UnaryModule {
 public:
  PythonModule(nb::handle module, std::string type_name)
      : module_(nb::weakref(module)), type_name_(std::move(type_name)) {}
  std::string name() const override { return type_name_; }

  void add_parameter(const std::string& name, const Tensor& t) { register_parameter(name, t, t.requires_grad()); }
  void add_buffer(const std::string& name, const Tensor& t) { register_buffer(name, t); }
  void add_child(const std::string& name, std::shared_ptr<Module> m) { register_child(name, std::move(m)); }

 protected:
  Tensor forward(const Tensor& x) override {
    nb::gil_scoped_acquire gil;
    nb::object module = nb::borrow(PyWeakref_GetObject(module_.get()));
    if (module.is_none()) throw StateError(type_name_ + ": the Python module this bridge stands for is gone");
    nb::object r = module.attr("_bridge_forward")(x);
    if (!is_tensor(r.ptr()))
      throw nb::type_error((type_name_ + ".forward must return one Tensor to run under ember's C++ wrappers "
                            "(DistributedDataParallel, ZeRO), got " + Py_TYPE(r.ptr())->tp_name).c_str());
    return nb::cast<Tensor>(r);
  }

 private:
  PyRef module_;
  std::string type_name_;
};

nn::init::FanMode fan_mode(const std::string& mode) {
  if (mode == "fan_in") return nn::init::FanMode::fan_in;
  if (mode == "fan_out") return nn::init::FanMode::fan_out;
  throw ValueError("mode must be 'fan_in' or 'fan_out', got '" + mode + "'");
}

void bind_modules(nb::module_& m, nb::module_& nn_m) {
  nb::class_<nn::HookHandle>(m, "_ModuleHookHandle", doc::nn_HookHandle)
      .def("remove", &nn::HookHandle::remove, doc::nn_HookHandle_remove);

  nb::class_<Module>(m, "_Module", nb::is_weak_referenceable(),
                     "A C++ module of ember (a layer or a model); ember.nn's classes wrap it.")
      .def("type_name", &Module::name, doc::nn_Module_name)
      .def("extra_repr", &Module::extra_repr, doc::nn_Module_extra_repr)
      .def("__str__", &Module::str)
      .def("direct_parameters", [](const Module& mod) { return mod.named_parameters(false); },
           "(name, tensor) of its own parameters, in registration order.")
      .def("direct_buffers", [](const Module& mod) { return mod.named_buffers(false); },
           "(name, tensor) of its own buffers, in registration order.")
      .def("named_children", [](const Module& mod) { return mod.named_children(); }, doc::nn_Module_named_children)
      .def("replace_module", &replace_child, "name"_a, "module"_a, doc::nn_Module_replace_module)
      .def("named_parameters", [](const Module& mod) { return mod.named_parameters(true); },
           "(dotted name, tensor) of every parameter of the tree, as C++ lists them.")
      .def("train", &Module::train, "on"_a = true, doc::nn_Module_train)
      .def_prop_ro("training", &Module::is_training, doc::nn_Module_is_training)
      .def("state_dict", &Module::state_dict, doc::nn_Module_state_dict)
      .def("load_state_dict", &Module::load_state_dict, "state"_a, "strict"_a = true,
           doc::nn_Module_load_state_dict)
      .def("num_parameters", &Module::num_parameters, "Elements over all parameters.")
      .def("is_unary", [](Module& mod) { return dynamic_cast<UnaryModule*>(&mod) != nullptr; },
           "Whether it has a forward of one tensor.")
      .def(
          "__call__",
          [](Module& mod, Tensor x) {
            UnaryModule& u = unary(mod, "forward");
            nb::gil_scoped_release release;
            return run_forward([&] { return u(x); });
          },
          "input"_a, "The module's forward on input, with its forward hooks (the GIL released meanwhile).")
      .def("config", &config, "The layer's hyperparameters by PyTorch's attribute names.")
      .def("set_config", &set_config, "key"_a, "value"_a, "Changes a setting the forward reads (Dropout.p, ...).")
      .def(
          "register_forward_pre_hook",
          [](Module& mod, nb::handle fn) {
            PyRef f(fn);
            return mod.register_forward_pre_hook([f](Module&, const Tensor& x) {
              nb::gil_scoped_acquire gil;
              f.handle()(nb::cast(x));
            });
          },
          "hook"_a, doc::nn_Module_register_forward_pre_hook)
      .def(
          "register_forward_hook",
          [](Module& mod, nb::handle fn) {
            PyRef f(fn);
            return mod.register_forward_hook([f](Module&, const Tensor& x, const Tensor& y) {
              nb::gil_scoped_acquire gil;
              f.handle()(nb::cast(x), nb::cast(y));
            });
          },
          "hook"_a, doc::nn_Module_register_forward_hook)
      .def(
          "set_activation_checkpointing",
          [](Module& mod, bool on) { unary(mod, "set_activation_checkpointing").set_activation_checkpointing(on); },
          "on"_a, doc::nn_UnaryModule_set_activation_checkpointing)
      .def(
          "multihead_attention",
          [](Module& mod, Tensor q, Tensor k, Tensor v, std::optional<Tensor> mask) {
            auto* a = dynamic_cast<nn::MultiheadAttention*>(&mod);
            if (!a) throw NotImplementedError(mod.name() + " is not a MultiheadAttention");
            nb::gil_scoped_release release;
            return run_forward([&] { return a->forward(q, k, v, mask ? *mask : Tensor()); });
          },
          "query"_a, "key"_a, "value"_a, "attn_mask"_a.none(), doc::nn_MultiheadAttention_forward)
      .def(
          "recurrent",
          [](Module& mod, Tensor input, std::optional<Tensor> h0, std::optional<Tensor> c0) {
            return recurrent_forward(mod, input, h0 ? *h0 : Tensor(), std::move(c0));
          },
          "input"_a, "h0"_a.none(), "c0"_a.none(),
          "(output, h_n, c_n) of an RNN, GRU or LSTM from h0 and c0 (None: zeros; c0 and c_n: an LSTM's only).")
      .def(
          "recurrent_cell",
          [](Module& mod, Tensor input, std::optional<Tensor> hx, std::optional<Tensor> cx) {
            return recurrent_cell_forward(mod, input, hx ? *hx : Tensor(), std::move(cx));
          },
          "input"_a, "hx"_a.none(), "cx"_a.none(),
          "(h', c') of an RNNCell, GRUCell or LSTMCell from hx and cx (None: zeros; cx and c': an LSTMCell's only).");

  nb::class_<PythonModule, Module>(m, "_PythonModuleBridge",
                                   "A Python module standing in a C++ module tree (DDP, ZeRO); see ember.nn.Module.")
      .def("add_parameter", &PythonModule::add_parameter, "name"_a, "tensor"_a,
           "Registers one of the Python module's own parameters (the same tensor).")
      .def("add_buffer", &PythonModule::add_buffer, "name"_a, "tensor"_a,
           "Registers one of the Python module's own buffers (the same tensor).")
      .def("add_child", &PythonModule::add_child, "name"_a, "module"_a,
           "Registers a child: a built-in's C++ module or the bridge of a Python one.");

  // Made here as a std::shared_ptr: modules() (ZeRO-3) needs shared_from_this of every module of a tree.
  m.def(
      "_python_module_bridge",
      [](nb::handle module, std::string type_name) { return std::make_shared<PythonModule>(module, std::move(type_name)); },
      "module"_a, "type_name"_a, "A C++ stand-in for a Python module (register its tensors and children next).");

  // ---- constructors of the built-in layers (ember.nn's classes call these)
  using P = std::shared_ptr<Module>;
  nn_m.def("linear", [](int64_t i, int64_t o, bool bias) -> P { return std::make_shared<nn::Linear>(i, o, bias); },
           "in_features"_a, "out_features"_a, "bias"_a, doc::nn_Linear);
  nn_m.def("conv2d",
           [](int64_t i, int64_t o, int64_t k, int64_t s, int64_t p, bool bias, int64_t g, int64_t d) -> P {
             return std::make_shared<nn::Conv2d>(i, o, k, s, p, bias, g, d);
           },
           "in_channels"_a, "out_channels"_a, "kernel_size"_a, "stride"_a, "padding"_a, "bias"_a, "groups"_a,
           "dilation"_a, doc::nn_Conv2d);
  nn_m.def("conv_transpose2d",
           [](int64_t i, int64_t o, int64_t k, int64_t s, int64_t p, int64_t op, int64_t g, bool bias, int64_t d) -> P {
             return std::make_shared<nn::ConvTranspose2d>(i, o, k, s, p, op, g, bias, d);
           },
           "in_channels"_a, "out_channels"_a, "kernel_size"_a, "stride"_a, "padding"_a, "output_padding"_a, "groups"_a,
           "bias"_a, "dilation"_a, doc::nn_ConvTranspose2d);
  nn_m.def("batch_norm2d",
           [](int64_t c, double eps, double momentum, bool affine, bool track) -> P {
             return std::make_shared<nn::BatchNorm2d>(c, eps, momentum, affine, track);
           },
           "num_features"_a, "eps"_a, "momentum"_a, "affine"_a, "track_running_stats"_a, doc::nn_BatchNorm2d);
  nn_m.def("layer_norm",
           [](const Shape& shape, double eps, bool affine) -> P { return std::make_shared<nn::LayerNorm>(shape, eps, affine); },
           "normalized_shape"_a, "eps"_a, "elementwise_affine"_a, doc::nn_LayerNorm);
  nn_m.def("dropout", [](double p) -> P { return std::make_shared<nn::Dropout>(p); }, "p"_a, doc::nn_Dropout);
  nn_m.def("embedding", [](int64_t n, int64_t d) -> P { return std::make_shared<nn::Embedding>(n, d); },
           "num_embeddings"_a, "embedding_dim"_a, doc::nn_Embedding);
  nn_m.def("max_pool2d",
           [](int64_t k, std::optional<int64_t> s, int64_t p) -> P { return std::make_shared<nn::MaxPool2d>(k, s, p); },
           "kernel_size"_a, "stride"_a.none(), "padding"_a, doc::nn_MaxPool2d);
  nn_m.def("avg_pool2d",
           [](int64_t k, std::optional<int64_t> s, int64_t p) -> P { return std::make_shared<nn::AvgPool2d>(k, s, p); },
           "kernel_size"_a, "stride"_a.none(), "padding"_a, doc::nn_AvgPool2d);
  nn_m.def("adaptive_avg_pool2d",
           [](std::array<int64_t, 2> size) -> P { return std::make_shared<nn::AdaptiveAvgPool2d>(size); },
           "output_size"_a, doc::nn_AdaptiveAvgPool2d);
  nn_m.def("identity", []() -> P { return std::make_shared<nn::Identity>(); }, doc::nn_Identity);
  nn_m.def("flatten", [](int64_t s, int64_t e) -> P { return std::make_shared<nn::Flatten>(s, e); }, "start_dim"_a,
           "end_dim"_a, doc::nn_Flatten);
  nn_m.def("relu", []() -> P { return std::make_shared<nn::ReLU>(); }, doc::nn_ReLU);
  nn_m.def("gelu", [](bool tanh) -> P { return std::make_shared<nn::GELU>(tanh); }, "tanh_approximation"_a,
           doc::nn_GELU);
  nn_m.def("silu", []() -> P { return std::make_shared<nn::SiLU>(); }, doc::nn_SiLU);
  nn_m.def("multihead_attention",
           [](int64_t e, int64_t h, bool bias, double dropout) -> P {
             return std::make_shared<nn::MultiheadAttention>(e, h, bias, dropout);
           },
           "embed_dim"_a, "num_heads"_a, "bias"_a, "dropout"_a, "nn::MultiheadAttention (batch first).");
  const auto recurrent_options = [](int64_t layers, bool bias, bool batch_first, double dropout, bool bidirectional) {
    return nn::RecurrentOptions{
        .num_layers = layers, .bias = bias, .batch_first = batch_first, .dropout = dropout, .bidirectional = bidirectional};
  };
  nn_m.def("rnn",
           [=](int64_t i, int64_t h, int64_t layers, const std::string& nonlinearity, bool bias, bool batch_first,
               double dropout, bool bidirectional) -> P {
             return std::make_shared<nn::RNN>(i, h, recurrent_options(layers, bias, batch_first, dropout, bidirectional),
                                              nonlinearity);
           },
           "input_size"_a, "hidden_size"_a, "num_layers"_a, "nonlinearity"_a, "bias"_a, "batch_first"_a, "dropout"_a,
           "bidirectional"_a, doc::nn_RNN);
  nn_m.def("lstm",
           [=](int64_t i, int64_t h, int64_t layers, bool bias, bool batch_first, double dropout, bool bidirectional,
               int64_t proj_size) -> P {
             return std::make_shared<nn::LSTM>(i, h, recurrent_options(layers, bias, batch_first, dropout, bidirectional),
                                               proj_size);
           },
           "input_size"_a, "hidden_size"_a, "num_layers"_a, "bias"_a, "batch_first"_a, "dropout"_a, "bidirectional"_a,
           "proj_size"_a, doc::nn_LSTM);
  nn_m.def("gru",
           [=](int64_t i, int64_t h, int64_t layers, bool bias, bool batch_first, double dropout, bool bidirectional) -> P {
             return std::make_shared<nn::GRU>(i, h, recurrent_options(layers, bias, batch_first, dropout, bidirectional));
           },
           "input_size"_a, "hidden_size"_a, "num_layers"_a, "bias"_a, "batch_first"_a, "dropout"_a, "bidirectional"_a,
           doc::nn_GRU);
  nn_m.def("rnn_cell",
           [](int64_t i, int64_t h, bool bias, const std::string& nonlinearity) -> P {
             return std::make_shared<nn::RNNCell>(i, h, bias, nonlinearity);
           },
           "input_size"_a, "hidden_size"_a, "bias"_a, "nonlinearity"_a, doc::nn_RNNCell);
  nn_m.def("lstm_cell", [](int64_t i, int64_t h, bool bias) -> P { return std::make_shared<nn::LSTMCell>(i, h, bias); },
           "input_size"_a, "hidden_size"_a, "bias"_a, doc::nn_LSTMCell);
  nn_m.def("gru_cell", [](int64_t i, int64_t h, bool bias) -> P { return std::make_shared<nn::GRUCell>(i, h, bias); },
           "input_size"_a, "hidden_size"_a, "bias"_a, doc::nn_GRUCell);

  // ---- models
  nn_m.def("mlp",
           [](int64_t i, const std::vector<int64_t>& hidden, int64_t o) -> P { return std::make_shared<nn::MLP>(i, hidden, o); },
           "in_features"_a, "hidden"_a, "out_features"_a, doc::nn_MLP);
  nn_m.def("small_cnn",
           [](int64_t classes, int64_t channels, int64_t size) -> P {
             return std::make_shared<nn::SmallCNN>(classes, channels, size);
           },
           "num_classes"_a, "in_channels"_a, "image_size"_a, doc::nn_SmallCNN);
  nn_m.def("resnet",
           [](int depth, int64_t classes, int64_t channels, bool small_input) -> P {
             const nn::ResNetOptions o{classes, channels, small_input};
             switch (depth) {
               case 18: return nn::resnet18(o);
               case 34: return nn::resnet34(o);
               case 50: return nn::resnet50(o);
             }
             throw ValueError("resnet: depth must be 18, 34 or 50, got " + std::to_string(depth));
           },
           "depth"_a, "num_classes"_a, "in_channels"_a, "small_input"_a, doc::nn_ResNet);
  // ---- the models' parts, for code that builds or recognises them (torchvision's and timm's names)
  nn_m.def("resnet_block",
           [](const std::string& kind, int64_t inplanes, int64_t planes, int64_t stride,
              const std::optional<std::vector<P>>& downsample) -> P {
             std::shared_ptr<nn::Sequential> ds;
             if (downsample) {
               ds = std::make_shared<nn::Sequential>();
               for (const P& m : *downsample) ds->push_back(std::shared_ptr<UnaryModule>(m, &unary(*m, "downsample")));
             }
             if (kind == "basic") return std::make_shared<nn::BasicBlock>(inplanes, planes, stride, ds);
             return std::make_shared<nn::Bottleneck>(inplanes, planes, stride, ds);
           },
           "kind"_a, "inplanes"_a, "planes"_a, "stride"_a, "downsample"_a.none(),
           "nn::BasicBlock (kind 'basic') or nn::Bottleneck; downsample: the shortcut's modules, or None.");
  nn_m.def("vit_block",
           [](int64_t dim, int64_t heads, double mlp_ratio, double eps) -> P {
             return std::make_shared<nn::ViTBlock>(dim, heads, mlp_ratio, eps);
           },
           "dim"_a, "num_heads"_a, "mlp_ratio"_a, "eps"_a, "nn::ViTBlock (timm's Block).");
  nn_m.def("vit_mlp", [](int64_t dim, int64_t hidden) -> P { return std::make_shared<nn::ViTMlp>(dim, hidden); },
           "dim"_a, "hidden"_a, "nn::ViTMlp (timm's Mlp).");
  nn_m.def("patch_embed",
           [](int64_t image_size, int64_t patch_size, int64_t in_channels, int64_t embed_dim) -> P {
             return std::make_shared<nn::PatchEmbed>(image_size, patch_size, in_channels, embed_dim);
           },
           "image_size"_a, "patch_size"_a, "in_channels"_a, "embed_dim"_a, "nn::PatchEmbed (timm's PatchEmbed).");
  nn_m.def("vit",
           [](int64_t image_size, int64_t patch_size, int64_t in_channels, int64_t num_classes, int64_t embed_dim,
              int64_t depth, int64_t num_heads, double mlp_ratio, double eps) -> P {
             nn::ViTOptions o{image_size, patch_size, in_channels, num_classes, embed_dim, depth, num_heads, mlp_ratio, eps};
             return std::make_shared<nn::VisionTransformer>(o);
           },
           "image_size"_a, "patch_size"_a, "in_channels"_a, "num_classes"_a, "embed_dim"_a, "depth"_a, "num_heads"_a,
           "mlp_ratio"_a, "eps"_a, "nn::VisionTransformer (timm's names).");
  nn_m.def("make_model",
           [](const std::string& name, int64_t channels, int64_t size, int64_t classes) -> P {
             return train::make_model(name, {channels, size, classes});
           },
           "name"_a, "channels"_a, "size"_a, "classes"_a,
           doc::train_make_model);
  nn_m.def("model_names", &train::model_names, "The names make_model takes.");
  nn_m.def("apply_activation_checkpointing",
           [](Module& root, const std::vector<std::string>& types) { return nn::apply_activation_checkpointing(root, types); },
           "root"_a, "module_types"_a, doc::nn_apply_activation_checkpointing);
  nn_m.def("default_checkpoint_modules", &nn::default_checkpoint_modules, "model"_a,
           doc::nn_default_checkpoint_modules);
}

void bind_init(nb::module_& nn_m) {
  using namespace nn::init;
  // Each writes into the tensor's elements in place (no graph) and returns it: the handle is copied,
  // the elements are the caller's.
  nn_m.def("calculate_gain", &calculate_gain, "nonlinearity"_a, "param"_a.none() = nb::none(),
           doc::nn_init_calculate_gain);
  nn_m.def("calculate_fan_in_and_fan_out",
           [](const Tensor& t) {
             const Fans f = calculate_fan_in_and_fan_out(t);
             return nb::make_tuple(f.fan_in, f.fan_out);
           },
           "tensor"_a, doc::nn_init_calculate_fan_in_and_fan_out);
  nn_m.def("uniform_", [](Tensor t, double a, double b, Generator* g) { return uniform_(t, a, b, g); }, "tensor"_a,
           "a"_a, "b"_a, "generator"_a.none(), doc::nn_init_uniform_);
  nn_m.def("normal_", [](Tensor t, double mean, double std, Generator* g) { return normal_(t, mean, std, g); },
           "tensor"_a, "mean"_a, "std"_a, "generator"_a.none(), doc::nn_init_normal_);
  nn_m.def("constant_", [](Tensor t, double v) { return constant_(t, v); }, "tensor"_a, "val"_a,
           doc::nn_init_constant_);
  nn_m.def("kaiming_uniform_",
           [](Tensor t, double a, const std::string& mode, const std::string& nl, Generator* g) {
             return kaiming_uniform_(t, a, fan_mode(mode), nl, g);
           },
           "tensor"_a, "a"_a, "mode"_a, "nonlinearity"_a, "generator"_a.none(), doc::nn_init_kaiming_uniform_);
  nn_m.def("kaiming_normal_",
           [](Tensor t, double a, const std::string& mode, const std::string& nl, Generator* g) {
             return kaiming_normal_(t, a, fan_mode(mode), nl, g);
           },
           "tensor"_a, "a"_a, "mode"_a, "nonlinearity"_a, "generator"_a.none(), doc::nn_init_kaiming_normal_);
  nn_m.def("xavier_uniform_", [](Tensor t, double gain, Generator* g) { return xavier_uniform_(t, gain, g); },
           "tensor"_a, "gain"_a, "generator"_a.none(), doc::nn_init_xavier_uniform_);
  nn_m.def("xavier_normal_", [](Tensor t, double gain, Generator* g) { return xavier_normal_(t, gain, g); },
           "tensor"_a, "gain"_a, "generator"_a.none(), doc::nn_init_xavier_normal_);
  nn_m.def("trunc_normal_",
           [](Tensor t, double mean, double std, double a, double b, Generator* g) { return trunc_normal_(t, mean, std, a, b, g); },
           "tensor"_a, "mean"_a, "std"_a, "a"_a, "b"_a, "generator"_a.none(), doc::nn_init_trunc_normal_);
}

}  // namespace

void bind_nn(nb::module_& m) {
  // nn.Parameter objects for the tensors of C++ layers must be those very tensors (the layer's forward
  // reads its own handle), not views of them: the Python object is made empty, then given the handle.
  m.def(
      "_init_handle",
      [](nb::handle self, const Tensor& t) {
        if (!is_tensor(self.ptr())) throw nb::type_error("_init_handle: expected an uninitialised ember.Tensor");
        if (nb::inst_ready(self)) throw StateError("_init_handle: this tensor object is already initialised");
        new (nb::inst_ptr<Tensor>(self)) Tensor(t);
        nb::inst_mark_ready(self);
      },
      "self"_a, "tensor"_a, "Initialises an empty Tensor (subclass) object as a handle to `tensor` itself.");
  m.def("_impl_id", [](const Tensor& t) { return reinterpret_cast<uintptr_t>(t.impl()); }, "tensor"_a,
        "An id of the C++ tensor a handle points to: equal for two Python objects of one tensor.");
  nb::module_ nn_m = m.def_submodule("_nn", "ember's C++ layers and models (ember.nn wraps them).");
  bind_modules(m, nn_m);
  bind_init(nn_m);
  nn_m.def("checkpoint",
           [](nb::handle fn, const std::vector<Tensor>& inputs) {
             const nn::CheckpointFunction f = tensor_function(fn, "checkpoint: the function's result");
             nb::gil_scoped_release release;
             return nn::checkpoint(f, inputs);
           },
           "function"_a, "inputs"_a, "nn::checkpoint: fn(*inputs) with its activations recomputed in backward.");
  nn_m.def("is_recomputing", &nn::is_recomputing, doc::nn_is_recomputing);
}

}  // namespace ember::python
