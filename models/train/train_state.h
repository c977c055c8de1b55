// The trainer's checkpoints on top of models/io: which tensors go in (the model under its
// serial names, with f32 master values in mixed precision; the optimizer's state), the resume
// state in state.json, and loading all of it back with errors that name the checkpoint.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "models/io/checkpoint.h"
#include "models/nn/module.h"
#include "models/train/train_config.h"
#include "optim/mixed_precision.h"
#include "optim/optimizer.h"

namespace tessera::train {

// Every state_dict entry of `model`; parameters carry their f32 master's values (the model's own
// when it is f32), so a checkpoint is full precision whatever the training dtype.
io::NamedTensors model_checkpoint_tensors(const nn::Module& model,
                                          const optim::MasterWeights& masters);

// Loads checkpoint tensors into the model (each converted to the model tensor's dtype; strict:
// names, shapes) and, when `masters` is given, into the f32 masters. Throws ValueError
// "[checkpoint] <dir>: ..." naming the tensor on a mismatch.
void load_model_tensors(nn::Module& model, const optim::MasterWeights* masters,
                        const io::NamedTensors& tensors, const std::string& dir);

// state.json's trainer section: {"format": "tessera-train", "version": 1, "step", "config",
// "optimizer", "scaler", "rng_offset", "data", "units_seen"}.
inline constexpr const char* kTrainStateFormat = "tessera-train";

// Resolves a --checkpoint argument: a checkpoint directory itself, or a root holding step-N
// checkpoints (the latest is taken). Throws naming the path when neither.
std::string resolve_checkpoint_dir(const std::string& path);

// The training configuration stored in a checkpoint's state (TrainConfig::from_json of it).
TrainConfig checkpoint_config(const nlohmann::json& state, const std::string& dir);

// The settings that differ between a checkpoint's config and the resuming run's and break the
// promise that a resumed run equals an uninterrupted one ("train.seed 1 -> 2", ...): seed, batch
// and micro-batch size, sequence length, precision, training data and its shuffling.
std::vector<std::string> resume_differences(const TrainConfig& stored, const TrainConfig& now);

}  // namespace tessera::train
