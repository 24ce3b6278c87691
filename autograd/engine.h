/// @file
/// The backward pass: walks the graph from the roots in dependency order, calling each node once
/// all gradients for it have arrived, and either accumulates into leaves (backward) or returns
/// the gradients of chosen inputs (grad).
#pragma once

#include <functional>
#include <vector>

#include "tensor/tensor.h"

namespace ember::autograd {

class Node;

/// Sees each node's results (the gradients it passes to its inputs, undefined where none) as soon as
/// the node has run, in the order backward runs them. Device-side checks hang here (anomaly mode is
/// the host-side one).
using BackwardObserver = std::function<void(const Node& node, const std::vector<Tensor>& grads)>;

/// While alive, the backward passes run on this thread report to `observer` (the previous observer,
/// if any, is set aside and restored on destruction).
class BackwardObserverGuard {
 public:
  explicit BackwardObserverGuard(BackwardObserver observer);  ///< Installs `observer` on this thread.
  ~BackwardObserverGuard();
  BackwardObserverGuard(const BackwardObserverGuard&) = delete;
  BackwardObserverGuard& operator=(const BackwardObserverGuard&) = delete;

 private:
  BackwardObserver observer_;
  const BackwardObserver* prev_;
};

/// Runs callback once the backward pass running on this thread has finished, after every node
/// (PyTorch's Variable._execution_engine.queue_callback): callbacks run in the order queued, and one
/// may queue another. DDP waits for its gradient reductions there. A callback's exception leaves
/// backward(); a failed backward drops its callbacks. AutogradError outside a backward pass.
void queue_callback(std::function<void()> callback);

/// Accumulates d(sum of roots * grads)/d(leaf) into every leaf's .grad. An empty grads entry means
/// ones for a one-element root. retain_graph keeps saved tensors for another backward; create_graph
/// records the backward itself (for higher derivatives) and implies retain_graph; as in PyTorch, a
/// leaf's .grad then has a graph that holds the leaf, a cycle that lives until .grad is reset (set_grad).
void backward(const std::vector<Tensor>& roots, const std::vector<Tensor>& grads = {}, bool retain_graph = false,
              bool create_graph = false);

/// Returns d(sum of outputs * grad_outputs)/d(inputs[i]) without touching any .grad.
/// An input the outputs do not depend on raises AutogradError unless allow_unused (then undefined).
std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& grad_outputs = {}, bool retain_graph = false,
                         bool create_graph = false, bool allow_unused = false);

}  // namespace ember::autograd
