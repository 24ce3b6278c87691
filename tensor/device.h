// Where a tensor's memory lives: the host, or CUDA device N.
#pragma once

#include <cstdint>
#include <string>

namespace ember {

enum class DeviceType : uint8_t { cpu, cuda };

struct Device {
  DeviceType type = DeviceType::cpu;
  int8_t index = 0;

  constexpr Device() = default;
  constexpr Device(DeviceType t, int i = 0) : type(t), index(static_cast<int8_t>(i)) {}
  // Parses "cpu", "cuda", "cuda:1"; raises DeviceError on anything else.
  static Device parse(const std::string& s);
  bool is_cpu() const { return type == DeviceType::cpu; }
  bool is_cuda() const { return type == DeviceType::cuda; }
  std::string str() const { return is_cpu() ? "cpu" : "cuda:" + std::to_string(index); }
  friend bool operator==(Device a, Device b) { return a.type == b.type && a.index == b.index; }
};

inline constexpr Device kCPU{};

}  // namespace ember
