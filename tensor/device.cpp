#include "tensor/device.h"

#include "tensor/error.h"

namespace ember {

Device Device::parse(const std::string& s) {
  if (s == "cpu") return kCPU;
  if (s == "cuda") return {DeviceType::cuda, 0};
  if (s.rfind("cuda:", 0) == 0 && s.size() > 5 && s.find_first_not_of("0123456789", 5) == std::string::npos &&
      s.size() < 9)
    return {DeviceType::cuda, std::stoi(s.substr(5))};
  throw DeviceError("unknown device '" + s + "': expected cpu, cuda or cuda:N");
}

}  // namespace ember
