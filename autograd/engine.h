// The backward pass: walks the graph from the roots in dependency order, calling each node once
// all gradients for it have arrived, and either accumulates into leaves (backward) or returns
// the gradients of chosen inputs (grad).
#pragma once

#include <vector>

#include "tensor/tensor.h"

namespace ember::autograd {

// Accumulates d(sum of roots * grads)/d(leaf) into every leaf's .grad. An empty grads entry means
// ones for a one-element root. retain_graph keeps saved tensors for another backward; create_graph
// records the backward itself (for higher derivatives) and implies retain_graph.
void backward(const std::vector<Tensor>& roots, const std::vector<Tensor>& grads = {}, bool retain_graph = false,
              bool create_graph = false);

// Returns d(sum of outputs * grad_outputs)/d(inputs[i]) without touching any .grad.
// An input the outputs do not depend on raises AutogradError unless allow_unused (then undefined).
std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& grad_outputs = {}, bool retain_graph = false,
                         bool create_graph = false, bool allow_unused = false);

}  // namespace ember::autograd
