// The per-rank memory model (see memory_model.h).
#include "models/plan/memory_model.h"

#include <algorithm>

#include "core/error.h"
#include "parallel/mesh/parallel_config.h"

namespace tessera::plan {
namespace {

using parallel::TensorMode;

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// How a block's tensors divide on this rank, per token of the micro-batch the rank sees.
struct BlockView {
  int64_t tokens = 0;      // tokens a block's activations hold per micro-batch on this rank
  double residual = 0;     // features per token of the residual stream and LayerNorms
  double attention = 0;    // features per token of the qkv projection's output / 3
  double hidden = 0;       // the MLP's hidden features per token
  double heads = 0;        // heads on this rank
  double ln_rows = 1;      // LayerNorm rows per token (Megatron's sequence parallelism: 1 / t)
  double vocab = 0;        // the head's logits per token
  double split = 1;        // parameters of a block divide by this (tensor layout)
  double scores = 0;       // the paper's plain ring: attention probabilities kept per token
  // 3D: each Linear3D saves its input all-gathered over the input group (q times the local
  // features) and its weight block all-gathered over the weight group (parallel/tensor/
  // matmul_3d.h): the factor on the linears' saved inputs, and the gathered weights' elements.
  double linear_inputs = 1;
  double weight_blocks = 0;
  // 2D / 2.5D: SUMMA holds two received blocks of each operand at a time (the step's and the
  // prefetched next, parallel/tensor/summa.h): in the MLP's backward, of its hidden activation.
  bool summa = false;
};

BlockView block_view(const Workload& w, const Layout& l) {
  const parallel::ParallelConfig& p = l.parallel;
  const int t = p.tensor.size;
  const int64_t tokens = l.micro_batch_size * w.seq / p.sequence;
  BlockView v{tokens, double(w.d_model), double(w.d_model), double(w.mlp_hidden),
              double(w.n_heads), 1, double(w.vocab), 1};
  // The plain ring keeps each step's probabilities, (T / S) x (T / S) per head, for every step
  // it scores: all S under full attention, (S + 1) / 2 on average under a causal mask.
  if (p.sequence > 1 && p.sequence_mode == parallel::sequence::SequenceAttentionMode::ring) {
    const double steps = w.causal ? (p.sequence + 1) / 2.0 : double(p.sequence);
    v.scores = double(w.n_heads) / t * double(w.seq) / p.sequence * steps;
  }
  if (t == 1) return v;
  const int q = parallel::tensor_grid_dim(p.tensor);
  switch (p.tensor.mode) {
    case TensorMode::one_d: {
      const double vocab_pad = double(ceil_div(w.vocab, t) * t);
      v.attention /= t, v.hidden /= t, v.heads /= t, v.vocab = vocab_pad / t, v.split = t;
      // Megatron's sequence parallelism: the residual stream in shards; the column-parallel
      // layers keep their input's shard and gather it again in backward (linear_1d.cc).
      if (p.tensor.sequence_parallel) v.residual /= t, v.ln_rows /= t;
      return v;
    }
    case TensorMode::two_d:
    case TensorMode::two_point_five_d: {
      const int depth = p.tensor.mode == TensorMode::two_d ? 1 : p.tensor.depth;
      v.tokens = tokens / (int64_t(depth) * q);
      v.residual /= q, v.attention /= q, v.hidden /= q, v.heads /= q;
      v.vocab = double(ceil_div(w.vocab, int64_t(q) * q) * q);  // (rows, V'/q) logit blocks
      v.split = double(q) * q;
      v.summa = true;
      return v;
    }
    case TensorMode::three_d: {
      v.tokens = tokens / q;
      const double q2 = double(q) * q;
      v.residual /= q2, v.attention /= q2, v.hidden /= q2, v.heads /= q2, v.vocab /= q2;
      v.split = q2 * q;
      v.linear_inputs = q;
      v.weight_blocks = double(w.block_parameters) / q2;
      return v;
    }
  }
  return v;
}

int64_t act_bytes(const Workload& w) { return int64_t(dtype_size(w.dtype)); }

// Bytes one block saves for backward besides its input (its output counted apart).
double block_saved_per_token(const BlockView& v, double e) {
  // The residual (the second LayerNorm's input), the LayerNorms' outputs as the linears after
  // them keep them, the fused qkv, attention's output and its reshaped copy (the projection's
  // input), the MLP's hidden before and after GELU (the second the output projection's input).
  const double k = v.linear_inputs;
  const double tensors = v.residual + 2 * k * v.residual + 3 * v.attention + v.attention +
                         k * v.attention + v.hidden + k * v.hidden + v.scores;
  // f32 statistics: the two LayerNorms' mean and rstd per row, attention's log-sum-exp per head.
  const double stats = 4 * v.ln_rows + v.heads;
  return tensors * e + stats * 4;
}

// Bytes the head keeps per token of a micro-batch on the last stage: ln_f's output and
// statistics, the logits, the loss's log-sum-exp and the i64 targets.
double head_saved_per_token(const Workload& w, const BlockView& v, double e) {
  const double outputs = double(w.outputs_per_sample) / double(w.seq);  // ViT: the class token
  // A vocab-parallel loss keeps per-row targets of its own (index, ownership and ignore masks,
  // losses): about 20 bytes a row more (parallel/tensor/vocab_cross_entropy.cc).
  const double rows = v.vocab < double(w.vocab) ? 20.0 : 0.0;
  return v.residual * e + 2 * 4 + outputs * (v.vocab * e + 4 + 8 + rows);
}

// What the head keeps for one micro-batch: head_saved_per_token for each token and, under 3D
// (the LM head a Linear3D), its input all-gathered and its weight block gathered.
double head_bytes(const Workload& w, const BlockView& v, double e) {
  const double n = double(v.tokens);
  double bytes = n * head_saved_per_token(w, v, e);
  if (v.linear_inputs > 1)
    bytes += n * (v.linear_inputs - 1) * v.residual * e +
             double(w.vocab) * double(w.d_model) / (v.linear_inputs * v.linear_inputs) * e;
  return bytes;
}

}  // namespace

int64_t local_parameters(const Workload& w, const Layout& l, const RankPlace& place) {
  const BlockView v = block_view(w, l);
  const double d = double(w.d_model);
  double n = double(place.blocks) * double(w.block_parameters) / v.split;
  const bool one_d = l.parallel.tensor.size > 1 && l.parallel.tensor.mode == TensorMode::one_d;
  if (one_d && w.bias) n += double(place.blocks) * 2 * d * (1 - 1 / v.split);  // row biases whole
  if (one_d) n += double(place.blocks) * 4 * d * (1 - 1 / v.split);  // LayerNorms whole
  const double table = double(w.embedding_rows) * d / v.split;
  if (place.first)
    n += table + double(w.positions) * d / (one_d ? 1 : v.split) +
         // ViT: the patch projection, its bias and the class token.
         (w.patch_features > 0 ? double(w.patch_features + 2) * d / (one_d ? 1 : v.split) : 0.0);
  if (place.last) {
    n += 2 * d / (one_d ? 1 : v.split);  // ln_f
    // A tied head shares the table on one stage; on another stage it holds a copy.
    if (!w.tied_head || !place.first)
      n += w.tied_head ? table : double(w.vocab) * (d + 1) / v.split;
  }
  return int64_t(n);
}

// Bytes of one micro-batch's activations that stay on this rank until its backward.
struct MicroBatchBytes {
  double input = 0;    // the stage's input: the embeddings' output or the received activation
  double block = 0;    // one block: what it saves besides its input, plus its output
  double head = 0;     // the last stage: the head's saved tensors
  double total(int64_t blocks) const { return input + double(blocks) * block + head; }
};

MicroBatchBytes micro_batch_bytes(const Workload& w, const Layout& l, const BlockView& v,
                                  const RankPlace& place) {
  const double e = double(act_bytes(w)), n = double(v.tokens);
  MicroBatchBytes b;
  b.input = n * v.residual * e + (place.first ? n * 8 : 0);  // + the ids (i64)
  const double own = block_saved_per_token(v, e);
  // Activation checkpointing keeps a block's input only; its saved tensors come back in backward.
  b.block = (l.checkpoint ? 0.0 : n * own + v.weight_blocks * e) + n * v.residual * e;
  if (place.last) b.head = head_bytes(w, v, e);
  return b;
}

// The peak while one micro-batch runs backward through this rank's layers, starting from `cur`
// bytes held. grads_new: no parameter gradient exists yet (the step's first backward; otherwise
// every one is held, accumulated). synced: the step's last backward, whose gradients ZeRO 2 and
// 3 reduce as they arrive.
double backward_peak(const Workload& w, const Layout& l, const BlockView& v,
                     const RankPlace& place, double cur, bool grads_new, bool synced,
                     int64_t local_params) {
  const double e = double(act_bytes(w)), n = double(v.tokens);
  const double block_grads = double(w.block_parameters) / v.split * e;
  const double head_grads = double(local_params) * e - double(place.blocks) * block_grads;
  // ZeRO 2 and 3 copy each gradient into its bucket when it is ready and release it; a bucket's
  // buffer lives from its first gradient until it is reduced (stage2_reducer.cc). The first
  // gradient ready is the head's, after the logits' gradient has come and gone. Otherwise a new
  // gradient stays in .grad (accumulating onto the one held).
  // (Under a pipeline the stage's gradients are handed over after its backward: they stay.)
  const bool into_buckets = synced && l.zero.stage >= 2 && l.parallel.pipeline == 1 &&
                            l.parallel.data * l.parallel.sequence > 1;
  // How the held gradients change as a part's backward completes.
  const auto settle = [&](double grads) {
    if (into_buckets) return grads_new ? 0.0 : -grads;  // the held ones move into the bucket
    return grads_new ? grads : 0.0;                      // new ones stay
  };
  double peak = cur;
  // A 16-bit product runs through f32 on the CPU: both operands and the result widened for the
  // call (kernels/cpu/matmul.cc).
  const auto widened = [&](double m, double k, double n_) {
    return w.dtype == DType::f32 || !w.widened_products ? 0.0 : 4.0 * (m * k + k * n_ + m * n_);
  };
  if (place.last) {
    // Cross-entropy's backward makes the logits' gradient while the logits are still held.
    const double outputs = double(w.outputs_per_sample) / double(w.seq);
    // The end of forward: the LM head's product, the logits already held.
    peak = std::max(peak, cur + widened(n * outputs, v.residual * v.linear_inputs,
                                        v.vocab * v.linear_inputs));
    // (2D: the LM head's SUMMA reduces a partial block of the logits beside them.)
    peak = std::max(peak, cur + (v.summa ? 2 : 1) * n * outputs * v.vocab * e);
    cur += -head_bytes(w, v, e) + settle(head_grads);
  }
  if (into_buckets) cur += std::min(double(local_params) * e, 2.0 * l.zero.bucket_mb * 1024 * 1024);
  const double kept = n * block_saved_per_token(v, e) + v.weight_blocks * e;  // one block's
  // The MLP's output projection's weight gradient, made before it is kept, accumulated or
  // copied into its bucket.
  const double proj = double(w.mlp_hidden) * double(w.d_model) / v.split * e;
  for (int64_t b = 0; b < place.blocks; ++b) {
    // A checkpointed block first recomputes its forward, saving what the plain one saved.
    if (l.checkpoint) cur += kept;
    // The MLP's hidden gradient of (tokens, hidden) beside its weight gradient.
    // (3D: the hidden gradient comes out of the all-gathered product, q times the local.)
    const double received =
        v.summa ? 2 * (n * v.hidden + double(w.mlp_hidden) * double(w.d_model) / v.split) * e : 0.0;
    // (16-bit: the output projection's input gradient, dY W, widened for its product.)
    peak = std::max(peak, cur + v.linear_inputs * (proj + n * v.hidden * e) + received +
                              widened(n, v.residual, v.hidden));
    // Attention's backward: the (tokens, 3 C) gradient of the fused qkv, after the MLP's saved
    // tensors and the second LayerNorm's are released.
    const double after_mlp = cur - n * (2 * v.hidden + 2 * v.residual) * e + proj;
    peak = std::max(peak, after_mlp + v.linear_inputs * n * 3 * v.attention * e);
    cur += -kept - n * v.residual * e + settle(block_grads);
  }
  return peak;
}

MemoryParts rank_memory(const Workload& w, const Layout& l, const RankPlace& place,
                        int64_t* host_bytes) {
  const BlockView v = block_view(w, l);
  const double e = double(act_bytes(w));
  // Gradients are reduced, and ZeRO shards, over the replicas: the data x sequence group (the
  // sequence ranks hold the same parameters).
  const int data = l.parallel.data * l.parallel.sequence;
  const int64_t local = local_parameters(w, l, place);
  const int64_t shard = ceil_div(local, data);
  const int stage = int(l.zero.stage);
  MemoryParts m;

  // Model states: parameters (ZeRO-3: the shard), data parallelism's flat gradient buckets, f32
  // masters and the optimizer's state (ZeRO 1-3: the shard; offload: on the host).
  m.parameters = int64_t(double(stage == 3 ? shard : local) * e);
  // ZeRO-3's gathered parameters (the one in use and those prefetched) are not counted: the
  // allocator's peaks of stage 3 (gpt-tiny and a 2-layer GPT on 2 ranks) sit within 1% of the
  // model without them, so they do not overlap backward's peak at these sizes. (An open question
  // for large layers; README "Planning a layout".)
  const double grad_bytes = double(local) * e;
  if (stage == 0 && data > 1) m.gradients += int64_t(grad_bytes);
  // ZeRO 1 all-reduces through DataParallel's buckets (a whole copy); 2 and 3 fill bucket
  // buffers during backward (backward_peak); the reduced f32 shard of the gradients appears after
  // backward, when the activations are gone.
  if (stage == 1 && data > 1) m.gradients += int64_t(grad_bytes);

  const double elements = double(stage >= 1 ? shard : local);
  // ZeRO keeps an f32 master shard whatever the dtype (the optimizer steps the flat shard,
  // shard_update.h); without ZeRO f32 parameters are their own masters.
  const double masters = w.dtype == DType::f32 && stage == 0 ? 0.0 : 4.0 * elements;
  const double state = w.optimizer_bytes * elements;
  if (l.zero.offload && stage >= 1) {
    if (host_bytes) *host_bytes = int64_t(masters + state + 4.0 * elements);
  } else {
    m.master_weights = int64_t(masters);
    m.optimizer_state = int64_t(state);
  }
  const double states = double(m.parameters + m.gradients + m.master_weights +
                               m.optimizer_state + m.comm_buffers);

  // Activations: the micro-batches in flight and the walk through backward.
  const MicroBatchBytes mb = micro_batch_bytes(w, l, v, place);
  const double per_mb = mb.total(place.blocks);
  const double n = double(v.tokens);
  // A stage's received activation is its input (counted there); a stage before the last holds
  // the received gradient of its output while its backward runs.
  const double pipe_buffers =
      l.parallel.pipeline > 1 && !place.last ? n * v.residual * e : 0.0;
  const double held = states + pipe_buffers;
  // Zero bubble: a micro-batch whose weight gradients are deferred keeps its linears' inputs
  // and output gradients until its W runs.
  const double k = v.linear_inputs;
  const double deferred_mb =
      double(place.blocks) * n * e *
      (k * (2 * v.residual + v.attention + v.hidden) + 3 * v.attention + v.hidden + 2 * v.residual);
  const bool one = place.micro_batches == 1;
  const double first = backward_peak(
      w, l, v, place, held + place.in_flight * per_mb + place.deferred_then * deferred_mb, true,
      one, local);
  double peak = first;
  if (place.micro_batches > 1) {
    // Later micro-batches run backward with every gradient already allocated.
    const double later = place.in_flight_later;
    peak = std::max(peak, backward_peak(w, l, v, place,
                                        held + later * per_mb + place.deferred_then * deferred_mb +
                                            grad_bytes,
                                        false, true, local));
  }
  if (place.deferred > 0)  // the most Ws pending, with the micro-batches in flight then
    peak = std::max(peak, backward_peak(w, l, v, place,
                                        held + place.in_flight_then * per_mb +
                                            place.deferred * deferred_mb + grad_bytes,
                                        false, true, local));
  // The batch's ids and targets (i64) for every micro-batch of the step.
  m.other = int64_t(2.0 * 8.0 * double(l.micro_batch_size) * double(w.seq) *
                    double(place.micro_batches));
  m.comm_buffers += int64_t(pipe_buffers);
  m.activations = int64_t(place.in_flight * per_mb);
  m.temporary = int64_t(peak - held - place.in_flight * per_mb);
  return m;
}

}  // namespace tessera::plan

