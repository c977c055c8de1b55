// The trainer's one JSON configuration: sections model, parallel, zero, precision, optimizer,
// schedule, train, data, checkpoint, logging. Reading is strict (unknown keys are errors naming
// the full key path, values are type- and range-checked) and `--set a.b=c` overrides edit the JSON
// before it is read, so they get the same checks.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "models/bert/bert_config.h"
#include "models/gpt/gpt_config.h"
#include "models/vit/vit_config.h"
#include "optim/loss_scaler.h"
#include "optim/lr_schedule.h"
#include "parallel/mesh/parallel_config.h"
#include "parallel/zero/param_placement.h"

namespace tessera::train {

// custom: a model given through the C++ API (train::Engine with a ModelRecipe, engine.h).
enum class ModelKind { gpt, bert, vit, custom };
const char* model_kind_name(ModelKind kind);

struct ZeroSection {
  // 0: none; 1: optimizer state and f32 masters sharded over the data-parallel ranks; 2: also the
  // gradients (reduce-scattered); 3: also the parameters (gathered on use).
  int64_t stage = 0;
  bool offload = false;  // stages 1-3: masters and optimizer state on the host (parallel/zero/offload.h)
  // Offload at stages 2-3: the host steps each reduced shard range during backward
  // (ShardedOptimizer's overlapped step); needs train.grad_clip 0 and no f16 loss scaling.
  bool overlap_step = false;
  // Stages 1-3: bytes per gradient bucket (stage 1 all-reduces, stages 2-3 reduce to the owners),
  // in MiB: smaller buckets start reducing earlier in backward.
  double bucket_mb = 25;
  // Stage 3 only (an error with another stage): parameters gathered ahead along the first step's
  // order, and parameters kept gathered at once (parallel/zero/stage3_params.h).
  int64_t prefetch = 1;
  int64_t live_params = 4;
  // Stage 3 only: the model is built so that no rank holds it whole: each parameter leaves this
  // rank's pieces in its shards as it is drawn and is released (parallel/zero/sharded_build.h),
  // after a probing build that finds the layout. false: built whole, then sharded.
  bool sharded_init = true;
  // Stage 3 with offload: the parameter shards too, in chunks of chunk_mb (0: the size that wastes
  // least, searched) placed on the device or the host (parallel/zero/param_placement.h): "static"
  // puts offload_param_frac of them on the host; "auto" traces the first step and keeps on the device what fits under
  // device_memory_limit (bytes; "8G" in the file).
  bool offload_params = false;
  parallel::zero::PlacementPolicy placement = parallel::zero::PlacementPolicy::static_share;
  double offload_param_frac = 1.0;
  int64_t device_memory_limit = 0;
  double chunk_mb = 0;
};

struct PrecisionSection {
  std::string dtype =
      "f32";  // "f32", "bf16" (f32 master weights) or "f16" (+ dynamic loss scaling)
  optim::LossScalerOptions loss_scale;  // f16 only
  // f16: this many steps in a row skipped by the loss scaler stop the run as diverged (0: never).
  // Backing off from 2^16 to 1 takes 16; a high init_scale takes a few more.
  int64_t skip_limit = 50;
};

struct TrainSection {
  int64_t steps = 100;           // optimizer steps
  int64_t batch_size = 8;        // global: sequences (or images) per optimizer step, all ranks
  int64_t micro_batch_size = 0;  // per rank per forward; 0: batch_size / data ranks
  int64_t seq_len = 0;           // GPT/BERT tokens per sequence; 0: the model's context
  uint64_t seed = 1234;
  double grad_clip = 1.0;       // global-norm clipping; 0: off
  int64_t eval_every = 0;       // 0: evaluate only at the end
  int64_t eval_batches = 4;     // micro-batches per rank per evaluation
  int64_t threads = 0;          // CPU threads per rank; 0: TESSERA_NUM_THREADS or cores / ranks
  int64_t sample_tokens = 200;  // GPT: tokens generated at the end (0: none)
  std::string sample_prompt = "the ";
  double sample_temperature = 0.8;
  int64_t sample_top_k = 0;
  // "cpu", "cuda" (each rank takes cuda:(local rank % devices)) or "cuda:N" (train_device.h).
  std::string device = "cpu";
  // train.profile {"steps": [first, last], "path": "trace.json"}: steps first..last (1-based,
  // inclusive) are recorded by core/profiler.h; each rank writes a Chrome trace (path, with
  // ".rankN" before the extension when there are several ranks) and rank 0 prints the time per op
  // family. profile_first 0: off.
  int64_t profile_first = 0, profile_last = 0;
  std::string profile_path = "trace.json";
};

struct DataSection {
  std::string path;      // token file (models/data format); empty: the built-in generated data
  std::string val_path;  // token file for evaluation; empty with a path: no evaluation
  // The layout of path and val_path (models/data/token_format.h): "tessera" (ours), "llmc"
  // (llm.c's: 1024-byte header, u16 ids) or "u16" (nanoGPT's raw u16 ids).
  std::string format = "tessera";
  // llmc / u16 only (they record no vocabulary): every id is below it; 0 (unset) means
  // model.vocab_size (BERT: one less, the last id being [MASK]).
  int64_t vocab_size = 0;
  bool shuffle = true;
  std::string tokenizer = "byte";  // decodes samples: "byte" or "gpt2" (with vocab and merges)
  std::string vocab;
  std::string merges;
  int64_t builtin_tokens = 1 << 20;  // size of the generated training text
  int64_t builtin_val_tokens = 1 << 16;
  double mask_prob = 0.15;         // BERT: fraction of positions masked (80/10/10)
  int64_t builtin_images = 50000;  // ViT: images per epoch of the generated set
  double image_noise = 0.5;        // ViT: std of the Gaussian noise on the images
  // ViT image data (README "Image data"): "" (the built-in images), "cifar10" (binary files
  // under path) or "image_folder" (root/<class>/<image> folders train and val).
  std::string type;
  std::string train;             // image_folder: the training root
  std::string val;               // image_folder: the evaluation root; empty: no evaluation
  bool skip_bad_images = false;  // image_folder: skip undecodable files with a warning
  int64_t crop_padding = 0;      // training images: random crop after padding; 0: off
  bool hflip = false;            // training images: random horizontal flip
};

struct CheckpointSection {
  std::string dir;     // root of step-NNNNNNNN checkpoints; empty: none
  int64_t every = 0;   // save every N steps (and at the end); 0: only at the end (with a dir)
  bool resume = true;  // start from the latest checkpoint under dir when there is one
  int64_t keep = 0;    // keep the newest N checkpoints; 0: keep all
  // With resume false, a dir that holds checkpoints is refused unless overwrite is true (then its
  // checkpoints are deleted before the first save, so two runs never mix).
  bool overwrite = false;
  int64_t resume_step = 0;  // resume from step-N exactly (0: the latest, which must be intact)
  // "serial": rank 0 writes the gathered serial model (model.safetensors, optimizer.safetensors).
  // "sharded": every rank writes the pieces it owns (pieces-RRRRR.safetensors) in parallel and an
  // index maps each serial tensor to its pieces (models/io/piece_checkpoint.h); any layout resumes
  // either format, and eval / generate read both. Serial stays the default so a checkpoint is one
  // file other tools read; sharded is what a model too large for one rank's memory needs.
  std::string format = "serial";
};

struct LoggingSection {
  std::string metrics;     // JSON-lines metrics file (rank 0); empty: none
  int64_t log_every = 10;  // progress lines (and metrics records) every N steps
  bool progress = true;
};

struct TrainConfig {
  ModelKind kind = ModelKind::gpt;
  // model.init_from {"hf": DIR}: a fresh run starts from this Hugging Face directory's weights
  // (init_from.h); empty: from the seed's initialisation. A resumed run ignores it.
  std::string init_from_hf;
  gpt::GPTConfig gpt;  // the one matching `kind` is set
  bert::BertConfig bert;
  vit::ViTConfig vit;
  nlohmann::json custom;  // model.type custom: the model section but its type, for the recipe
  parallel::ParallelConfig parallel;
  bool data_size_given = false;  // parallel.data was set; otherwise it fills the world
  // "parallel": "auto": the layout (the parallel section, ZeRO's stage and offload, the
  // micro-batch, activation checkpointing) is the planner's fastest that fits the world the run
  // is launched with (models/train/auto_layout.h); `parallel` holds it once chosen.
  bool parallel_auto = false;
  ZeroSection zero;
  PrecisionSection precision;
  nlohmann::json optimizer;  // make_optimizer's input, validated
  double weight_decay = -1;  // optimizer.weight_decay, or -1 when absent (the optimizer's default)
  optim::LrScheduleOptions schedule;  // total_steps defaults to train.steps
  TrainSection train;
  DataSection data;
  CheckpointSection checkpoint;
  LoggingSection logging;
  nlohmann::json source;  // the whole configuration as read (after overrides)

  // Throws ValueError "[config] <what>: ..." naming the full key path of the problem.
  static TrainConfig from_json(const nlohmann::json& j);
  // The sequence length GPT/BERT train on (train.seq_len or the model's context); a custom
  // model's train.seq_len (0 when unset).
  int64_t seq_len() const;
};

// An unset parallel.sequence.layout ("auto") resolved for the model: zigzag for GPT under
// ring_flash, contiguous otherwise.
void resolve_sequence_layout(TrainConfig& c);

// The file as JSON. A missing file or bad JSON throws ValueError naming the file (and the line and
// column of a parse error).
nlohmann::json read_config_file(const std::string& path);

// Applies "a.b.c=value" to j: value is JSON (number, true, [1, 2], ...) unless the key currently
// holds a string or value does not parse, in which case it is the text itself. Missing objects
// on the path are created; a path through a non-object is an error naming it.
void apply_override(nlohmann::json& j, const std::string& assignment);

// read_config_file + apply_override for each + TrainConfig::from_json, every error prefixed with
// the file name: "[config] tools/configs/gpt-tiny.json: unknown key 'train.stpes' ...".
TrainConfig load_train_config(const std::string& path, const std::vector<std::string>& overrides);

// The message of an exception without the "rank N: " prefix Tessera's errors carry.
std::string error_text(const std::exception& e);

}  // namespace tessera::train
