#include "dist/reducer.h"

#include <unordered_set>

#include "autograd/accumulate_grad.h"
#include "autograd/engine.h"
#include "autograd/node.h"
#include "tensor/error.h"

namespace ember::dist {

namespace {

// The leaves (parameters) whose gradient backward from `output` would reach: a walk of its graph.
std::unordered_set<const TensorImpl*> leaves_reached(const Tensor& output) {
  std::unordered_set<const TensorImpl*> reached;
  std::unordered_set<const autograd::Node*> seen;
  std::vector<const autograd::Node*> stack;
  if (output.grad_fn()) stack.push_back(output.grad_fn().get());
  else if (output.requires_grad()) reached.insert(output.impl());
  while (!stack.empty()) {
    const autograd::Node* node = stack.back();
    stack.pop_back();
    if (!seen.insert(node).second) continue;
    if (const auto* leaf = dynamic_cast<const autograd::AccumulateGrad*>(node)) reached.insert(leaf->variable().impl());
    for (const autograd::Edge& e : node->next_edges())
      if (e.valid()) stack.push_back(e.fn.get());
  }
  return reached;
}

}  // namespace

Reducer::Reducer(std::vector<std::pair<std::string, Tensor>> params, std::vector<size_t> bucket_of,
                 std::function<void(size_t)> launch, std::function<void(size_t)> filled)
    : params_(std::move(params)), bucket_of_(std::move(bucket_of)), launch_(std::move(launch)), filled_(std::move(filled)) {
  if (params_.size() != bucket_of_.size())
    throw ValueError("Reducer: " + std::to_string(params_.size()) + " parameters but " + std::to_string(bucket_of_.size()) +
                     " bucket indices");
  for (size_t b : bucket_of_) {
    if (b >= bucket_size_.size()) bucket_size_.resize(b + 1, 0);
    ++bucket_size_[b];
  }
  reset();
}

void Reducer::reset() {
  ready_.assign(params_.size(), false);
  pending_ = bucket_size_;
  next_launch_ = 0;
}

void Reducer::begin(const std::function<void()>& at_end) {
  if (started_) return;
  started_ = true;
  autograd::queue_callback(at_end);
}

void Reducer::mark_ready(size_t i) {
  if (ready_[i]) return;
  ready_[i] = true;
  const size_t b = bucket_of_[i];
  if (--pending_[b] == 0 && filled_) filled_(b);
  while (next_launch_ < pending_.size() && pending_[next_launch_] == 0) launch_(next_launch_++);
}

void Reducer::mark_unused(const Tensor& output) {
  const auto reached = leaves_reached(output);
  for (size_t i = 0; i < params_.size(); ++i)
    if (!reached.count(params_[i].second.impl())) mark_ready(i);
}

void Reducer::prepare() {
  if (started_) {
    started_ = false;
    comm_.drain();
  }
  reset();
}

Reducer::Outcome Reducer::finish() {
  started_ = false;
  Outcome out;
  out.failure = comm_.drain();
  for (size_t i = 0; i < params_.size(); ++i)
    if (!ready_[i]) out.unready += (out.unready.empty() ? "" : ", ") + params_[i].first;
  reset();
  return out;
}

void Reducer::Outcome::raise(const std::string& who, const char* buckets) const {
  if (failure) std::rethrow_exception(failure);
  if (!unready.empty())
    throw ValueError(who + ": parameter(s) got no gradient in this backward, so their " + buckets +
                     " were never reduced: " + unready +
                     ". Make every parameter take part in the loss, or pass find_unused_parameters = true");
}

}  // namespace ember::dist
