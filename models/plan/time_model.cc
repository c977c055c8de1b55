// The step-time model (see time_model.h).
#include "models/plan/time_model.h"

#include <algorithm>
#include <cmath>

#include "parallel/mesh/parallel_config.h"
#include "models/plan/schedule_cache.h"
#include "models/plan/tp_volume.h"
#include "parallel/pipeline/schedule.h"

namespace tessera::plan {
namespace {

using parallel::TensorMode;

// Whether a group of `size` ranks `stride` apart in the world crosses a node boundary.
bool crosses_nodes(const ClusterProfile& c, int size, int stride) {
  return size > 1 && int64_t(size - 1) * stride + 1 > c.devices_per_node;
}

struct Costs {
  double forward = 0, backward = 0;  // one micro-batch through the largest stage, seconds
  double tensor_seconds = 0;         // of which tensor / sequence communication
  int64_t tensor_bytes = 0, sequence_bytes = 0, pipeline_bytes = 0;  // per micro-batch
};

// The tensor group's split of the heads: 1D t, 2D and 2.5D the grid side q, 3D q^2.
double head_split(const parallel::TensorParallelConfig& tensor) {
  const double q = parallel::tensor_grid_dim(tensor);
  switch (tensor.mode) {
    case TensorMode::one_d:
      return tensor.size;
    case TensorMode::two_d:
    case TensorMode::two_point_five_d:
      return q;
    case TensorMode::three_d:
      return q * q;
  }
  return 1;
}

// One GEMM of m x k by k x n at the profile's efficiency for its size.
double gemm_seconds(const ClusterProfile& c, DType dtype, double m, double k, double n) {
  const double flops = 2 * m * k * n;
  if (flops <= 0) return 0;
  return flops / (c.peak(dtype) * c.gemm_efficiency_at(flops)) + c.launch_overhead_s;
}

double elementwise_seconds(const ClusterProfile& c, double bytes, int ops) {
  return bytes / (c.memory_bandwidth * c.elementwise_efficiency) + ops * c.launch_overhead_s;
}

// The paper's sequence parallelism per block, forward (backward alike): the ring passes this
// rank's keys and values (kv bytes) S - 1 times; all_to_all exchanges q, k, v and the output.
// bytes: what a rank sends per micro-batch, forward and backward.
double sequence_seconds(const ClusterProfile& c, const parallel::ParallelConfig& p, int64_t kv,
                        double wait, int64_t* bytes) {
  const int s = p.sequence;
  if (s == 1) return 0;
  const bool across = crosses_nodes(c, s, p.tensor.size);
  if (p.sequence_mode == parallel::sequence::SequenceAttentionMode::all_to_all) {
    *bytes = int64_t(2 * 4 * (s - 1.0) / s * double(kv / 2));
    return 4 * (c.collective_seconds(Collective::all_to_all, kv / 2, s, across) + wait);
  }
  *bytes = int64_t(2 * 2 * (s - 1) * kv);
  return (s - 1) * (c.collective_seconds(Collective::send_recv, kv, 2, across) + wait);
}

Costs micro_batch_costs(const Workload& w, const Layout& l, int64_t blocks,
                        const ClusterProfile& c, int world) {
  // Ranks sharing a node's cores: each collective also waits for peers not yet scheduled.
  const double wait = c.loaded_wait(std::min(world, c.devices_per_node));
  const parallel::ParallelConfig& p = l.parallel;
  const int t = p.tensor.size, s = p.sequence;
  const double e = double(dtype_size(w.dtype));
  const double tokens = double(l.micro_batch_size) * double(w.seq) / s;  // on this sequence rank
  const double d = double(w.d_model), hidden = double(w.mlp_hidden);
  // GEMM shapes on one rank: 1D splits the output (column) or input (row) features by t; the
  // grid modes split the rows and the features (2D / 2.5D: the rows by depth x q, features by q,
  // in q SUMMA steps; 3D: rows by q, features by q^2).
  double rows = tokens, split_k = t, steps = 1;
  if (t > 1 && p.tensor.mode != TensorMode::one_d) {
    const int q = parallel::tensor_grid_dim(p.tensor);
    const int depth = p.tensor.mode == TensorMode::two_point_five_d ? p.tensor.depth : 1;
    if (p.tensor.mode == TensorMode::three_d) {
      rows = tokens / q, split_k = double(q) * q;
    } else {
      rows = tokens / (double(depth) * q), split_k = q, steps = q;
    }
  }
  const DType dt = w.dtype;
  // Forward of one block: qkv, the projection, the MLP's two.
  double gemm = gemm_seconds(c, dt, rows, d / steps, 3 * d / split_k) * steps +
                gemm_seconds(c, dt, rows, d / split_k / steps, d) * steps +
                gemm_seconds(c, dt, rows, d / steps, hidden / split_k) * steps +
                gemm_seconds(c, dt, rows, hidden / split_k / steps, d) * steps;
  const double heads_here = double(w.n_heads) / head_split(p.tensor);
  // Scores and values: each of this rank's query rows against the whole sequence, per head here.
  const double attn_flops = 4.0 * rows * double(w.seq) * heads_here *
                            (d / double(w.n_heads)) * (w.causal ? 0.5 : 1.0);
  const double attention = attn_flops / (c.peak(dt) * c.attention_efficiency) + c.launch_overhead_s;
  // Element-wise traffic: LayerNorms, GELU, residual adds, dropout, copies (about 12 passes over
  // the residual width and 3 over the hidden width, read and written).
  const double width = d / (t > 1 && p.tensor.mode != TensorMode::one_d ? split_k : 1);
  const double ew_bytes = rows * (12 * width + 3 * hidden / split_k) * e * 2;
  const double elementwise = elementwise_seconds(c, ew_bytes, 14);
  const double block_forward = gemm + attention + elementwise;

  // Tensor-parallel communication per block: the collectives each mode's layers issue
  // (tp_volume.h, whose counts the layers' byte counters check), their calls at the group's
  // latency and their bytes at its bandwidth; half forward, half backward.
  Costs out;
  double tensor_fw = 0;
  if (t > 1) {
    const int q = parallel::tensor_grid_dim(p.tensor);
    SchemeLayout scheme{p.tensor.mode, true, q, p.tensor.mode == TensorMode::two_point_five_d
                                                    ? p.tensor.depth
                                                    : 1};
    // A mode's groups: 1D's is the whole tensor group, the grid's rows and columns hold q ranks.
    const int group = p.tensor.mode == TensorMode::one_d ? t : q;
    const bool across = crosses_nodes(c, t, 1);
    const VolumePlan v = p.tensor.mode == TensorMode::one_d
                             ? plan_1d_block(l.micro_batch_size, w.seq / s, w.d_model, t)
                             : plan_block(scheme, l.micro_batch_size, w.seq / s, w.d_model);
    const double bytes = double(v.sent_bytes) * e / 4.0;  // the plan counts f32
    const LinkCost link = across ? c.inter_node : c.intra_node_cost(Collective::all_gather, group);
    const double calls = double(v.forward_calls + v.backward_calls);
    const double steps = double(ring_shape(Collective::all_gather, group).steps);
    tensor_fw = (calls * (steps * link.latency_s + wait) + bytes / link.bandwidth) / 2;
    out.tensor_bytes = int64_t(bytes);
  }
  const double sequence_fw = sequence_seconds(c, p, int64_t(2 * tokens * d / t * e), wait,
                                              &out.sequence_bytes);
  const double block_comm = tensor_fw + sequence_fw;
  const double recompute = l.checkpoint ? block_forward + block_comm : 0.0;
  out.tensor_bytes *= blocks, out.sequence_bytes *= blocks;  // per block so far
  out.forward = double(blocks) * (block_forward + block_comm);
  out.backward = double(blocks) * (2 * block_forward + block_comm + recompute);
  out.tensor_seconds = double(blocks) * 3 * block_comm;
  // The head on the last stage: the logits' GEMM and cross-entropy's passes (vocab split as the
  // layers split it), the embeddings on the first; the slowest stage carries the larger of them.
  const double outputs = tokens * double(w.outputs_per_sample) / double(w.seq);
  const double vocab = double(w.vocab) / (t > 1 ? (p.tensor.mode == TensorMode::one_d ? t : split_k) : 1);
  const double head = gemm_seconds(c, dt, outputs, d / (p.tensor.mode == TensorMode::one_d ? 1 : split_k), vocab) +
                      elementwise_seconds(c, outputs * vocab * 4 * 3, 4);
  out.forward += head;
  out.backward += 2 * head;
  if (p.pipeline > 1) {
    const int64_t a = int64_t(tokens * d * e / (t > 1 && p.tensor.mode != TensorMode::one_d ? t : 1));
    const bool across = crosses_nodes(c, 2, p.data * s * t);
    const double hop = c.collective_seconds(Collective::send_recv, a, 2, across) + wait;
    out.forward += hop, out.backward += hop;
    out.pipeline_bytes = 2 * a;
  }
  // What the blocks and the micro-batch cost beyond their FLOPs and bytes (measured on the host),
  // split evenly between forward and backward.
  const double overhead = double(blocks) * c.block_overhead_s + c.micro_batch_overhead_s;
  out.forward += overhead / 2, out.backward += overhead / 2;
  // Ranks sharing a node's cores run at a fraction of a core each.
  const int on_node = std::min(world, c.devices_per_node);
  const double slow = 1.0 / c.compute_share(on_node);
  out.forward *= slow, out.backward *= slow;
  return out;
}

}  // namespace

StepTime step_time(const Workload& w, const Layout& l, int micro_batches, int64_t blocks_per_stage,
                   int64_t local_parameters, const ClusterProfile& c, int world) {
  const parallel::ParallelConfig& p = l.parallel;
  const Costs mb = micro_batch_costs(w, l, blocks_per_stage, c, world);
  StepTime out;
  double pipeline_seconds = 0;
  if (p.pipeline > 1) {
    parallel::pipeline::ScheduleSpec spec{p.pipeline_options.schedule, p.pipeline,
                                          p.pipeline_options.virtual_stages, micro_batches};
    const double v = double(spec.virtual_stages);
    parallel::pipeline::SimulationCosts costs{mb.forward / v, mb.backward / v,
                                              mb.backward / v / 2, mb.backward / v / 2};
    const PipelineTime t = pipeline_time(spec, costs);
    pipeline_seconds = t.makespan;
    out.bubble = t.bubble;
  } else {
    pipeline_seconds = micro_batches * (mb.forward + mb.backward);
  }
  const double e = double(dtype_size(w.dtype));
  const double grad_bytes = double(local_parameters) * e;
  // Data-parallel / ZeRO reductions over the data group (stride sequence x tensor), started from
  // backward's gradient hooks: all but the last micro-batch's backward hides them.
  double reduce = 0, gather = 0;
  // Gradients are reduced over the replicas: the data x sequence group (stride: the tensor size).
  const int dp = p.data * p.sequence;
  if (dp > 1) {
    const bool across = crosses_nodes(c, dp, p.tensor.size);
    const int stage = int(l.zero.stage);
    if (stage <= 1) {
      reduce = c.collective_seconds(Collective::all_reduce, int64_t(grad_bytes), dp, across);
      out.bytes_per_rank.push_back({"data", int64_t(2.0 * (dp - 1) / dp * grad_bytes)});
    } else {
      reduce = c.collective_seconds(Collective::reduce_scatter, int64_t(grad_bytes), dp, across);
      out.bytes_per_rank.push_back({"data", int64_t(1.0 * (dp - 1) / dp * grad_bytes)});
    }
    if (stage >= 1) {
      // The updated shards gathered back (stage 3: gathered in forward and backward instead).
      const int gathers = stage == 3 ? 2 : 1;
      gather = gathers * c.collective_seconds(Collective::all_gather, int64_t(grad_bytes), dp, across);
      out.bytes_per_rank.back().second += int64_t(gathers * (dp - 1.0) / dp * grad_bytes);
    }
  }
  const double hidden_by = mb.backward * 0.8;
  const double exposed = std::max(0.0, reduce - hidden_by);
  // The optimizer: a memory-bound pass over the shard (parameter, gradient, m, v read and
  // written), or the host's Adam under offload.
  const double elements = double(local_parameters) / (l.zero.stage >= 1 ? dp : 1);
  double optimizer = 0;
  if (l.zero.offload && l.zero.stage >= 1 && c.host_adam_params_per_s > 0)
    optimizer = elements / c.host_adam_params_per_s;
  else
    optimizer = elementwise_seconds(c, elements * (4 + 4 + 8 + 8 + 4), 4);
  optimizer /= c.compute_share(std::min(world, c.devices_per_node));
  // The step's own collectives on a shared node: the gradient buckets' reductions, the agreed
  // loss, the gradient norm's sums and the step's agreed checks (about four).
  const double buckets =
      dp > 1 ? std::ceil(grad_bytes / (l.zero.bucket_mb * 1024 * 1024)) + (l.zero.stage >= 1) : 0;
  const double waits = (buckets + 4) * c.loaded_wait(std::min(world, c.devices_per_node));
  out.seconds = pipeline_seconds + exposed + gather + optimizer + waits;
  out.parts = {{"compute", pipeline_seconds * (1 - out.bubble)},
               {"pipeline_bubble", pipeline_seconds * out.bubble},
               {"tensor_sequence_comm", micro_batches * mb.tensor_seconds},
               {"data_comm_exposed", exposed + gather},
               {"shared_core_waits", waits},
               {"optimizer", optimizer}};
  if (mb.tensor_bytes > 0) out.bytes_per_rank.push_back({"tensor", mb.tensor_bytes * micro_batches});
  if (mb.sequence_bytes > 0)
    out.bytes_per_rank.push_back({"sequence", mb.sequence_bytes * micro_batches});
  if (mb.pipeline_bytes > 0)
    out.bytes_per_rank.push_back({"pipeline", mb.pipeline_bytes * micro_batches});
  return out;
}

}  // namespace tessera::plan
