// `bench zero --device-limit SIZE`: the largest GPT (its layer count grown at a fixed width) whose
// f32 AdamW training step keeps the device under SIZE, under ZeRO stage 3 and under stage 3 with
// zero.offload and zero.offload_params (every parameter chunk on the host), on the job's N data
// ranks. Each candidate is built and trained for real: its device peak is the allocator's, from
// before the model is built to the end of its second step.
#pragma once

#include <cstdint>
#include <memory>

#include "models/gpt/gpt_config.h"
#include "parallel/comm/communicator.h"

namespace tessera::bench {

struct DeviceLimitSearch {
  gpt::GPTConfig config;  // n_layers is what the search grows
  int64_t batch = 1, seq = 64;
  int64_t device_limit = 0;  // bytes
  int64_t max_layers = 1024;
};

// Collective over `world`; rank 0 prints the table.
void print_largest_under_limit(const DeviceLimitSearch& search,
                               const std::shared_ptr<parallel::Communicator>& world);

}  // namespace tessera::bench
