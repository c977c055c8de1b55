// The checks ddp_ranks runs on every rank; each throws on failure.
#pragma once

#include <memory>
#include <string>

#include "parallel/comm/communicator.h"

namespace tessera::parallel::ddp_testing {

// Ranks start from different parameters and hold rank 0's after construction.
void check_broadcast(const std::shared_ptr<Communicator>& data);
// Five steps of data-parallel training (optimizer "sgd" or "adamw") against one process on the
// whole global batch: losses, gradients and parameters within 1e-5 relative.
void check_training(const std::shared_ptr<Communicator>& data, Communicator& world,
                    const std::string& optimizer);
// k - 1 micro-steps under no_sync then one synced == one big batch, with no traffic under no_sync.
void check_accumulation(const std::shared_ptr<Communicator>& data);
// The first bucket's all-reduce starts before the last gradient hook fires.
void check_overlap(const std::shared_ptr<Communicator>& data);
// A step moves exactly the expected all-reduce volume and nothing else.
void check_byte_counts(const std::shared_ptr<Communicator>& data);
// Parameters unused everywhere, used on some ranks only, or used only in no_sync micro-steps.
void check_unused_parameters(const std::shared_ptr<Communicator>& data);
// Misuse ends in a clear error: a second synced backward without finish_gradient_sync().
void check_errors(const std::shared_ptr<Communicator>& data);

}  // namespace tessera::parallel::ddp_testing
