// Where a tensor lives: the CPU or one CUDA device.
#pragma once

#include <cstdint>
#include <string>

namespace tessera {

enum class DeviceType : uint8_t { cpu, cuda };

struct Device {
  DeviceType type = DeviceType::cpu;
  int index = 0;

  bool is_cpu() const { return type == DeviceType::cpu; }
  bool is_cuda() const { return type == DeviceType::cuda; }
  bool operator==(const Device&) const = default;
  std::string str() const;  // "cpu" or "cuda:1"
};

inline constexpr Device kCPU{DeviceType::cpu, 0};
inline Device cuda_device(int index = 0) { return Device{DeviceType::cuda, index}; }
// Parses "cpu", "cuda" or "cuda:N"; anything else throws.
Device parse_device(const std::string& s);

}  // namespace tessera
