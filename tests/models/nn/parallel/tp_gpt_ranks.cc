// Multi-rank program run by tp_layers_test.sh: the 1D tensor-parallel twins against their serial
// layers from the same seed. Every rank builds the serial layer and its twin; outputs must match
// and every gradient, gathered by its placement, must match the serial one (1e-5 relative), with
// and without dropout, for odd vocabularies (padded) and with data parallelism beside; all of it
// again with sequence parallelism (parallel.tensor.sequence_parallel), whose activation bytes per
// rank (the allocator's counters) are printed beside those without and must be smaller. BERT
// (post-LN, key-padding mask, masked-LM and classification heads) and ViT (class token) twins
// likewise, sequence parallel too: their loss and every gradient equal the serial model's.
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>

#include "autograd/engine.h"
#include "autograd/grad_mode.h"
#include "autograd/ops.h"
#include "core/allocator.h"
#include "core/factory.h"
#include "models/bert/bert.h"
#include "models/gpt/gpt.h"
#include "models/nn/nn.h"
#include "models/vit/vit.h"
#include "parallel/comm/mpi_runtime.h"
#include "parallel/mesh/parallel_context.h"
#include "parallel/tensor/placement_ops.h"
#include "tests/models/nn/parallel/twin_checks.h"
#include "tests/models/nn/parallel/twin_fixture.h"
#include "tests/models/nn/parallel/twin_models.h"
#include "tests/parallel/rank_check.h"

using namespace tessera;
using parallel::ParallelContext;

using namespace parallel::testing;  // the twin fixture (twin_*.h) and RANK_CHECK's counter

namespace {

// Every parameter of `twin` gathered by placement against `serial`'s: the value equal to the
// serial draw, the gradient within the twin tolerance (norms and biases may be replicated).
void check_grads(const nn::Module& twin, const nn::Module& serial, const ParallelContext& ctx,
                 const std::string& what) {
  check_params(twin, serial, ctx, what, /*replicated_ok=*/true);
}

std::string layout_name(const ParallelContext& ctx) {
  return str_cat(" on tp ", ctx.config().tensor.size, " x dp ", ctx.config().data,
                 ctx.config().tensor.sequence_parallel ? " sequence parallel" : "");
}

// The refusal of a sequence of 7 tokens, which does not split over the tensor group in training.
void check_t7_refused(const std::string& error, const std::string& expected,
                      const std::string& what) {
  RANK_CHECK(error.find(expected) != std::string::npos, what, ": T 7 gave '", error, "'");
}

gpt::GPTConfig tiny_gpt(int64_t vocab, double dropout) {
  return {.vocab_size = vocab,
          .context_length = 16,
          .n_layers = 2,
          .n_heads = 4,
          .d_model = 32,
          .dropout = dropout,
          .attn_dropout = dropout};
}

// A serial GPT and its tensor-parallel twin from one seed: same weights, loss, logits, gradients.
void check_gpt(const ParallelContext& ctx, int64_t vocab, double dropout, bool tied,
               bool checkpoint = false) {
  const std::string what =
      str_cat("GPT vocab ", vocab, " dropout ", dropout, tied ? " tied" : " untied",
              layout_name(ctx), checkpoint ? " checkpointed" : "");
  gpt::GPTConfig c = tiny_gpt(vocab, dropout);
  c.tie_embeddings = tied;
  c.checkpoint = checkpoint;
  const auto [serial, twin] = make_twins_of<gpt::GPT>(ctx, 7, what, c);
  const auto x = gpt_batch(vocab, 3, 16);
  check_train_step(
      *serial, *twin, [&](gpt::GPT& m) { return m.loss(x.ids, x.targets); }, what);
  check_grads(*twin, *serial, ctx, what);
  // Full logits (gathered) for generation and evaluation.
  check_eval_logits(*serial, *twin, x.ids, what);
  if (!ctx.config().tensor.sequence_parallel) return;
  // A window of 7 tokens (generation) is padded to a multiple of the tensor size outside
  // training; the causal logits of its 7 positions are the serial ones.
  autograd::NoGradGuard no_grad;
  Tensor odd = x.ids.narrow(1, 0, 7).contiguous();
  check_close(twin->forward(odd), serial->forward(odd), what + " logits of T 7 (padded)");
  // In training T must split over the group: every rank refuses before any collective.
  twin->train();
  check_t7_refused(
      error_of<std::exception>([&] { twin->loss(odd, x.targets.narrow(1, 0, 7).contiguous()); }),
      "expected the sequence length T 7 divisible by parallel.tensor.size", what);
}

bert::BertConfig tiny_bert(double dropout) {
  return {.vocab_size = 37,  // padded under tensor parallelism
          .max_positions = 16,
          .n_layers = 2,
          .n_heads = 4,
          .d_model = 32,
          .mlp_hidden = 64,
          .dropout = dropout,
          .attn_dropout = dropout,
          .num_labels = 3};
}

// A serial BERT and its twin from one seed: the masked-LM plus classification loss over a batch
// with padding (key_padding_mask), with and without token types, and every gradient; then the
// eval logits of both heads.
void check_bert(const ParallelContext& ctx, double dropout, bool token_types) {
  const std::string what =
      str_cat("BERT dropout ", dropout, token_types ? " token types" : "", layout_name(ctx));
  const bert::BertConfig c = tiny_bert(dropout);
  const auto [serial, twin] = make_twins_of<bert::Bert>(ctx, 7, what, c);
  const auto x = bert_batch(c, {.token_types = token_types});
  check_train_step(
      *serial, *twin, [&](bert::Bert& m) { return bert_loss(m, x); }, what);
  check_grads(*twin, *serial, ctx, what);
  const auto s = bert_eval(*serial, x), t = bert_eval(*twin, x);
  check_close(t.hidden, s.hidden, what + " hidden states (gathered)");
  check_close(t.mlm_logits, s.mlm_logits, what + " masked-LM logits");
  check_close(t.class_logits, s.class_logits, what + " classification logits");
  if (!ctx.config().tensor.sequence_parallel) return;
  // T must split over the group: every rank refuses before any collective.
  autograd::NoGradGuard no_grad;
  Tensor odd = x.ids.narrow(1, 0, 7).contiguous();
  check_t7_refused(error_of<std::exception>([&] { twin->forward(odd); }),
                   str_cat("expected the sequence length T 7 divisible by parallel.tensor.size ",
                           ctx.config().tensor.size),
                   what);
}

vit::ViTConfig tiny_vit(double dropout) {
  return {.image_size = 12,
          .patch_size = 4,  // 9 patches + the class token: 10 tokens
          .in_channels = 3,
          .num_classes = 5,
          .n_layers = 2,
          .n_heads = 4,
          .d_model = 32,
          .dropout = dropout,
          .attn_dropout = dropout};
}

// A serial ViT and its twin from one seed: loss and every gradient. Under sequence parallelism
// the 10 tokens split over 2 ranks; on 4 (no square grid plus one divides by 4) the twin refuses
// at construction, naming the numbers.
void check_vit(const ParallelContext& ctx, double dropout) {
  const int p = ctx.config().tensor.size;
  const std::string what = str_cat("ViT dropout ", dropout, layout_name(ctx));
  const vit::ViTConfig c = tiny_vit(dropout);
  if (ctx.config().tensor.sequence_parallel && (c.num_patches() + 1) % p != 0) {
    Generator gen(7);
    const std::string error =
        error_of<std::exception>([&] { vit::ViT twin(c, nn::BuildContext(gen, &ctx)); });
    RANK_CHECK(error.find(str_cat("num_patches + 1 = 9 + 1 = 10, image_size 12 / patch_size 4 "
                                  "squared, plus the class token) divisible by "
                                  "parallel.tensor.size ",
                                  p)) != std::string::npos,
               what, ": 10 tokens on ", p, " ranks gave '", error, "'");
    return;
  }
  const auto [serial, twin] = make_twins_of<vit::ViT>(ctx, 7, what, c);
  const auto x = vit_batch(c, 3);
  check_train_step(
      *serial, *twin, [&](vit::ViT& m) { return m.loss(x.images, x.labels); }, what);
  check_grads(*twin, *serial, ctx, what);
  check_eval_logits(*serial, *twin, x.images, what);
}

// The linear pair alone, as MLP uses it, on odd batch shapes.
void check_mlp(const ParallelContext& ctx) {
  const nn::MLPSpec spec{.d_model = 12, .hidden = 8 * ctx.config().tensor.size, .gelu = "none"};
  const auto [serial, twin] = make_twins_of<nn::MLP>(ctx, 3, "MLP", spec);
  Generator data(4);
  const Tensor x = randn({5, 3, 12}, {}, &data), w = randn({5, 3, 12}, {}, &data);
  check_pass(
      x, [&](const Tensor& xs) { return serial->forward(xs); },
      [&](const Tensor& xt) { return twin->forward(xt); }, weighted_by(w), "MLP");
  check_grads(*twin, *serial, ctx, "MLP");
}

// The MLP pair on sequence shards: rank r's rows of x in, its rows of the serial output out,
// its rows of the input gradient, and every parameter's serial gradient (c_proj's bias summed).
void check_mlp_sequence_parallel(const ParallelContext& ctx) {
  const int p = ctx.config().tensor.size, r = ctx.tensor_group()->rank();
  const int64_t rows = 3;  // per rank: T = 3 P
  const nn::MLPSpec spec{.d_model = 12, .hidden = 8 * p, .gelu = "none"};
  const auto [serial, twin] = make_twins_of<nn::MLP>(ctx, 3, "MLP sequence parallel", spec);
  Generator data(4);
  Tensor x = randn({5, rows * p, 12}, {}, &data);
  Tensor w = randn({5, rows * p, 12}, {}, &data);
  Tensor xs = leaf(x), xt = leaf(x.narrow(1, r * rows, rows));
  Tensor ys = serial->forward(xs), yt = twin->forward(xt);
  check_close(yt, ys.narrow(1, r * rows, rows), "MLP sequence parallel output rows");
  autograd::backward({sum(mul(ys, w))});
  autograd::backward({sum(mul(yt, w.narrow(1, r * rows, rows)))});
  check_close(xt.grad(), xs.grad().narrow(1, r * rows, rows),
              "MLP sequence parallel input gradient");
  check_grads(*twin, *serial, ctx, "MLP sequence parallel");
}

// dropout_slice of a (B, T, C) tensor's rows equals those rows of the whole tensor's dropout
// (forward and backward, exactly) and advances the generator by the whole tensor's counters.
void check_dropout_slice() {
  Generator data(9);
  Tensor x = randn({3, 8, 5}, {}, &data);
  Generator g_whole(21);
  Tensor xw = x.clone();
  xw.set_requires_grad(true);
  Tensor whole = dropout(xw, 0.3, true, &g_whole);
  autograd::backward({sum(whole)});
  for (int64_t start : {0, 2, 6}) {
    Generator g(21);
    Tensor xs = x.narrow(1, start, 2).clone();
    xs.set_requires_grad(true);
    Tensor part = dropout_slice(xs, 0.3, {.dim = 1, .size = 8, .start = start}, true, &g);
    autograd::backward({sum(part)});
    RANK_CHECK(g.offset() == g_whole.offset(), "dropout_slice reserved ", g.offset(),
               " counters, the whole dropout ", g_whole.offset());
    RANK_CHECK(rel_error(part, whole.narrow(1, start, 2)) == 0.0, "dropout_slice rows ", start,
               " differ from the whole tensor's");
    RANK_CHECK(rel_error(xs.grad(), xw.grad().narrow(1, start, 2)) == 0.0,
               "dropout_slice gradient rows ", start, " differ from the whole tensor's");
  }
}

// Bytes a GPT twin's training step allocates on this rank beyond what it held before: kept
// after the forward (the activations saved for backward), and the peak over forward and over
// forward + backward (gradients included: the same shards with and without sequence parallelism).
struct ActivationBytes {
  int64_t kept = 0, forward_peak = 0, step_peak = 0;
};

ActivationBytes activation_bytes(const ParallelContext& ctx, bool sequence_parallel) {
  parallel::ParallelConfig config = ctx.config();
  config.tensor.sequence_parallel = sequence_parallel;
  ParallelContext c(config, ctx.world());
  gpt::GPTConfig g = tiny_gpt(64, 0.1);
  g.context_length = 64;
  g.d_model = 64;
  Generator gen(7);
  gpt::GPT model(g, nn::BuildContext(gen, &c));
  Generator data(11);
  Tensor ids = randint(0, 64, {4, 64}, {.dtype = DType::i64}, &data);
  Tensor targets = randint(0, 64, {4, 64}, {.dtype = DType::i64}, &data);
  ActivationBytes bytes;
  const int64_t base = memory_stats(kCPU).current_bytes;
  reset_peak_memory(kCPU);
  {
    manual_seed(5);
    Tensor loss = model.loss(ids, targets);
    bytes.kept = memory_stats(kCPU).current_bytes - base;
    bytes.forward_peak = memory_stats(kCPU).peak_bytes - base;
    autograd::backward({loss});
  }
  bytes.step_peak = memory_stats(kCPU).peak_bytes - base;
  return bytes;
}

void check_activation_memory(const ParallelContext& ctx) {
  const ActivationBytes off = activation_bytes(ctx, false), on = activation_bytes(ctx, true);
  const int p = ctx.config().tensor.size;
  if (ctx.world()->rank() == 0)
    std::printf(
        "activation bytes per rank, GPT d_model 64, 2 layers, B 4, T 64 on tp %d: kept after "
        "forward %lld -> %lld with sequence parallel, forward peak %lld -> %lld, step peak "
        "%lld -> %lld\n",
        p, static_cast<long long>(off.kept), static_cast<long long>(on.kept),
        static_cast<long long>(off.forward_peak), static_cast<long long>(on.forward_peak),
        static_cast<long long>(off.step_peak), static_cast<long long>(on.step_peak));
  RANK_CHECK(on.kept < off.kept, "sequence parallel kept ", on.kept,
             " bytes after forward, not below ", off.kept);
  RANK_CHECK(on.forward_peak < off.forward_peak, "sequence parallel forward peak ", on.forward_peak,
             " bytes, not below ", off.forward_peak);
  RANK_CHECK(on.step_peak < off.step_peak, "sequence parallel step peak ", on.step_peak,
             " bytes, not below ", off.step_peak);
}

}  // namespace

int main(int argc, char** argv) {
  return parallel::run_distributed(
      argc, argv, [](const std::shared_ptr<parallel::Communicator>& world) {
        const int n = world->size();
        struct Layout {
          int tensor, data;
          bool sequence_parallel;
        };
        std::vector<Layout> layouts = {{n, 1, false}, {n, 1, true}};
        if (n == 4) layouts.insert(layouts.end(), {{2, 2, false}, {2, 2, true}});
        check_dropout_slice();
        int cases = 0, sp_cases = 0, other_cases = 0, other_sp_cases = 0;
        for (const auto& [tp, dp, sp] : layouts) {
          parallel::ParallelConfig config;
          config.data = dp;
          config.tensor = {
              .size = tp, .mode = parallel::TensorMode::one_d, .depth = 1, .sequence_parallel = sp};
          ParallelContext ctx(config, world);
          if (sp) {
            check_mlp_sequence_parallel(ctx);
            if (dp == 1) check_activation_memory(ctx);
          } else {
            check_mlp(ctx);
          }
          for (double dropout : {0.0, 0.1}) {
            check_gpt(ctx, 64, dropout, /*tied=*/true);
            ++cases;
          }
          check_gpt(ctx, 37, 0.0, /*tied=*/true);   // padded vocabulary
          check_gpt(ctx, 37, 0.1, /*tied=*/false);  // its own head, padded
          cases += 2;
          if (sp) {  // blocks recomputed in backward: their gathers and reduce-scatters run again
            check_gpt(ctx, 64, 0.1, /*tied=*/true, /*checkpoint=*/true);
            ++cases;
            sp_cases += 5;
          }
          for (double dropout : {0.0, 0.1}) check_bert(ctx, dropout, /*token_types=*/dropout > 0.0);
          check_bert(ctx, 0.1, /*token_types=*/false);
          check_vit(ctx, 0.0);
          check_vit(ctx, 0.1);
          other_cases += 5;
          if (sp) other_sp_cases += 5;
        }
        world->barrier()->wait();
        if (world->rank() == 0)
          std::printf(
              "tp layers: %d GPT cases (%d sequence parallel), %d BERT and ViT cases (%d "
              "sequence parallel) on %d ranks (%lld checks on rank 0)\n",
              cases, sp_cases, other_cases, other_sp_cases, n,
              static_cast<long long>(checks_passed()));
        return 0;
      });
}
