// Multi-rank program run by tp_2d_test.sh: GPT, BERT and ViT built under 2D (SUMMA) tensor
// parallelism on a q x q grid (or 2.5D of depth 2 on 2 q^2 ranks) by configuration alone (the
// factories pick every layer's 2D twin) against the serial models from the same seed: the loss and
// every parameter gradient (gathered by placement) within 1e-5 relative, with and without dropout,
// padded vocabularies, tied and untied heads, activation checkpointing; the eval logits
// (generation's odd batch padded), the hidden states' blocks, the serial-named state gathered from
// the shards, and the global gradient norm as the trainer's clipping sums it (replicated parameters
// once, 2.5D's depth copies once). A failure aborts the job.
#include <cmath>
#include <cstdio>
#include <string>

#include "autograd/grad_mode.h"
#include "autograd/ops.h"
#include "core/factory.h"
#include "models/bert/bert.h"
#include "models/gpt/gpt.h"
#include "models/nn/nn.h"
#include "models/vit/vit.h"
#include "parallel/comm/mpi_runtime.h"
#include "parallel/mesh/parallel_context.h"
#include "parallel/tensor/placement_ops.h"
#include "parallel/tensor/summa.h"
#include "tests/models/nn/parallel/twin_checks.h"
#include "tests/models/nn/parallel/twin_fixture.h"
#include "tests/models/nn/parallel/twin_models.h"
#include "tests/parallel/rank_check.h"

using namespace tessera;
using parallel::ParallelContext;

using namespace parallel::testing;  // the twin fixture (twin_*.h) and RANK_CHECK's counter

namespace {

// Heads and widths that split over the q x q grid: 2 q heads of width 4 q.
gpt::GPTConfig tiny_gpt(int q, int64_t vocab, double dropout) {
  return {.vocab_size = vocab,
          .context_length = 16,
          .n_layers = 2,
          .n_heads = 2 * q,
          .d_model = 8 * q * q,
          .dropout = dropout,
          .attn_dropout = dropout};
}

void check_gpt(const ParallelContext& ctx, int64_t vocab, double dropout, bool tied,
               bool checkpoint) {
  const auto grid = grid_of(ctx);
  const int q = grid.q();
  const std::string what =
      str_cat("GPT vocab ", vocab, " dropout ", dropout, tied ? " tied" : " untied",
              checkpoint ? " checkpointed" : "", on_grid(grid));
  gpt::GPTConfig c = tiny_gpt(q, vocab, dropout);
  c.tie_embeddings = tied;
  c.checkpoint = checkpoint;
  const auto [serial, twin] = make_twins_of<gpt::GPT>(ctx, 7, what, c);
  check_gpt_layers(*twin, "2D", what);
  const auto x = gpt_batch(vocab, 2 * grid.batch_parts(), 16);
  check_train_step(
      *serial, *twin, [&](gpt::GPT& m) { return m.loss(x.ids, x.targets); }, what);
  check_trained(*twin, *serial, ctx, what);
  // Generation's single prompt: its batch of one is padded to split over the grid rows.
  check_gpt_eval(*serial, *twin, x.ids, 7, 4, what);
  // In training the batch must split over the grid rows (2.5D: the depth layers, then the rows):
  // every rank refuses before a collective.
  autograd::NoGradGuard no_grad;
  twin->train();
  const int64_t odd = grid.depth() > 1 ? q : q + 1;
  const std::string error = error_of([&] {
    twin->loss(x.ids.narrow(0, 0, odd).contiguous(), x.targets.narrow(0, 0, odd).contiguous());
  });
  const std::string expected = grid.depth() > 1
                                   ? str_cat("batch B divisible by depth x q = ", grid.depth(),
                                             " x ", q, " = ", grid.batch_parts())
                                   : str_cat("batch B divisible by the 2D grid side q = ", q);
  RANK_CHECK(error.find(expected) != std::string::npos, what, ": a batch of ", odd, " gave '",
             error, "'");
}

bert::BertConfig tiny_bert(int q, double dropout) {
  return {.vocab_size = 37,  // padded under tensor parallelism
          .max_positions = 16,
          .n_layers = 2,
          .n_heads = 2 * q,
          .d_model = 8 * q * q,
          .mlp_hidden = 16 * q * q,
          .dropout = dropout,
          .attn_dropout = dropout,
          .num_labels = 3};  // does not split over the grid
}

// The masked-LM plus classification loss over a batch with padding (key-padding mask), with and
// without token types, every gradient; then the eval hidden states (this rank's block) and the
// logits of both heads.
void check_bert(const ParallelContext& ctx, double dropout, bool token_types) {
  const auto grid = grid_of(ctx);
  const std::string what =
      str_cat("BERT dropout ", dropout, token_types ? " token types" : "", on_grid(grid));
  const bert::BertConfig c = tiny_bert(grid.q(), dropout);
  const auto [serial, twin] = make_twins_of<bert::Bert>(ctx, 7, what, c);
  const auto x = bert_batch(c, {.b = 2 * grid.batch_parts(), .t = 16, .token_types = token_types});
  check_train_step(
      *serial, *twin, [&](bert::Bert& m) { return bert_loss(m, x); }, what);
  check_trained(*twin, *serial, ctx, what, /*replicated_ok=*/true);  // the classifier's bias
  const auto s = bert_eval(*serial, x), t = bert_eval(*twin, x);
  check_close(t.hidden, block(s.hidden, grid), what + " hidden states block");
  check_close(t.mlm_logits, s.mlm_logits, what + " masked-LM logits");
  check_close(t.class_logits, s.class_logits, what + " classification logits");
}

vit::ViTConfig tiny_vit(int q, double dropout) {
  return {.image_size = 12,
          .patch_size = 4,  // 9 patches + the class token
          .in_channels = 3,
          .num_classes = 5,
          .n_layers = 2,
          .n_heads = 2 * q,
          .d_model = 8 * q * q,
          .dropout = dropout,
          .attn_dropout = dropout};
}

void check_vit(const ParallelContext& ctx, double dropout) {
  const auto grid = grid_of(ctx);
  const std::string what = str_cat("ViT dropout ", dropout, on_grid(grid));
  const vit::ViTConfig c = tiny_vit(grid.q(), dropout);
  const auto [serial, twin] = make_twins_of<vit::ViT>(ctx, 7, what, c);
  const auto x = vit_batch(c, 2 * grid.batch_parts());
  check_train_step(
      *serial, *twin, [&](vit::ViT& m) { return m.loss(x.images, x.labels); }, what);
  // The class token, positions and classifier bias are replicated.
  check_trained(*twin, *serial, ctx, what, /*replicated_ok=*/true);
  check_eval_logits(*serial, *twin, x.images, what);
}

}  // namespace

int main(int argc, char** argv) {
  return parallel::run_distributed(
      argc, argv, [](const std::shared_ptr<parallel::Communicator>& world) {
        const parallel::ParallelConfig config = summa_config(world->size());
        ParallelContext ctx(config, world);
        int cases = 0;
        check_gpt(ctx, 64, 0.0, /*tied=*/true, /*checkpoint=*/false);
        check_gpt(ctx, 64, 0.1, /*tied=*/true, /*checkpoint=*/false);
        check_gpt(ctx, 37, 0.1, /*tied=*/false, /*checkpoint=*/false);  // padded, its own head
        check_gpt(ctx, 37, 0.1, /*tied=*/true, /*checkpoint=*/true);
        cases += 4;
        check_bert(ctx, 0.0, /*token_types=*/false);
        check_bert(ctx, 0.1, /*token_types=*/true);
        check_bert(ctx, 0.1, /*token_types=*/false);
        check_vit(ctx, 0.0);
        check_vit(ctx, 0.1);
        cases += 5;
        world->barrier()->wait();
        if (world->rank() == 0)
          std::printf(
              "tp %s models: %d GPT, BERT and ViT cases, all checks passed%s ranks (%lld checks "
              "on rank 0)\n",
              parallel::tensor_mode_name(config.tensor.mode), cases, on_grid(grid_of(ctx)).c_str(),
              static_cast<long long>(checks_passed()));
        return 0;
      });
}
