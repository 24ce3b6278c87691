/// @file
/// Where a training step first made a NaN or an infinity (issue 14), found on the device so that a
/// normal step waits for nothing. Forward hooks on every module and a backward observer number the
/// step's checks in the order they run; each check records on the device whether it is the first to
/// see a non-finite value (optim::mark_first_nonfinite). The host names the module and op of that
/// check only when a log line reads the record, with the values it reads anyway.
///   forward   each leaf module's input (unless just checked) and output, the model's output, the
///             loss; the op is the one that made the tensor (its grad_fn)
///   backward  each node's results, in the order backward runs the nodes; the op is the node's
/// A node belongs to the innermost module whose call made it (autograd sequence numbers read by the
/// call's hooks bracket its nodes). "<model>" is the model's own forward outside its children,
/// "<loss>" what ran after the model (the loss, its cast, the loss scaling), "<input>" a tensor no op
/// made (the batch).
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "autograd/engine.h"
#include "nn/module.h"

namespace ember::train {

/// The names of one step's checks, "module (op)" each, in check order.
struct NonFiniteLabels {
  /// the forward and the backward checks @{
  std::vector<const std::string*> forward, backward;
  /// @}
  bool operator==(const NonFiniteLabels&) const = default;  ///< The same labels in the same order.
};

/// One step's record.
struct NonFiniteStep {
  Tensor first;  ///< (2) int32 on the device: the first forward and backward checks that saw a
                 ///< non-finite value, INT32_MAX for none; undefined when the step was not checked
  std::shared_ptr<const NonFiniteLabels> labels;  ///< equal records of consecutive steps share one
};

/// Finds, on the device, the module and op that first made a NaN or an infinity in a training
/// step (see the file's description): begin_step, the step under a BackwardObserverGuard of
/// backward_observer(), check_forward(loss), end_step.
class NonFiniteLocator {
 public:
  /// Hooks every module of `model`, which must be owned by a std::shared_ptr; the destructor takes
  /// the hooks off. The labels of the steps point into the locator: it must outlive them.
  explicit NonFiniteLocator(nn::Module& model);
  ~NonFiniteLocator();
  NonFiniteLocator(const NonFiniteLocator&) = delete;
  NonFiniteLocator& operator=(const NonFiniteLocator&) = delete;

  /// Starts a step's checks, their record on `device`; checks run between begin_step and end_step
  /// only (not in evaluation, say).
  void begin_step(Device device);
  /// Checks a tensor made after the model's forward (the loss).
  void check_forward(const Tensor& t) { check(t, kAfterModel); }
  /// Checks each node's results; for a BackwardObserverGuard around the step's backward.
  autograd::BackwardObserver backward_observer();
  NonFiniteStep end_step();  ///< Ends the step's checks and returns its record.

 private:
  static constexpr int32_t kAfterModel = -1, kInput = -2;
  struct Call {
    uint64_t begin, end;  // the sequence numbers of the nodes it made: [begin, end)
    int32_t module;       // index in module_names_
  };
  void enter(int32_t module, bool leaf, const Tensor& input);
  void leave(int32_t module, bool checks_output, const Tensor& output);
  // Checks t if it is floating and not among the last few checked; `owner` names it when no op made it.
  void check(const Tensor& t, int32_t owner);
  // The innermost call that made node number `seq`, kAfterModel when none.
  int32_t module_at(uint64_t seq) const;
  const std::string* label(int32_t module, const char* op);

  std::vector<std::string> module_names_;  // named_modules()'s, "<model>" for the model itself
  std::vector<nn::HookHandle> hooks_;
  bool active_ = false;
  Tensor first_;  // this step's record (2) int32
  std::vector<Call> calls_;   // this step's module calls, in the order they began
  std::vector<size_t> open_;  // calls_ indices of the calls still running
  std::vector<Tensor> recent_;  // the last tensors checked, not checked again
  NonFiniteLabels labels_;      // this step's
  std::shared_ptr<const NonFiniteLabels> previous_;
  std::map<std::pair<int32_t, std::string>, const std::string*> label_of_;
  std::deque<std::string> label_texts_;  // stable addresses
};

/// The first step of a log interval whose loss or gradient was not finite, and where it went wrong.
struct NonFiniteReport {
  int64_t iteration;  ///< 1-based, over the run
  std::string where;  ///< "forward layer3.1.conv2 (conv2d)", "backward fc1 (linear)", "not located"
                      ///< (no check saw one: a gradient norm that overflowed), "not checked"
};

/// The record of a log interval, kept on the device: the codes of the first bad step (a step
/// skipped, or whose loss was not finite) for forward and backward, step * 2^31 + check, read with
/// the log line's other values.
class NonFiniteWindow {
 public:
  explicit NonFiniteWindow(Device device);  ///< An empty window whose codes live on `device`.
  /// Folds in a step: its record, loss and skip flag (0-dim, on the device) and its iteration.
  void add(const NonFiniteStep& step, const Tensor& loss, const Tensor& skipped, int64_t iteration);
  /// The interval's codes: (2) float64 on the device.
  const Tensor& codes() const { return codes_; }
  /// From the codes' values as read: the interval's first bad step, if any.
  std::optional<NonFiniteReport> report(const double* codes) const;
  /// The report of a step before a checkpoint, which comes before any added after it.
  void restore(NonFiniteReport report) { restored_ = std::move(report); }

 private:
  Tensor codes_;
  std::vector<std::pair<int64_t, std::shared_ptr<const NonFiniteLabels>>> steps_;  // iteration, labels
  std::optional<NonFiniteReport> restored_;
};

}  // namespace ember::train
