#include "tensor/nvtx.h"

#include <string>

#include "tensor/env_switch.h"

namespace ember::nvtx {

namespace {

Listener& listener() {
  static Listener l;
  return l;
}

const std::string kNoModule;
thread_local const std::string* t_current_module = &kNoModule;

void open(const char* name) {
  detail::push(name);
  if (const Listener& l = listener()) l(name);
}

}  // namespace

std::atomic<bool>& detail::enabled_flag() {
  static std::atomic<bool> on{env_choice("EMBER_NVTX", {"0", "1"}, "0") == "1"};
  return on;
}

void set_enabled(bool on) { detail::enabled_flag().store(on, std::memory_order_relaxed); }

void set_listener(Listener l) { listener() = std::move(l); }

Range::Range(std::string_view name, std::string_view suffix) {
  if (!enabled()) return;
  std::string full(name);
  full += suffix;
  open(full.c_str());
  open_ = true;
}

Range::~Range() {
  if (!open_) return;
  detail::pop();
  if (const Listener& l = listener()) l(nullptr);
}

ModuleScope::ModuleScope(const std::string& label) : range_(label), outer_(t_current_module) {
  t_current_module = &label;  // the caller's label outlives the scope
}

ModuleScope::~ModuleScope() { t_current_module = outer_; }

const std::string& current_module() { return *t_current_module; }

}  // namespace ember::nvtx
