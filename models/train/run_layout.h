// The layout a training run asks for, checked and resolved before anything is built: what this
// version can do (refusals name the keys to change), parallel.data filled from the world, the
// micro-batch and the gradient-accumulation steps, and the CPU threads per rank.
#pragma once

#include <cstdint>

#include "models/train/train_config.h"

namespace tessera::train {

// Checks `c` against this version's features and the world size, fills parallel.data and
// train.micro_batch_size when left out, and returns the gradient-accumulation steps. Throws
// ValueError "[config] ..." naming the keys.
int64_t resolve_layout(TrainConfig& c, int world_size);

// train.threads, else TESSERA_NUM_THREADS, else the cores shared by the ranks on this machine.
void set_threads(const TrainConfig& c, int world_size);

}  // namespace tessera::train
