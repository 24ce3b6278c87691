/// @file
/// Thread-local switches of the autograd recorder: grad mode (NoGradGuard / EnableGradGuard) and
/// anomaly mode (DetectAnomalyGuard), which checks every op's outputs for non-finite values.
#pragma once

namespace ember::autograd {

/// Grad mode, per thread: while it is on (the default), ops on tensors that require grad record
/// themselves for backward.
class GradMode {
 public:
  static bool is_enabled();               ///< Whether this thread records ops.
  static void set_enabled(bool enabled);  ///< Turns recording on or off for this thread.
};

/// Anomaly mode, per thread (off by default): see DetectAnomalyGuard.
class AnomalyMode {
 public:
  static bool is_enabled();               ///< Whether this thread checks ops for non-finite values.
  static void set_enabled(bool enabled);  ///< Turns the checks on or off for this thread.
};

/// Sets grad mode for its lifetime and restores the previous mode on destruction.
class GradModeGuard {
 public:
  /// Sets grad mode to `enabled`.
  explicit GradModeGuard(bool enabled) : prev_(GradMode::is_enabled()) { GradMode::set_enabled(enabled); }
  ~GradModeGuard() { GradMode::set_enabled(prev_); }
  GradModeGuard(const GradModeGuard&) = delete;
  GradModeGuard& operator=(const GradModeGuard&) = delete;

 private:
  bool prev_;
};

/// Turns grad mode off while alive (torch.no_grad): nothing is recorded, as for evaluation or
/// in-place parameter updates.
class NoGradGuard : public GradModeGuard {
 public:
  NoGradGuard() : GradModeGuard(false) {}
};

/// Turns grad mode on while alive (torch.enable_grad), inside a NoGradGuard.
class EnableGradGuard : public GradModeGuard {
 public:
  EnableGradGuard() : GradModeGuard(true) {}
};

/// Sets anomaly mode for its lifetime and restores the previous mode on destruction.
class AnomalyModeGuard {
 public:
  /// Sets anomaly mode to `enabled`.
  explicit AnomalyModeGuard(bool enabled) : prev_(AnomalyMode::is_enabled()) { AnomalyMode::set_enabled(enabled); }
  ~AnomalyModeGuard() { AnomalyMode::set_enabled(prev_); }
  AnomalyModeGuard(const AnomalyModeGuard&) = delete;
  AnomalyModeGuard& operator=(const AnomalyModeGuard&) = delete;

 private:
  bool prev_;
};

/// While alive, the first op whose forward produces NaN, or whose backward produces NaN or Inf,
/// raises AutogradError naming it. (A forward ±inf is legitimate: masks, log(0).) Each check reads
/// the values back to the host, so this is a debugging tool.
class DetectAnomalyGuard : public AnomalyModeGuard {
 public:
  DetectAnomalyGuard() : AnomalyModeGuard(true) {}
};

}  // namespace ember::autograd

namespace ember {
using autograd::DetectAnomalyGuard;
using autograd::EnableGradGuard;
using autograd::NoGradGuard;
}  // namespace ember
