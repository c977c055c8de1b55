// ZeRO-Offload's host side: where the f32 master shards, their gradients and the optimizer state
// live when ZeroOptions::offload is on, and which optimizers may step them there.
//
// With a CUDA device the host is the CPU (kCPU). On a CPU-only machine the compute "device" is the
// CPU as well; the host side is then CPU memory domain 1 ({cpu, 1}): the same RAM and the same
// kernels, but the allocator counts its bytes apart (memory_stats(offload_host_device(kCPU))),
// and kernels refuse operands from two domains, so what lives where is measured and enforced as
// it would be across PCIe.
#pragma once

#include <string>

#include "core/device.h"

namespace tessera::parallel::zero {

Device offload_host_device(Device compute);

// Offload steps the host shards with the CPU Adam: throws ValueError naming `key` (the config key
// of the optimizer type) unless type is adam or adamw.
void check_offload_optimizer(const std::string& type, const std::string& key);

}  // namespace tessera::parallel::zero
