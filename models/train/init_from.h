// model.init_from {"hf": DIR}: a fresh training run starts from a Hugging Face directory's weights
// (GPT-2, BERT or ViT, matching model.type) under any parallel layout. The directory's tensors are
// renamed to the serial model's state_dict() names (models/hf) and then loaded exactly as a resume
// loads a serial checkpoint's model tensors: cut to this rank's shards under tensor parallelism,
// narrowed to a pipeline stage's, into the model and the f32 masters. The optimizer starts fresh.
// A run that resumes from a checkpoint ignores init_from: the checkpoint holds later weights.
#pragma once

#include <string>

#include "models/io/safetensors.h"
#include "models/nn/module.h"
#include "models/train/sharded_state.h"
#include "models/train/train_config.h"

namespace tessera::train {

// DIR/model.safetensors under the serial model's names. DIR/config.json must be the model type of
// config.kind (gpt2 for gpt, bert, vit) with config's number of attention heads (which no tensor
// shape shows). Task heads of the file that config's model does not have (BERT: mlm., pooler.,
// classifier.; ViT: head.head.) are dropped. Throws ValueError naming DIR.
io::NamedTensors hf_init_tensors(const TrainConfig& config, const std::string& dir);

// What this rank loads from `serial` (hf_init_tensors, under a pipeline already narrowed to this
// stage's names): every tensor checked against the serial shape of model's tensor of that name
// (its placement's global shape under tensor parallelism, else its own) and cut by `placements`
// (empty: serial). The heads the file lacks keep model's current values, so a fresh classifier
// can be fine-tuned on a pretrained encoder (a tied tensor takes the value of its loaded twin).
// Throws ValueError naming the tensor and DIR for a shape mismatch, a tensor the model lacks and
// a non-head tensor the file lacks.
io::NamedTensors init_tensors_for_rank(const io::NamedTensors& serial, const nn::Module& model,
                                       ModelKind kind, const Placements& placements,
                                       const std::string& dir);

}  // namespace tessera::train
