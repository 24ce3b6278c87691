#include "autograd/engine.h"

#include <optional>
#include <queue>
#include <unordered_map>
#include <unordered_set>

#include "autograd/accumulate_grad.h"
#include "autograd/grad_mode.h"
#include "autograd/node.h"
#include "tensor/nvtx.h"
#include "tensor/ops.h"

namespace ember::autograd {

namespace {

thread_local const BackwardObserver* current_observer = nullptr;
// The callbacks of the backward pass running on this thread (null outside one).
thread_local std::vector<std::function<void()>>* current_callbacks = nullptr;

struct EdgeKey {
  Node* fn;
  uint32_t nr;
  bool operator==(const EdgeKey& o) const { return fn == o.fn && nr == o.nr; }
};

struct Run {
  std::vector<Edge> roots;
  std::vector<Tensor> root_grads;
  bool keep_graph = false;
  bool create_graph = false;
  // grad() mode: the edges whose incoming gradient is returned instead of accumulated.
  std::vector<EdgeKey> captures;
  std::vector<Tensor> captured;
};

Tensor add_grads(const Tensor& a, const Tensor& b) { return a.defined() ? add(a, b) : b; }

void check_backward_outputs(const Node& node, const std::vector<Tensor>& grads) {
  for (size_t i = 0; i < grads.size(); ++i) {
    if (!grads[i].defined() || !is_floating(grads[i].dtype())) continue;
    NoGradGuard no_grad;
    AnomalyModeGuard not_while_checking(false);  // the check runs ops itself
    if (!all_finite(grads[i]))
      throw AutogradError(std::string("anomaly: the backward of ") + node.name() +
                          " returned a non-finite value in gradient " + std::to_string(i));
  }
}

// A node's profiler range: "<op> backward (<module>)", or "<op> backward" outside any module (no
// '/' or '@': ncu's --nvtx-include reads them as range nesting and domain).
std::string backward_range_name(const Node& node) {
  const std::string op = std::string(node.name()) + " backward";
  return node.module_scope().empty() ? op : op + " (" + node.module_scope() + ")";
}

void execute_graph(Run& run) {
  const bool capturing = !run.captures.empty();

  // Count, for every reachable node, how many edges point at it.
  std::unordered_map<Node*, int> deps;
  std::unordered_map<Node*, std::shared_ptr<Node>> alive;
  {
    std::vector<Node*> stack;
    for (const Edge& e : run.roots)
      if (e.valid() && alive.emplace(e.fn.get(), e.fn).second) stack.push_back(e.fn.get());
    while (!stack.empty()) {
      Node* n = stack.back();
      stack.pop_back();
      for (const Edge& e : n->next_edges()) {
        if (!e.valid()) continue;
        ++deps[e.fn.get()];
        if (alive.emplace(e.fn.get(), e.fn).second) stack.push_back(e.fn.get());
      }
    }
  }

  // In grad() mode run only the nodes through which a captured gradient flows.
  std::unordered_map<Node*, bool> leads_to_capture;
  auto is_capture_node = [&](Node* n) {
    for (const auto& c : run.captures)
      if (c.fn == n) return true;
    return false;
  };
  std::function<bool(Node*)> leads = [&](Node* n) -> bool {
    auto it = leads_to_capture.find(n);
    if (it != leads_to_capture.end()) return it->second;
    leads_to_capture[n] = false;  // the graph is acyclic; this only guards re-entry
    bool r = false;
    for (const Edge& e : n->next_edges())
      if (e.valid() && (is_capture_node(e.fn.get()) || leads(e.fn.get()))) r = true;
    return leads_to_capture[n] = r;
  };

  std::unordered_map<Node*, std::vector<Tensor>> buffers;
  auto deliver = [&](const Edge& e, Tensor g) {
    auto& buf = buffers[e.fn.get()];
    if (buf.empty()) buf.resize(e.fn->output_meta().size());
    buf[e.input_nr] = add_grads(buf[e.input_nr], g);
  };

  auto cmp = [](Node* a, Node* b) { return a->sequence_nr() < b->sequence_nr(); };
  std::priority_queue<Node*, std::vector<Node*>, decltype(cmp)> ready(cmp);
  std::unordered_set<Node*> queued;
  for (size_t i = 0; i < run.roots.size(); ++i)
    if (run.roots[i].valid()) deliver(run.roots[i], run.root_grads[i]);
  for (const Edge& e : run.roots)
    if (e.valid() && deps[e.fn.get()] == 0 && queued.insert(e.fn.get()).second) ready.push(e.fn.get());

  while (!ready.empty()) {
    Node* node = ready.top();
    ready.pop();
    std::vector<Tensor> grads = std::move(buffers[node]);
    buffers.erase(node);

    bool any = false;
    for (const Tensor& g : grads) any = any || g.defined();
    const bool is_accumulator = dynamic_cast<AccumulateGrad*>(node) != nullptr;
    const bool should_apply = any && (capturing ? (!is_accumulator && leads(node)) : true);

    if (any) {
      for (const auto& [nr, hook] : node->pre_hooks()) {
        if (!grads[nr].defined()) continue;
        Tensor r = checked_hook_result(grads[nr], hook(grads[nr]), "backward");
        if (r.defined()) grads[nr] = r;
      }
      for (size_t c = 0; c < run.captures.size(); ++c)
        if (run.captures[c].fn == node && grads[run.captures[c].nr].defined())
          run.captured[c] = add_grads(run.captured[c], grads[run.captures[c].nr]);
    }

    std::vector<Tensor> results;
    if (should_apply) {
      const auto& meta = node->output_meta();
      for (size_t i = 0; i < grads.size(); ++i)
        if (!grads[i].defined())
          grads[i] = zeros(meta[i].shape, TensorOptions(meta[i].dtype).with_device(meta[i].device));
      const bool anomaly = AnomalyMode::is_enabled();
      {
        // Anomaly mode checks the node's results as a whole, so a report names this backward
        // rather than an op inside its vjp.
        AnomalyModeGuard whole_node(false);
        std::optional<nvtx::Range> range;
        if (nvtx::enabled()) range.emplace(backward_range_name(*node));
        results = node->apply(std::move(grads));
      }
      if (anomaly) check_backward_outputs(*node, results);
      if (current_observer) (*current_observer)(*node, results);
      if (!run.keep_graph) node->release_saved();
    }

    const auto& edges = node->next_edges();
    for (size_t i = 0; i < edges.size(); ++i) {
      const Edge& e = edges[i];
      if (!e.valid()) continue;
      if (i < results.size() && results[i].defined()) deliver(e, std::move(results[i]));
      if (--deps[e.fn.get()] == 0 && queued.insert(e.fn.get()).second) ready.push(e.fn.get());
    }
  }
}

// Runs the graph, then the callbacks queued meanwhile (a nested backward, from a hook, has its own).
void execute(Run& run) {
  std::vector<std::function<void()>> callbacks;
  struct Scope {
    std::vector<std::function<void()>>* previous;
    ~Scope() { current_callbacks = previous; }
  } scope{current_callbacks};
  current_callbacks = &callbacks;
  execute_graph(run);
  for (size_t i = 0; i < callbacks.size(); ++i) {
    auto callback = std::move(callbacks[i]);  // it may queue more: callbacks may grow
    callback();
  }
}

void prepare_roots(Run& run, const std::vector<Tensor>& roots, const std::vector<Tensor>& grads) {
  if (!grads.empty() && grads.size() != roots.size())
    throw AutogradError("backward: got " + std::to_string(roots.size()) + " tensors but " +
                        std::to_string(grads.size()) + " gradients");
  for (size_t i = 0; i < roots.size(); ++i) {
    const Tensor& r = roots[i];
    if (!r.requires_grad())
      throw AutogradError("backward: element " + std::to_string(i) +
                          " of the tensors does not require grad and has no grad_fn");
    Tensor g = grads.empty() ? Tensor() : grads[i];
    if (!g.defined()) {
      if (r.numel() != 1)
        throw AutogradError("backward: a gradient can be created implicitly only for one-element outputs, got shape " +
                            to_string(r.shape()));
      g = ones(r.shape(), TensorOptions(r.dtype()).with_device(r.device()));
    } else if (!(g.shape() == r.shape())) {
      throw ShapeError("backward: gradient of shape " + to_string(g.shape()) + " given for a tensor of shape " +
                       to_string(r.shape()));
    }
    run.roots.push_back(gradient_edge(r));
    run.root_grads.push_back(g);
  }
}

}  // namespace

void queue_callback(std::function<void()> callback) {
  if (!current_callbacks) throw AutogradError("queue_callback: no backward pass is running on this thread");
  current_callbacks->push_back(std::move(callback));
}

BackwardObserverGuard::BackwardObserverGuard(BackwardObserver observer)
    : observer_(std::move(observer)), prev_(current_observer) {
  current_observer = observer_ ? &observer_ : nullptr;
}

BackwardObserverGuard::~BackwardObserverGuard() { current_observer = prev_; }

void backward(const std::vector<Tensor>& roots, const std::vector<Tensor>& grads, bool retain_graph,
              bool create_graph) {
  Run run;
  prepare_roots(run, roots, grads);
  run.keep_graph = retain_graph || create_graph;
  run.create_graph = create_graph;
  GradModeGuard mode(create_graph);
  execute(run);
}

std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& grad_outputs, bool retain_graph, bool create_graph,
                         bool allow_unused) {
  Run run;
  prepare_roots(run, outputs, grad_outputs);
  run.keep_graph = retain_graph || create_graph;
  run.create_graph = create_graph;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].requires_grad())
      throw AutogradError("grad: input " + std::to_string(i) + " does not require grad");
    Edge e = gradient_edge(inputs[i]);
    run.captures.push_back({e.fn.get(), e.input_nr});
  }
  run.captured.resize(inputs.size());
  // Keep the accumulators of leaf inputs alive while the graph runs.
  std::vector<Edge> keep;
  for (const Tensor& t : inputs) keep.push_back(gradient_edge(t));

  {
    GradModeGuard mode(create_graph);
    execute(run);
  }
  for (size_t i = 0; i < inputs.size(); ++i)
    if (!run.captured[i].defined() && !allow_unused)
      throw AutogradError("grad: input " + std::to_string(i) +
                          " was not used to compute the outputs (pass allow_unused=true to get an undefined gradient)");
  return run.captured;
}

}  // namespace ember::autograd
