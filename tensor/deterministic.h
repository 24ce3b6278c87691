/// @file
/// The deterministic mode, as torch.use_deterministic_algorithms: while it is on, every CPU result is
/// the same bits on any run, thread count and x86-64 CPU (docs/reliability.md, "Deterministic mode", says how
/// each source of variation is pinned), and CUDA kernels take deterministic algorithms or raise.
#pragma once

#include <atomic>
#include <string>

namespace ember {

namespace detail {
inline std::atomic<bool> g_deterministic{false};  // inline: the math functions read it per element
}  // namespace detail

/// Turns the deterministic mode on or off for the whole process (off by default).
void set_deterministic(bool on);
/// Whether the deterministic mode is on.
inline bool is_deterministic() { return detail::g_deterministic.load(std::memory_order_relaxed); }

/// For a kernel with no deterministic version: raises NotDeterministicError naming `op` when the
/// mode is on, as PyTorch's alertNotDeterministic does.
void alert_not_deterministic(const std::string& op);

}  // namespace ember
