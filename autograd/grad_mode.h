// Thread-local switches of the autograd recorder: grad mode (NoGradGuard / EnableGradGuard) and
// anomaly mode (DetectAnomalyGuard), which checks every op's outputs for non-finite values.
#pragma once

namespace ember::autograd {

class GradMode {
 public:
  static bool is_enabled();
  static void set_enabled(bool enabled);
};

class AnomalyMode {
 public:
  static bool is_enabled();
  static void set_enabled(bool enabled);
};

// Sets grad mode for its lifetime and restores the previous mode on destruction.
class GradModeGuard {
 public:
  explicit GradModeGuard(bool enabled) : prev_(GradMode::is_enabled()) { GradMode::set_enabled(enabled); }
  ~GradModeGuard() { GradMode::set_enabled(prev_); }
  GradModeGuard(const GradModeGuard&) = delete;
  GradModeGuard& operator=(const GradModeGuard&) = delete;

 private:
  bool prev_;
};

class NoGradGuard : public GradModeGuard {
 public:
  NoGradGuard() : GradModeGuard(false) {}
};

class EnableGradGuard : public GradModeGuard {
 public:
  EnableGradGuard() : GradModeGuard(true) {}
};

// While alive, the first op (forward) or backward function producing NaN/Inf raises AutogradError
// naming it. Costs a device-to-host read per op: a debugging tool.
class DetectAnomalyGuard {
 public:
  DetectAnomalyGuard() : prev_(AnomalyMode::is_enabled()) { AnomalyMode::set_enabled(true); }
  ~DetectAnomalyGuard() { AnomalyMode::set_enabled(prev_); }
  DetectAnomalyGuard(const DetectAnomalyGuard&) = delete;
  DetectAnomalyGuard& operator=(const DetectAnomalyGuard&) = delete;

 private:
  bool prev_;
};

}  // namespace ember::autograd

namespace ember {
using autograd::DetectAnomalyGuard;
using autograd::EnableGradGuard;
using autograd::NoGradGuard;
}  // namespace ember
