// Layout checks and resolution for a training run (see run_layout.h).
#include "models/train/run_layout.h"

#include <algorithm>
#include <cstdlib>
#include <string>
#include <thread>

#include "core/error.h"
#include "core/parallel.h"
#include "models/train/block_shape.h"
#include "parallel/zero/offload.h"
#include "parallel/zero/sharded_optimizer.h"

namespace tessera::train {
namespace {

// ZeRO stages 1-3, with or without offload, with an element-wise optimizer, on the CPU or on GPUs
// (where the data group's NCCL half moves the device shards and its MPI half the host ones), with
// or without a pipeline (each stage shards its own chunks' parameters over its data group).
void check_zero_supported(const TrainConfig& c) {
  const ZeroSection& z = c.zero;
  if (z.stage == 0) return;
  parallel::zero::check_zero_optimizer(c.optimizer.value("type", "adamw"), "optimizer.type",
                                       int(z.stage));
  if (z.offload)
    parallel::zero::check_offload_optimizer(c.optimizer.value("type", "adamw"), "optimizer.type");
}

// The model's blocks (model.n_layers), which the pipeline's stages divide.
int64_t model_blocks(const TrainConfig& c) {
  switch (c.kind) {
    case ModelKind::gpt:
      return c.gpt.n_layers;
    case ModelKind::bert:
      return c.bert.n_layers;
    case ModelKind::vit:
      return c.vit.n_layers;
    case ModelKind::custom:
      break;
  }
  return 0;
}

// The side q of mode 2d's grid (parallel.tensor.size = q * q) or of each of mode 2.5d's depth
// layers (size = depth * q * q), checked by ParallelConfig.
int grid_side(const parallel::ParallelConfig& p) { return parallel::tensor_grid_dim(p.tensor); }

// "parallel.tensor.mode 2d on a 2 x 2 grid" or "... mode 2.5d on a 2 x 2 grid of depth 2".
std::string grid_text(const parallel::ParallelConfig& p) {
  const int q = grid_side(p);
  std::string s = str_cat("parallel.tensor.mode ", p.tensor.mode) + " on a " + std::to_string(q) +
                  " x " + std::to_string(q) + " grid";
  if (p.tensor.mode == parallel::TensorMode::two_point_five_d)
    s += " of depth " + std::to_string(p.tensor.depth);
  return s;
}

// Mode 2d cuts the batch over the q grid rows, the features and heads over the q grid columns and
// every vector parameter (biases, LayerNorm weights) over all q^2 ranks; the vocabulary is padded.
// Mode 2.5d does the same on each of its depth layers (the batch cut over the layers first).
void check_2d(const TrainConfig& c) {
  const int q = grid_side(c.parallel);
  const int64_t q2 = int64_t(q) * q;
  const std::string on_grid = grid_text(c.parallel);
  // A custom model: not called (check_supported leaves its shapes to its layers).
  const std::optional<BlockShape> shape = block_shape(c);
  if (!shape) return;
  const int64_t d = shape->d_model, heads = shape->n_heads, hidden = shape->mlp_hidden;
  TS_CHECK(d % q2 == 0, "config", on_grid, ": expected model.d_model ", d,
           " divisible by q^2 = ", q2,
           " (the features split over the grid columns, biases and LayerNorm weights over all ", q2,
           " ranks)");
  TS_CHECK(heads % q == 0, "config", on_grid, ": expected model.n_heads ", heads,
           " divisible by q = ", q, " (each grid column computes n_heads / q heads)");
  TS_CHECK(hidden % q2 == 0, "config", on_grid,
           ": expected the MLP's hidden size (model.mlp_hidden, or 4 x d_model) ", hidden,
           " divisible by q^2 = ", q2);
  if (c.kind == ModelKind::vit) {
    const int64_t patch = c.vit.in_channels * c.vit.patch_size * c.vit.patch_size;
    TS_CHECK(patch % q == 0, "config", on_grid, ": expected a patch's features (model.in_channels ",
             c.vit.in_channels, " x model.patch_size ", c.vit.patch_size, "^2 = ", patch,
             ") divisible by q = ", q);
  }
}

// Mode 1d splits the heads, attention's and the MLP's hidden features over the tensor group (the
// layers refuse the same when built; checked here so a plan and a run refuse alike, before any
// rank builds anything).
void check_1d(const TrainConfig& c) {
  const int64_t t = c.parallel.tensor.size;
  const std::optional<BlockShape> shape = block_shape(c);
  if (!shape) return;
  const std::string on = str_cat("parallel.tensor.mode 1d over ", t, " ranks");
  TS_CHECK(shape->n_heads % t == 0, "config", on, ": expected model.n_heads ", shape->n_heads,
           " divisible by the tensor-parallel size ", t, " (parallel.tensor.size: each rank ",
           "computes n_heads / ", t, " heads)");
  TS_CHECK(shape->mlp_hidden % t == 0, "config", on,
           ": expected the MLP's hidden size (model.mlp_hidden, or 4 x d_model) ",
           shape->mlp_hidden, " divisible by the tensor-parallel size ", t,
           " (parallel.tensor.size)");
}

// Mode 3d cuts the batch over the cube side q, the features and heads in q^2 chunks, every vector
// parameter (biases, LayerNorm weights, positions' columns, ViT's class token) in q^3; the
// vocabulary is not padded (the token table is cut as a Linear3D weight, BERT's decoder bias as a
// 3D vector); ViT's patches are cut in q^2 feature chunks; a classifier's columns in q^3.
void check_3d(const TrainConfig& c) {
  const int64_t q = parallel::tensor_grid_dim(c.parallel.tensor), q2 = q * q, q3 = q2 * q;
  const std::string on_cube =
      str_cat("parallel.tensor.mode 3d on a ", q, " x ", q, " x ", q, " cube");
  // A custom model: not called (check_supported leaves its shapes to its layers).
  const std::optional<BlockShape> shape = block_shape(c);
  if (!shape) return;
  const int64_t d = shape->d_model, heads = shape->n_heads, hidden = shape->mlp_hidden;
  TS_CHECK(d % q3 == 0, "config", on_cube, ": expected model.d_model ", d,
           " divisible by q^3 = ", q3,
           " (features in q^2 chunks, LayerNorm weights and biases over all ", q3, " ranks)");
  TS_CHECK(heads % q2 == 0, "config", on_cube, ": expected model.n_heads ", heads,
           " divisible by q^2 = ", q2, " (each feature chunk computes n_heads / q^2 heads)");
  TS_CHECK(hidden % q3 == 0, "config", on_cube,
           ": expected the MLP's hidden size (model.mlp_hidden, or 4 x d_model) ", hidden,
           " divisible by q^3 = ", q3);
  if (c.kind == ModelKind::gpt) {
    TS_CHECK(c.gpt.vocab_size % q2 == 0, "config", on_cube, ": expected model.vocab_size ",
             c.gpt.vocab_size, " divisible by q^2 = ", q2,
             " (the token table and LM head are cut as a Linear3D weight)");
  } else if (c.kind == ModelKind::bert) {
    const bool decoder = c.bert.mlm_head;
    const int64_t v = c.bert.vocab_size, multiple = decoder ? q3 : q2;
    TS_CHECK(v % multiple == 0, "config", on_cube, ": expected model.vocab_size ", v,
             " divisible by ", decoder ? "q^3 = " : "q^2 = ", multiple,
             decoder ? " (the token table is cut as a Linear3D weight, the masked-LM decoder's "
                       "bias over all ranks)"
                     : " (the token table is cut as a Linear3D weight)");
  } else {
    const int64_t patch = c.vit.in_channels * c.vit.patch_size * c.vit.patch_size;
    TS_CHECK(patch % q2 == 0, "config", on_cube,
             ": expected a patch's features (model.in_channels ", c.vit.in_channels,
             " x model.patch_size ", c.vit.patch_size, "^2 = ", patch, ") divisible by q^2 = ", q2);
  }
}

// Mode 2d cuts each micro-batch over the q grid rows; mode 2.5d over its depth layers, then over
// each layer's q grid rows.
void check_2d_batch(const TrainConfig& c) {
  const int q = grid_side(c.parallel);
  const int d = c.parallel.tensor.mode == parallel::TensorMode::two_point_five_d
                    ? c.parallel.tensor.depth
                    : 1;
  const std::string over =
      d == 1 ? str_cat("the ", q, " grid rows")
             : str_cat("the ", d, " depth layers, then the ", q, " grid rows of each");
  const std::string by =
      d == 1 ? str_cat("q = ", q) : str_cat("depth x q = ", d, " x ", q, " = ", d * q);
  TS_CHECK(c.train.micro_batch_size % (int64_t(d) * q) == 0, "config", grid_text(c.parallel),
           " splits each micro-batch over ", over, ": expected train.micro_batch_size ",
           c.train.micro_batch_size, " divisible by ", by, " (train.batch_size ",
           c.train.batch_size, " over ", c.parallel.data, " data-parallel ranks)");
}

// The paper's sequence parallelism (parallel.sequence): GPT, BERT and ViT on the CPU, with data,
// pipeline and tensor parallelism (every mode) and ZeRO; the sequence (ViT: the
// class token and the patches) must split over the group, and the heads for all_to_all.
void check_sequence(const TrainConfig& c) {
  const parallel::ParallelConfig& p = c.parallel;
  const std::string what = "parallel.sequence " + std::to_string(p.sequence);
  TS_CHECK(p.tensor.size == 1 || !p.tensor.sequence_parallel, "config", what,
           " with parallel.tensor.size ", p.tensor.size, " (mode ", p.tensor.mode,
           ", sequence_parallel): Megatron's sequence parallelism and the paper's would both split "
           "the positions; set parallel.tensor.sequence_parallel to false or parallel.sequence to 1");
  TS_CHECK(c.train.device == "cpu", "config", what, " with train.device ", c.train.device,
           ": sequence parallelism runs on the CPU in this version of Tessera");
  const bool zigzag = p.layout() == parallel::sequence::SequenceLayout::zigzag;
  TS_CHECK(!zigzag || c.kind == ModelKind::gpt, "config", what,
           " with parallel.sequence.layout zigzag: zigzag balances causal attention, and ",
           c.kind == ModelKind::bert ? "BERT" : "ViT",
           " attends both ways (its padding and class token are laid out contiguously); set "
           "parallel.sequence.layout to contiguous or auto");
  // zigzag: 2S chunks, two per rank.
  const int64_t multiple = int64_t(p.sequence) * (zigzag ? 2 : 1);
  const std::string by =
      zigzag ? str_cat("2 x ", p.sequence, " = ", multiple, " (the zigzag layout's chunks)")
             : std::to_string(p.sequence);
  if (c.kind == ModelKind::vit) {
    // ViT pads a token sequence that does not split; the serial dropout masks do not fit it.
    const int64_t tokens = c.vit.num_patches() + 1;
    const int64_t padded = (tokens + p.sequence - 1) / p.sequence * p.sequence;
    TS_CHECK(tokens == padded || (c.vit.dropout == 0.0 && c.vit.attn_dropout == 0.0), "config",
             what, " splits ViT's token sequence over its ranks: num_patches + 1 = "
             "(model.image_size ", c.vit.image_size, " / model.patch_size ", c.vit.patch_size, ")^2 + 1 = ", tokens,
             " (the class token, held by rank 0, and the patches) is not divisible by ",
             p.sequence, ", so it is padded to ", padded,
             " tokens with masked keys: expected model.dropout and model.attn_dropout 0 (the "
             "serial masks are drawn over ", tokens, " tokens), got ", c.vit.dropout, " and ",
             c.vit.attn_dropout, "; or choose image_size / patch_size with (image_size / "
             "patch_size)^2 + 1 divisible by ", p.sequence);
  } else {
    TS_CHECK(c.seq_len() % multiple == 0, "config", what,
             " splits each sequence over its ranks: expected the sequence length (train.seq_len "
             "or ",
             c.kind == ModelKind::gpt ? "model.context_length" : "model.max_positions", ") ",
             c.seq_len(), " divisible by ", by);
  }
  if (c.kind == ModelKind::gpt) {
    TS_CHECK(c.gpt.context_length % multiple == 0, "config", what,
             ": expected model.context_length ", c.gpt.context_length, " divisible by ", by,
             " (generation pads its window to a multiple of it)");
  }
  const int64_t heads = c.kind == ModelKind::gpt    ? c.gpt.n_heads
                        : c.kind == ModelKind::bert ? c.bert.n_heads
                                                    : c.vit.n_heads;
  // Under tensor parallelism each rank holds a share of the heads (1D: 1 / size, 2D and 2.5D:
  // 1 / q, 3D: 1 / q^2), which all_to_all deals out over the sequence ranks.
  const int64_t q = parallel::tensor_grid_dim(p.tensor);
  const int64_t tp = p.tensor.mode == parallel::TensorMode::three_d ? q * q : q;
  TS_CHECK(p.sequence_mode != parallel::sequence::SequenceAttentionMode::all_to_all ||
               heads % (tp * p.sequence) == 0,
           "config", what,
           " in mode all_to_all moves heads between the ranks: expected model.n_heads ", heads,
           tp > 1 ? str_cat(" divisible by the tensor ranks' head split ", tp, " x ", p.sequence,
                            " = ", tp * p.sequence)
                  : str_cat(" divisible by ", p.sequence));
}

// Rejects what the config asks for but this build cannot do yet.
void check_supported(const TrainConfig& c) {
  const parallel::ParallelConfig& p = c.parallel;
  if (p.pipeline > 1) {
    TS_CHECK(c.train.device == "cpu", "config", "parallel.pipeline ", p.pipeline,
             " with train.device ", c.train.device,
             ": pipeline parallelism runs on the CPU in this version of Tessera (its transfers "
             "go over MPI); set train.device to cpu or parallel.pipeline to 1");
  }
  // A custom model's shapes are its own: its layers refuse a split they cannot make when it is
  // built (the factories' errors name the numbers).
  const bool custom = c.kind == ModelKind::custom;
  TS_CHECK(!custom || !p.tensor.sequence_parallel, "config",
           "parallel.tensor.sequence_parallel (Megatron's) splits the positions between the "
           "tensor ranks' layers, which a model given through the C++ API (model.type custom) "
           "would have to scatter and gather itself (GPT's SequenceSplit); use the paper's "
           "parallel.sequence, which such a model takes through nn::SequenceShard, or set it to "
           "false");

  if (p.tensor.size > 1) {
    if (!custom && p.tensor.mode == parallel::TensorMode::one_d) check_1d(c);
    if (!custom && (p.tensor.mode == parallel::TensorMode::two_d ||
                    p.tensor.mode == parallel::TensorMode::two_point_five_d))
      check_2d(c);
    if (!custom && p.tensor.mode == parallel::TensorMode::three_d) check_3d(c);
    // On GPUs the layers run the same code: their collectives go over the groups' NCCL halves
    // (context_world, train_device.h), their local ops over the CUDA kernels.
  }
  // ParallelConfig::validate has refused it outside 1d or with tensor size 1. The gradients of the
  // replicated parameters that see a sequence shard are summed over the tensor group in backward
  // (models/nn/parallel/sequence_1d.h), so the step and the clipping need nothing more.
  if (p.tensor.sequence_parallel) {
    if (c.kind == ModelKind::vit) {
      const int64_t tokens = c.vit.num_patches() + 1;
      TS_CHECK(tokens % p.tensor.size == 0, "config",
               "parallel.tensor.sequence_parallel splits the sequence over the tensor group: "
               "expected ViT's token sequence (num_patches + 1 = (model.image_size ",
               c.vit.image_size, " / model.patch_size ", c.vit.patch_size, ")^2 + 1 = ", tokens,
               ") divisible by parallel.tensor.size ", p.tensor.size);
    } else {
      TS_CHECK(c.seq_len() % p.tensor.size == 0, "config",
               "parallel.tensor.sequence_parallel splits the sequence over the tensor group: "
               "expected the sequence length (train.seq_len or ",
               c.kind == ModelKind::gpt ? "model.context_length" : "model.max_positions", ") ",
               c.seq_len(), " divisible by parallel.tensor.size ", p.tensor.size);
    }
    if (c.kind == ModelKind::gpt) {
      TS_CHECK(c.gpt.context_length % p.tensor.size == 0, "config",
               "parallel.tensor.sequence_parallel: expected model.context_length ",
               c.gpt.context_length, " divisible by parallel.tensor.size ", p.tensor.size,
               " (generation pads its window to a multiple of it)");
    }
  }
  // A custom model's sequence lengths are checked by its nn::SequenceShard when it runs.
  if (p.sequence > 1 && !custom) check_sequence(c);
  TS_CHECK(!custom || p.sequence == 1 || c.train.device == "cpu", "config", "parallel.sequence ", p.sequence,
           " with train.device ", c.train.device,
           ": sequence parallelism runs on the CPU in this version of Tessera");
  check_zero_supported(c);
}

}  // namespace

int64_t resolve_layout(TrainConfig& c, int world_size) {
  check_supported(c);
  parallel::ParallelConfig& p = c.parallel;
  const int others = p.pipeline * p.sequence * p.tensor.size;
  if (!c.data_size_given) {
    TS_CHECK(world_size % others == 0, "config", "parallel: the world's ", world_size,
             " ranks do not divide into pipeline x sequence x tensor = ", others);
    p.data = world_size / others;
  }
  TS_CHECK(p.world_size() == world_size, "config",
           "parallel: data x pipeline x sequence x tensor = ", p.data, " x ", p.pipeline, " x ",
           p.sequence, " x ", p.tensor.size, " = ", p.world_size(), " ranks, but the job has ",
           world_size, " (mpirun -np ", p.world_size(), ")");
  TrainSection& t = c.train;
  if (t.micro_batch_size == 0) {
    TS_CHECK(t.batch_size % p.data == 0, "config", "train.batch_size ", t.batch_size,
             " does not split over ", p.data, " data-parallel ranks");
    t.micro_batch_size = t.batch_size / p.data;
  }
  if (p.tensor.size > 1 && (p.tensor.mode == parallel::TensorMode::two_d ||
                            p.tensor.mode == parallel::TensorMode::two_point_five_d))
    check_2d_batch(c);
  if (p.tensor.size > 1 && p.tensor.mode == parallel::TensorMode::three_d) {
    const int q = parallel::tensor_grid_dim(p.tensor);
    TS_CHECK(t.micro_batch_size % q == 0, "config", "parallel.tensor.mode 3d on a ", q, " x ", q,
             " x ", q, " cube splits each micro-batch over the cube side: expected ",
             "train.micro_batch_size ", t.micro_batch_size, " divisible by q = ", q,
             " (train.batch_size ", t.batch_size, " over ", p.data, " data-parallel ranks)");
  }
  const int64_t per_step = t.micro_batch_size * p.data;
  TS_CHECK(t.batch_size % per_step == 0, "config", "train.batch_size ", t.batch_size,
           " must be a multiple of train.micro_batch_size x data ranks = ", t.micro_batch_size,
           " x ", p.data, " = ", per_step);
  const int64_t micro_batches = t.batch_size / per_step;
  // The accumulation micro-batches are the pipeline's: the schedule must be able to run them.
  if (p.pipeline > 1) {
    const parallel::PipelineOptions& pp = p.pipeline_options;
    const int v = pp.virtual_stages;
    TS_CHECK(micro_batches % parallel::pipeline::micro_batch_multiple(pp.schedule, p.pipeline) == 0,
             "config", "parallel.pipeline.schedule interleaved needs the micro-batches per step (",
             "train.batch_size ", t.batch_size, " / (train.micro_batch_size ", t.micro_batch_size,
             " x data ", p.data, ") = ", micro_batches, ") divisible by parallel.pipeline ",
             p.pipeline);
    // (A custom model's stage plan checks its own blocks: nn::PipelineStage::plan.)
    const int64_t blocks = c.kind == ModelKind::custom ? int64_t(p.pipeline) * v : model_blocks(c);
    TS_CHECK(blocks >= int64_t(p.pipeline) * v, "config", "parallel.pipeline ", p.pipeline,
             " x virtual_stages ", v, " = ", p.pipeline * v, " stages for ", blocks,
             " blocks (model.n_layers): every stage needs at least one block");
  }
  return micro_batches;
}

void set_threads(const TrainConfig& c, int world_size) {
  if (c.train.threads > 0) return set_num_threads(int(c.train.threads));
  if (std::getenv("TESSERA_NUM_THREADS")) return;
  // Ranks on one machine share its cores.
  int local = world_size;
  if (const char* env = std::getenv("OMPI_COMM_WORLD_LOCAL_SIZE"))
    local = std::max(1, std::atoi(env));
  const int cores = int(std::max(1u, std::thread::hardware_concurrency()));
  set_num_threads(std::max(1, cores / local));
}

}  // namespace tessera::train
