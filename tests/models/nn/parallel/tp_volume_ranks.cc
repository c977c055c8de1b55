// Multi-rank program run by tp_volume_test.sh: the communication volume and the memory of 1D
// (Megatron) tensor parallelism, measured by the counters and set against predictions written out
// here, independently of the layers' code.
//
// Volume. The tensor group's counters (parallel/comm/communicator.cc) record, per collective call,
// payload_bytes = numel x element size (f32: 4 bytes), counted once whatever the algorithm, and
// bytes_sent = bytes_received = floor(2 (P-1) / P x payload) for an all-reduce: a ring's
// reduce-scatter then all-gather (collective_traffic in comm_types.cc). For one pre-LN transformer
// Block on x (B, T, C) under 1D on a tensor group of P ranks, Megatron's pairing predicts:
//   forward   2 all-reduces of B*T*C elements: the row-parallel outputs of attention's c_proj and
//             the MLP's c_proj (reduce_from_region); copy_to_region moves nothing forward;
//   backward  2 all-reduces of B*T*C elements: the gradients of the column-parallel inputs of
//             c_attn and c_fc (copy_to_region's backward), while reduce_from_region's backward
//             is the identity; replicated parameters (LayerNorms, row biases) need no reduction.
// and nothing else: no other collective kind, and nothing on the world communicator.
//
// Memory. The allocator's counters (core/allocator.h) give the bytes a GPT twin holds after it is
// built; they must equal its parameters' bytes (no hidden buffers). Of those, the sharded ones
// (c_attn, c_proj and c_fc weights, the column biases, the vocabulary table) must be the serial
// model's sharded bytes / P within 1% (exactly, when the vocabulary divides), and the replicated
// ones (LayerNorm gains and biases, the row-parallel biases, the positions) the serial amount,
// counted on their own. The block forward's activation bytes per rank (the peak during forward
// minus what was held before it: parameters and input) are printed beside the serial block's.
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "autograd/engine.h"
#include "core/allocator.h"
#include "core/factory.h"
#include "models/gpt/gpt.h"
#include "models/nn/nn.h"
#include "parallel/comm/mpi_runtime.h"
#include "parallel/mesh/parallel_context.h"
#include "tests/parallel/rank_check.h"

using namespace tessera;
using parallel::CommCounter;
using parallel::CommKind;
using parallel::CommStats;
using parallel::ParallelContext;

namespace {

constexpr int64_t kF32 = 4;  // bytes per element: every tensor here is f32

// The block of the volume check: small, with heads and hidden units divisible by 2 and 4.
constexpr int64_t kB = 2, kT = 8, kC = 32, kHeads = 4;

// What one all-reduce of `numel` f32 elements adds to the counters of a group of p ranks.
CommCounter predicted_all_reduce(int64_t numel, int p) {
  const int64_t payload = numel * kF32;
  const int64_t ring = 2 * payload * (p - 1) / p;  // reduce-scatter + all-gather, per rank
  return {.calls = 1, .payload_bytes = payload, .bytes_sent = ring, .bytes_received = ring};
}

// Two all-reduces of B*T*C elements: what each direction (forward, backward) of the block moves.
CommCounter predicted_block_pass(int p) {
  CommCounter want;
  for (int i = 0; i < 2; ++i) want += predicted_all_reduce(kB * kT * kC, p);
  return want;
}

// Every kind other than all_reduce silent, all_reduce equal to `want`, the world silent.
void check_pass(const CommStats& got, const CommStats& world, const CommCounter& want,
                const std::string& what) {
  const CommCounter& ar = got[CommKind::all_reduce];
  RANK_CHECK(ar.calls == want.calls, what, ": all_reduce calls ", ar.calls, ", predicted ",
             want.calls);
  RANK_CHECK(ar.payload_bytes == want.payload_bytes, what, ": all_reduce payload ",
             ar.payload_bytes, " bytes, predicted ", want.payload_bytes);
  RANK_CHECK(ar.bytes_sent == want.bytes_sent && ar.bytes_received == want.bytes_received, what,
             ": all_reduce sent/received ", ar.bytes_sent, "/", ar.bytes_received,
             " bytes per rank, predicted ", want.bytes_sent, "/", want.bytes_received);
  for (int k = 0; k < parallel::kNumCommKinds; ++k) {
    if (CommKind(k) == CommKind::all_reduce) continue;
    RANK_CHECK(got.by_kind[size_t(k)].calls == 0, what, ": unexpected ",
               parallel::comm_kind_name(CommKind(k)), " calls: ", got.str());
  }
  RANK_CHECK(world.total().calls == 0, what, ": the world communicator was used: ", world.str());
}

nn::BlockSpec block_spec() {
  return {.d_model = kC, .n_heads = kHeads, .causal = true, .pre_ln = true};
}

// Activation bytes of one block forward (grad mode on) on x: the peak while it runs minus what
// was held before it (parameters, the input).
int64_t forward_activation_bytes(nn::Block& block, const Tensor& x) {
  reset_peak_memory(kCPU);
  const int64_t before = memory_stats(kCPU).current_bytes;
  Tensor y = block.forward(x);
  return memory_stats(kCPU).peak_bytes - before;
}

void check_block_volume(const ParallelContext& ctx) {
  const auto& group = ctx.tensor_group();
  const int p = group->size();
  const std::string what = str_cat("block on tp ", p, " x dp ", ctx.config().data);
  Generator gen(21);
  std::shared_ptr<nn::Block> block = nn::make_block(block_spec(), nn::BuildContext(gen, &ctx));
  Generator data(5);
  Tensor x = randn({kB, kT, kC}, {}, &data);  // (B, T, C), the same on every rank
  x.set_requires_grad(true);

  ctx.world()->barrier()->wait();
  group->reset_stats();
  ctx.world()->reset_stats();
  Tensor y = block->forward(x);  // (B, T, C)
  check_pass(group->stats(), ctx.world()->stats(), predicted_block_pass(p), what + " forward");
  group->reset_stats();
  autograd::backward({y}, {ones_like(y)});
  check_pass(group->stats(), ctx.world()->stats(), predicted_block_pass(p), what + " backward");
  RANK_CHECK(x.grad().defined(), what, ": no input gradient");

  // Activation memory: the twin's and the serial block's forward, each from a fresh graph.
  Generator g_serial(21);
  std::shared_ptr<nn::Block> serial = nn::make_block(block_spec(), nn::BuildContext(g_serial));
  Tensor xs = x.detach().clone();
  xs.set_requires_grad(true);
  const int64_t act_twin = forward_activation_bytes(*block, x);
  const int64_t act_serial = forward_activation_bytes(*serial, xs);
  RANK_CHECK(act_twin < act_serial, what, ": activations ", act_twin,
             " bytes per rank, not below the serial block's ", act_serial);
  if (ctx.rank() == 0) {
    const CommCounter per_pass = predicted_block_pass(p);
    std::printf(
        "tp volume: %s (B %lld, T %lld, C %lld, f32): forward and backward each 2 all_reduce "
        "of B*T*C (%lld bytes each) = %lld payload bytes, %lld sent + %lld received per rank "
        "(2(P-1)/P ring)\n",
        what.c_str(), static_cast<long long>(kB), static_cast<long long>(kT),
        static_cast<long long>(kC), static_cast<long long>(kB * kT * kC * kF32),
        static_cast<long long>(per_pass.payload_bytes), static_cast<long long>(per_pass.bytes_sent),
        static_cast<long long>(per_pass.bytes_received));
    std::printf("tp memory: %s forward activations %lld bytes per rank, serial %lld (ratio %.3f)\n",
                what.c_str(), static_cast<long long>(act_twin), static_cast<long long>(act_serial),
                double(act_twin) / double(act_serial));
  }
}

gpt::GPTConfig memory_gpt(int64_t vocab) {
  gpt::GPTConfig c;
  c.vocab_size = vocab;
  c.context_length = 32;
  c.n_layers = 2;
  c.n_heads = 4;
  c.d_model = 64;
  return c;
}

struct ParamBytes {
  int64_t allocated = 0;   // the allocator's current bytes added by building the model
  int64_t sharded = 0;     // bytes of the parameters the twin holds as shards
  int64_t replicated = 0;  // bytes of the parameters the twin replicates
};

// Builds the model and measures what it holds; each parameter is classed by the twin's placement
// of the same name (a serial model places every parameter whole).
template <typename Build>
ParamBytes measure_params(const Build& build, std::unique_ptr<gpt::GPT>& model,
                          const gpt::GPT* twin) {
  const int64_t before = memory_stats(kCPU).current_bytes;
  model = build();
  ParamBytes r;
  r.allocated = memory_stats(kCPU).current_bytes - before;
  const auto params = model->named_parameters();
  const auto placements = (twin ? twin : model.get())->named_placements();
  RANK_CHECK(params.size() == placements.size(), params.size(), " vs ", placements.size(),
             " parameters");
  for (size_t i = 0; i < params.size(); ++i) {
    RANK_CHECK(params[i].first == placements[i].first, "parameter ", params[i].first, " vs ",
               placements[i].first);
    const int64_t bytes = params[i].second.numel() * int64_t(params[i].second.itemsize());
    (placements[i].second.replicated() ? r.replicated : r.sharded) += bytes;
  }
  return r;
}

void check_gpt_params(const ParallelContext& ctx, int64_t vocab) {
  const int p = ctx.config().tensor.size;
  const gpt::GPTConfig c = memory_gpt(vocab);
  const std::string what = str_cat("GPT vocab ", vocab, " on tp ", p, " x dp ", ctx.config().data);
  std::unique_ptr<gpt::GPT> serial, twin;
  Generator g_serial(3), g_twin(3);
  const ParamBytes t = measure_params(
      [&] { return std::make_unique<gpt::GPT>(c, nn::BuildContext(g_twin, &ctx)); }, twin, nullptr);
  const ParamBytes s =
      measure_params([&] { return std::make_unique<gpt::GPT>(c, nn::BuildContext(g_serial)); },
                     serial, twin.get());
  RANK_CHECK(s.allocated == s.sharded + s.replicated, what, ": the serial GPT holds ", s.allocated,
             " bytes, its parameters ", s.sharded + s.replicated);
  RANK_CHECK(t.allocated == t.sharded + t.replicated, what, ": the twin holds ", t.allocated,
             " bytes, its parameters ", t.sharded + t.replicated);

  // The prediction, element by element (L layers, d_model C, positions N, vocabulary padded to
  // V_pad = ceil(V / P) * P rows, f32). Sharded per rank: c_attn (3C x C + 3C) / P, attention's
  // c_proj weight C x C / P, c_fc (4C x C + 4C) / P, the MLP's c_proj weight 4C x C / P per layer;
  // the tied table V_pad x C / P. Replicated on every rank: ln_1, ln_2 (2C each), the two row
  // biases (C each) per layer; ln_f (2C); the positions N x C.
  const int64_t L = c.n_layers, C = c.d_model, N = c.context_length;
  const int64_t v_pad = (vocab + p - 1) / p * p;
  const int64_t per_layer_sharded = (3 * C * C + 3 * C) + C * C + (4 * C * C + 4 * C) + 4 * C * C;
  const int64_t want_sharded = kF32 * (L * per_layer_sharded + v_pad * C) / p;
  const int64_t want_replicated = kF32 * (L * (2 * C + 2 * C + C + C) + 2 * C + N * C);
  RANK_CHECK(t.sharded == want_sharded, what, ": sharded ", t.sharded,
             " bytes per rank, predicted ", want_sharded);
  RANK_CHECK(t.replicated == want_replicated && s.replicated == want_replicated, what,
             ": replicated ", t.replicated, " (serial ", s.replicated, ") bytes, predicted ",
             want_replicated);
  RANK_CHECK(s.sharded == kF32 * (L * per_layer_sharded + vocab * C), what, ": serial sharded ",
             s.sharded, " bytes");
  // The bound: sharded bytes per rank = serial / P within 1% (the padding rows are extra).
  const double ratio = double(t.sharded) * p / double(s.sharded);
  RANK_CHECK(std::fabs(ratio - 1.0) <= 0.01, what,
             ": sharded bytes per rank x P / serial = ", ratio);
  if (ctx.rank() == 0)
    std::printf(
        "tp memory: %s parameters per rank %lld bytes (allocator) = sharded %lld (serial %lld / P "
        "= %.1f, ratio %.5f) + replicated %lld (LayerNorms, row biases, positions)\n",
        what.c_str(), static_cast<long long>(t.allocated), static_cast<long long>(t.sharded),
        static_cast<long long>(s.sharded), double(s.sharded) / p, ratio,
        static_cast<long long>(t.replicated));
}

}  // namespace

int main(int argc, char** argv) {
  return parallel::run_distributed(
      argc, argv, [](const std::shared_ptr<parallel::Communicator>& world) {
        const int n = world->size();
        std::vector<std::pair<int, int>> layouts = {{n, 1}};  // (tensor, data)
        if (n == 4) layouts.push_back({2, 2});
        for (const auto& [tp, dp] : layouts) {
          parallel::ParallelConfig config;
          config.data = dp;
          config.tensor.size = tp;
          config.tensor.mode = parallel::TensorMode::one_d;
          ParallelContext ctx(config, world);
          check_block_volume(ctx);
          check_gpt_params(ctx, 1024);  // divides every split: exactly serial / P
          check_gpt_params(ctx, 1001);  // padded to a multiple of P
        }
        world->barrier()->wait();
        if (world->rank() == 0)
          std::printf("tp volume and memory: %zu layouts on %d ranks (%lld checks on rank 0)\n",
                      layouts.size(), n,
                      static_cast<long long>(parallel::testing::checks_passed()));
        return 0;
      });
}
