// What a training config asks the hardware to do, independent of the layout: the model's shapes,
// the global batch, the sequence and the dtypes. The memory and time models read this, never the
// config's model sections themselves, so GPT, BERT and ViT are one shape to them.
#pragma once

#include <cstdint>

#include "core/dtype.h"
#include "models/train/train_config.h"

namespace tessera::plan {

struct Workload {
  train::ModelKind kind = train::ModelKind::gpt;
  int64_t n_layers = 0, d_model = 0, n_heads = 0, mlp_hidden = 0;
  int64_t vocab = 0;          // the output layer's width: GPT / BERT vocabulary, ViT classes
  int64_t seq = 0;            // positions per sample (ViT: patches + 1)
  int64_t outputs_per_sample = 0;  // positions the loss reads (GPT, BERT: seq; ViT: 1)
  int64_t embedding_rows = 0;  // token-table rows (GPT, BERT: vocab; ViT: none, 0)
  int64_t positions = 0;       // position-table rows
  int64_t patch_features = 0;  // ViT: channels x patch^2
  bool bias = true;
  bool tied_head = true;      // the LM head reuses the token table
  bool causal = true;
  int64_t batch = 0;          // global batch (samples per optimizer step)
  DType dtype = DType::f32;   // parameters and activations
  bool checkpoint = false;    // model.checkpoint as configured
  double optimizer_bytes = 8; // optimizer state per master element (AdamW's m and v in f32)
  // The CPU backend widens 16-bit products to f32 for the call (kernels/cpu/matmul.cc); a GPU's
  // do not. Set by the planner from the cluster (the host: true).
  bool widened_products = false;
  int64_t parameters = 0;     // counted once each
  int64_t block_parameters = 0;  // one block's

  // FLOPs of one sample's forward pass: every matmul (2 m n k), attention's scores and values
  // (causal ones at half), the head; what MFU counts (backward is twice this, recompute not
  // counted).
  double forward_flops_per_sample() const;
  // "units" of progress per sample: tokens for GPT / BERT, 1 image for ViT.
  int64_t units_per_sample() const;
};

// Throws ValueError for a custom model: the planner knows the bundled models' shapes only.
Workload workload_of(const train::TrainConfig& config);

}  // namespace tessera::plan
