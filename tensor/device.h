/// @file
/// Where a tensor's memory lives: the host, or CUDA device N.
#pragma once

#include <cstdint>
#include <string>

namespace ember {

/// The kind of memory: the host, or a CUDA GPU.
enum class DeviceType : uint8_t { cpu, cuda };

/// A device: its type and, for CUDA, the GPU's index.
struct Device {
  DeviceType type = DeviceType::cpu;  ///< cpu or cuda
  int8_t index = 0;                   ///< the GPU (0 for the CPU)

  constexpr Device() = default;  ///< The CPU.
  constexpr Device(DeviceType t, int i = 0) : type(t), index(static_cast<int8_t>(i)) {}  ///< Device `i` of type `t`.
  /// Parses "cpu", "cuda", "cuda:1"; raises DeviceError on anything else.
  static Device parse(const std::string& s);
  bool is_cpu() const { return type == DeviceType::cpu; }    ///< Whether this is the host.
  bool is_cuda() const { return type == DeviceType::cuda; }  ///< Whether this is a GPU.
  std::string str() const { return is_cpu() ? "cpu" : "cuda:" + std::to_string(index); }  ///< "cpu" or "cuda:N".
  /// Same type and index.
  friend bool operator==(Device a, Device b) { return a.type == b.type && a.index == b.index; }
};

inline constexpr Device kCPU{};  ///< The host.

}  // namespace ember
