/// @file
/// A node of the backward graph: it maps the gradients of a forward op's outputs to the gradients
/// of its inputs and points (edges) at the nodes that produced those inputs.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tensor/tensor.h"

namespace ember::autograd {

class Node;

/// Where a gradient goes: input `input_nr` of node `fn`. An edge without fn carries nothing.
struct Edge {
  std::shared_ptr<Node> fn;                     ///< the node that receives the gradient; null for none
  uint32_t input_nr = 0;                        ///< which of its inputs
  bool valid() const { return fn != nullptr; }  ///< Whether the edge leads somewhere.
};

/// What the engine needs to make a zero gradient for an output that received none.
struct TensorMeta {
  Shape shape;    ///< the output's shape
  DType dtype;    ///< its dtype
  Device device;  ///< its device
};

/// A node of the backward graph: the backward of one recorded op (a primitive is its own node) or a
/// leaf's AccumulateGrad.
class Node : public std::enable_shared_from_this<Node> {
 public:
  /// A node with the next sequence number and no edges.
  Node();
  /// Frees the nodes only this one keeps alive one after another, not each inside the last one's
  /// destructor: a graph of 200,000 chained nodes (a running loss kept as a tensor) would overflow the stack.
  virtual ~Node();
  /// A primitive is built as a value and moved to the heap when recorded; the copy is a fresh
  /// node (new sequence number, no edges), which is all it has at that point.
  Node(const Node&) : Node() {}
  Node& operator=(const Node&) = delete;

  /// The forward op's name ("mul", "sum", ...); error messages add "backward of".
  virtual const char* name() const = 0;
  /// Gradients for each input edge from the gradients of each output (none undefined: the engine
  /// fills missing ones with zeros). An undefined result means "no gradient" for that edge.
  virtual std::vector<Tensor> apply(std::vector<Tensor>&& grad_outputs) = 0;
  /// Frees what was saved for backward (after a backward without retain_graph).
  virtual void release_saved() {}

  /// Nodes created later run first when both are ready: a topological order for one thread.
  uint64_t sequence_nr() const { return sequence_nr_; }
  /// One edge per input of the forward op: where that input's gradient goes.
  const std::vector<Edge>& next_edges() const { return next_edges_; }
  std::vector<Edge>& mutable_next_edges() { return next_edges_; }  ///< The edges, to wire them when recording.
  /// Shape, dtype and device of each forward output, for the zeros of a missing gradient.
  const std::vector<TensorMeta>& output_meta() const { return output_meta_; }
  /// The output metadata, to fill when recording.
  std::vector<TensorMeta>& mutable_output_meta() { return output_meta_; }
  /// The module whose forward recorded this node (tensor/nvtx.h's current_module() then), set only
  /// while profiler ranges are on: the engine names the node's backward range after it.
  const std::string& module_scope() const { return module_scope_; }
  /// Adds a hook on the gradient of output `output_nr`; hooks run before apply(), in registration order.
  void add_pre_hook(uint32_t output_nr, GradHook hook) { pre_hooks_.emplace_back(output_nr, std::move(hook)); }
  /// The hooks, as (output_nr, hook) in registration order.
  const std::vector<std::pair<uint32_t, GradHook>>& pre_hooks() const { return pre_hooks_; }

 private:
  uint64_t sequence_nr_;
  std::string module_scope_;
  std::vector<Edge> next_edges_;
  std::vector<TensorMeta> output_meta_;
  std::vector<std::pair<uint32_t, GradHook>> pre_hooks_;
};

/// Per-tensor autograd state, allocated only for tensors that require grad or have a grad_fn.
struct AutogradMeta {
  bool requires_grad = false;     ///< set on leaves by requires_grad_()
  bool retains_grad = false;      ///< retain_grad() was called on this non-leaf
  Tensor grad;                    ///< the accumulated gradient (Tensor::grad())
  std::shared_ptr<Node> grad_fn;  ///< the node of the op that made the tensor; null for leaves
  uint32_t output_nr = 0;         ///< which output of grad_fn the tensor is
  std::weak_ptr<Node> grad_accumulator;  ///< leaves: the AccumulateGrad node, created on demand
  std::vector<GradHook> hooks;           ///< leaves: run on the incoming gradient
  std::vector<PostAccumulateGradHook> post_accumulate_grad_hooks;  ///< leaves: run after .grad was updated
  /// Non-leaves after retain_grad(): the gradient cell its hook fills (shared, so no cycle).
  std::shared_ptr<Tensor> retained_grad;
};

/// The edge a gradient for `t` should flow into: its grad_fn, its leaf accumulator, or none.
Edge gradient_edge(const Tensor& t);

/// Checks a node's backward results against its forward's inputs: one per input (AutogradError naming
/// the node otherwise), undefined where the input needs none (no valid edge), each of its input's shape
/// (AutogradError) and cast to its input's dtype (a promoted op's backward computes in the wider type).
void conform_input_gradients(const Node& node, std::vector<Tensor>& grads, const std::vector<TensorMeta>& input_meta);

/// What a gradient hook returned, checked against the gradient it was given: undefined (keep the
/// gradient) or of its shape, dtype and device; AutogradError naming `where` and both otherwise (as
/// PyTorch refuses a hook that changes the gradient's size or type).
Tensor checked_hook_result(const Tensor& grad, Tensor result, const char* where);

/// The sequence number the next node will get: nodes made after a reading have numbers at or above
/// it, so two readings bracket the nodes a stretch of code recorded (other threads' nodes too).
uint64_t next_sequence_nr();

}  // namespace ember::autograd
