#include "tensor/device.h"

#include <limits>

#include "tensor/error.h"

namespace ember {

Device Device::parse(const std::string& s) {
  if (s == "cpu") return kCPU;
  if (s == "cuda") return {DeviceType::cuda, 0};
  if (s.rfind("cuda:", 0) == 0 && s.size() > 5 && s.find_first_not_of("0123456789", 5) == std::string::npos &&
      s.size() < 9) {
    const int index = std::stoi(s.substr(5));
    if (index > std::numeric_limits<int8_t>::max())  // Device::index is an int8_t
      throw DeviceError("device '" + s + "': GPU indices go up to " + std::to_string(std::numeric_limits<int8_t>::max()));
    return {DeviceType::cuda, index};
  }
  throw DeviceError("unknown device '" + s + "': expected cpu, cuda or cuda:N");
}

}  // namespace ember
