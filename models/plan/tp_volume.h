// Tensor parallelism's communication, MPI-free (the planner's time model and `bench tp` read it): how P ranks lay out under each tensor-parallel scheme, whether
// a shape splits under it, the Colossal-AI documentation's bandwidth factor per scheme, and the
// bytes each scheme moves per rank for a transformer block and for a GPT training step,
// counted the way the communicators count them (parallel/comm/comm_types.h: a ring all-reduce
// sends and receives floor(2 (P-1) / P x payload) per call, an all-gather or reduce-scatter
// floor((P-1) / P x payload); a broadcast's root sends the payload, a reduce's non-roots send it).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "models/gpt/gpt_config.h"
#include "parallel/mesh/tensor_mode.h"

namespace tessera::plan {

// One scheme on P ranks. The Colossal-AI documentation prices communication per scheme as a
// multiple of the activation size: 1D 2(P-1)/P, 2D 6(q-1)/q (P = q^2), 2.5D 3(q-1)(d+1)/(dq)
// (P = d q^2), 3D 6(q-1)/q^3 (P = q^3).
struct SchemeLayout {
  parallel::TensorMode mode = parallel::TensorMode::one_d;
  bool fits = false;   // P ranks can be laid out this way (q >= 2 for the grid schemes)
  int q = 0;           // grid side (1D: P)
  int depth = 1;       // 2.5D's d
  double factor = 0;   // the documentation's bandwidth factor at this layout; 0 when !fits
  std::string layout;  // "P=4", "q=2", "q=2 d=2", or why it does not fit: "2 is not q^2"
};

// 1d, 2d, 2.5d, 3d, in the order the tables list them.
const std::vector<parallel::TensorMode>& tp_modes();
// 2.5D takes the largest q >= 2 with q^2 | P and d = P / q^2 (d = 1 is 2D).
SchemeLayout scheme_layout(parallel::TensorMode mode, int p);

// Bytes one rank sends (and receives) for one all-reduce of `payload` bytes on p ranks.
int64_t ring_all_reduce_bytes(int64_t payload, int p);

// The sizes a layout must split: a block's (vocab 0) or a GPT's.
struct TpDims {
  int64_t batch = 0, seq = 0, d_model = 0, heads = 0;
  int64_t vocab = 0;  // 0: no vocabulary (a block alone)
};
// "" when `layout` splits `dims`, else why not ("12 heads not divisible by P = 8"). 1D splits heads
// and C over P; 2D and 2.5D heads over q, C over q^2, the batch over d q; 3D heads over q^2, C
// over q^3, the batch over q, the vocabulary over q^2 (models/nn/parallel/*_2d.h, *_3d.h).
std::string layout_misfit(const SchemeLayout& layout, const TpDims& dims);

// What a scheme moves per rank on one step of a section, summed over its groups (1D: all-reduces
// on the tensor group; 2D / 2.5D: the grid's row, column and depth groups; 3D: the cube's input,
// weight and output groups).
struct VolumePlan {
  int64_t activation_bytes = 0;  // A: one (B, T, C) activation, f32
  int64_t exchanges = 0;         // k: activation-sized all-reduces per step, forward + backward
  int64_t forward_calls = 0, backward_calls = 0;
  int64_t payload_bytes = 0;        // summed over calls (counted once per call)
  int64_t sent_bytes = 0;           // per rank, what the counters report (received alike)
  int64_t extra_payload_bytes = 0;  // payload that is not activation-sized
  int64_t extra_sent_bytes = 0;     // its share of sent_bytes
  // Of sent_bytes, parameter blocks and their gradients (2D, 2.5D, 3D move weights; 1D never):
  // their size does not scale with B x T, which the documentation's activation factor assumes.
  int64_t param_sent_bytes = 0;
  // Collectives the layers issue on a group that no counter of the layout reads (3D: the loss's
  // row statistics on the (j, k) plane group VocabParallelLMHead3D splits off itself). Predicted
  // beside the others and kept out of the counts above, which are what the counters can show.
  int64_t uncounted_calls = 0, uncounted_payload_bytes = 0, uncounted_sent_bytes = 0;
  // False when the plan does not model the section (a GPT whose blocks have no biases or an MLP
  // other than 4C under 2D / 2.5D / 3D: plan_block's Linears are the 4C ones with biases).
  bool complete = true;
};

// One pre-LN block, forward + backward: 2 all-reduces of A forward (attention's and the MLP's
// row-parallel outputs), 2 backward (the column-parallel inputs' gradients).
VolumePlan plan_1d_block(int64_t batch, int64_t seq, int64_t d_model, int p);
// A GPT training step (loss, backward; the optimizer moves nothing): the vocab-parallel token
// embedding's all-reduce and 2 per block forward, 2 per block and the LM head's input gradient
// backward, each of A; plus the vocab-parallel cross-entropy's row statistics forward, B*T floats
// (max) and 2 B*T floats (sum-exp, target logit), the extra payload.
VolumePlan plan_1d_gpt_step(const gpt::GPTConfig& config, int64_t batch, int64_t seq, int p);

// One pre-LN block (LayerNorm, attention's fused c_attn C -> 3C and c_proj C -> C, LayerNorm, MLP
// C -> 4C -> C, every Linear with a bias; the input needs its gradient) under any fitting layout,
// forward + backward; the attention core and the residual adds move nothing. 1D: plan_1d_block.
// 2D (q x q, n = B / (d q) x T rows per rank), per Linear2D (in -> out) with x = n in / q,
// w = out / q x in / q, b = out / q floats:
//   forward   row: q broadcast steps of x; column: q broadcast steps of w, all_gather of b
//   backward  row: q reduce steps of x (dX), q broadcast steps of x (dW);
//             column: q broadcast steps of w (dX), q reduce steps of w (dW), reduce_scatter of b
// per LayerNorm2D, twice (mean and variance; weight and bias): row all_reduce of n forward and
// backward, column all_gather of C / q forward, reduce_scatter backward. 2.5D (depth d > 1) adds
// each parameter block's gradient all-reduced over the depth group backward (w, b / q, C / q^2).
// 3D (q^3, n = B / q x T), per Linear3D with x = n in / q, w = out / q x in / q, y = n out / q:
//   forward   input all_gather of x, weight all_gather of w and of the bias out / q^2,
//             output reduce_scatter of y
//   backward  output all_gather of y, input reduce_scatter of x, weight reduce_scatter of w and
//             of the bias
// per LayerNorm3D, twice: input and output all_reduce of n forward and backward, weight
// all_gather of C / q^2 forward, reduce_scatter backward. A q-step broadcast of a block of s
// bytes counts q calls, q s payload and s sent (the root's step); q reduce steps, (q - 1) s sent.
// The tests pinning each layer's volume: tests/models/nn/parallel/tp_2d_ranks.cc, tp_3d_ranks.cc.
VolumePlan plan_block(const SchemeLayout& layout, int64_t batch, int64_t seq, int64_t d_model);
// What a GPT step moves outside its blocks (the token and position embeddings, ln_f, the tied
// vocab-parallel LM head and the vocab-parallel cross-entropy), forward + backward, exchanges 2
// (the 1D count). With n rows per rank (2D / 2.5D B / (d q) x T, 3D B / q x T),
// V' = V padded to a multiple of q^2, every byte f32 and "x (q-1)/q" what a gather or scatter of q
// ranks sends (tp_volume.cc spells out each term and the layer it comes from):
//   1D    all-reduces of A (embedding forward, head input gradient backward), of B T and 2 B T
//         floats (loss statistics forward)
//   2D    embedding  reduce-scatter + all-gather of 4 B T C/q             x (q-1)/q each
//         positions  all-gather + reduce-scatter of 4 T C/q (the rows used) x (q-1)/q each
//         ln_f       one LayerNorm2D on n rows (as plan_block's)
//         LM head    (q+1) x 4 n V'/q (logit blocks) + (q+1) x 4 V'/q C/q (weight blocks)
//         loss       row all-reduces of 4 n and 8 n bytes, 4 bytes over the d q batch group
//   2.5D  2D's with B / d rows per depth layer (embedding: 4 B/d T C/q), plus over the depth
//         group backward all-reduces of the token table's block 4 V'/q C/q (once when tied:
//         the lookup and the head share its replica; twice when not) and of the position rows
//         4 T C/q^2
//   3D    embedding  all-to-all of 4 B T C/q^2 over the weight group forward and backward, and
//                    reduce-scatter + all-gather of as many bytes over the input group x (q-1)/q
//         positions  all-gather + reduce-scatter of 4 T C/q^2             x (q-1)/q each
//         ln_f       one LayerNorm3D on n rows
//         LM head    one Linear3D C -> V without a bias on n rows (as plan_block's)
//         loss       4 bytes all-reduced over the weight group; the row statistics (4 n, 8 n
//                    bytes all-reduced over the q^2 plane) in uncounted_*
// Throws tessera::ValueError unless `layout` fits.
VolumePlan plan_gpt_edges(const SchemeLayout& layout, const gpt::GPTConfig& config, int64_t batch,
                          int64_t seq);
// A GPT training step under any fitting layout: n_layers x the block plus plan_gpt_edges (1D:
// plan_1d_gpt_step). The optimizer moves nothing. complete = false where plan_block does not model
// the config's blocks (2D / 2.5D / 3D without biases or with an MLP other than 4C).
VolumePlan plan_gpt_step(const SchemeLayout& layout, const gpt::GPTConfig& config, int64_t batch,
                         int64_t seq);

// The documentation's bytes per rank for `plan`'s k activation exchanges: factor x k x A
// (0 when the layout does not fit).
double doc_bytes(const SchemeLayout& layout, const VolumePlan& plan);

}  // namespace tessera::plan
