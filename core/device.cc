#include "core/device.h"

#include "core/error.h"

namespace tessera {

std::string Device::str() const { return is_cpu() ? "cpu" : "cuda:" + std::to_string(index); }

Device parse_device(const std::string& s) {
  if (s == "cpu") return kCPU;
  if (s == "cuda") return cuda_device(0);
  if (s.rfind("cuda:", 0) == 0 && s.size() > 5 && s.find_first_not_of("0123456789", 5) == std::string::npos)
    return cuda_device(std::stoi(s.substr(5)));
  TS_FAIL("device", "expected \"cpu\", \"cuda\" or \"cuda:N\", got \"", s, "\"");
}

}  // namespace tessera
