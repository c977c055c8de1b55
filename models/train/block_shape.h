// The widths of a bundled model's transformer blocks, read in one place from whichever model
// section the run uses: the tensor-parallel layout checks (run_layout.cc) divide them by the
// grid or cube side.
#pragma once

#include <cstdint>
#include <optional>

#include "models/train/train_config.h"

namespace tessera::train {

struct BlockShape {
  int64_t d_model = 0;
  int64_t n_heads = 0;
  int64_t mlp_hidden = 0;  // model.mlp_hidden, or 4 x d_model where it is 0
};

// GPT's, BERT's or ViT's block; nullopt for a custom model, whose shapes are its own.
std::optional<BlockShape> block_shape(const TrainConfig& c);

}  // namespace tessera::train
