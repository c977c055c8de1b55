// ZeRO-Offload's host memory domain and its optimizer check.
#include "parallel/zero/offload.h"

#include "core/error.h"

namespace tessera::parallel::zero {

Device offload_host_device(Device compute) {
  return compute.is_cpu() ? Device{DeviceType::cpu, 1} : kCPU;
}

void check_offload_optimizer(const std::string& type, const std::string& key) {
  TS_CHECK(type == "adam" || type == "adamw", "config", key, " ", type,
           " with zero.offload: the offloaded shards are stepped by the CPU Adam, which runs adam "
           "and adamw; set ",
           key, " to one of them or zero.offload to false");
}

}  // namespace tessera::parallel::zero
