// The model-layer checks of tp_3d_ranks (tp_3d_models.cc): collective over the cube's ranks,
// each aborting the job on a failure.
#pragma once

#include "parallel/mesh/parallel_context.h"

namespace tessera::testing3d {

// The token (vocab-parallel) and position embeddings under mode 3d against serial.
void check_embeddings(const parallel::ParallelContext& ctx);
// MultiHeadAttention3D with dropout on against serial.
void check_attention(const parallel::ParallelContext& ctx);
// A whole GPT under mode 3d (tied or untied head) against serial: loss, logits, every gradient.
void check_gpt(const parallel::ParallelContext& ctx, bool tied, double dropout);

}  // namespace tessera::testing3d
