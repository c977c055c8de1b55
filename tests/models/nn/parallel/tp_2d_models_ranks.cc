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

#include "autograd/engine.h"
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
#include "tests/parallel/rank_check.h"

using namespace tessera;
using parallel::ParallelContext;

using parallel::testing::block;
using parallel::testing::check_close;
using parallel::testing::check_grad_norm;
using parallel::testing::check_params;
using parallel::testing::check_state;
using parallel::testing::on_grid;
using parallel::testing::rel_error;

namespace {

parallel::tensor::SummaGrid grid_of(const ParallelContext& ctx) {
  Generator unused(0);
  return nn::BuildContext(unused, &ctx).summa_grid();
}

gpt::GPTConfig tiny_gpt(int q, int64_t vocab, double dropout) {
  gpt::GPTConfig c;
  c.vocab_size = vocab;
  c.context_length = 16;
  c.n_layers = 2;
  c.n_heads = 2 * q;
  c.d_model = 8 * q * q;
  c.dropout = dropout;
  c.attn_dropout = dropout;
  return c;
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
  Generator g_serial(7), g_twin(7);
  gpt::GPT serial(c, g_serial);
  gpt::GPT twin(c, nn::BuildContext(g_twin, &ctx));
  RANK_CHECK(g_serial.offset() == g_twin.offset(), what, ": the twin drew ", g_twin.offset(),
             " counters, the serial ", g_serial.offset());
  RANK_CHECK(twin.wte()->type_name() == "VocabParallelEmbedding2D" &&
                 twin.wpe()->type_name() == "Embedding2D" &&
                 twin.ln_f()->type_name() == "LayerNorm2D" &&
                 twin.lm_head()->type_name() == "VocabParallelLMHead2D",
             what, ": layers ", twin.wte()->type_name(), ", ", twin.wpe()->type_name(), ", ",
             twin.ln_f()->type_name(), ", ", twin.lm_head()->type_name());
  Generator data(11);
  const int64_t b = 2 * grid.batch_parts(), t = 16;
  Tensor ids = randint(0, vocab, {b, t}, {.dtype = DType::i64}, &data);
  Tensor targets = randint(0, vocab, {b, t}, {.dtype = DType::i64}, &data);
  targets.narrow(1, 0, 2).fill_(-100);  // some ignored positions
  manual_seed(5);
  Tensor want = serial.loss(ids, targets);
  autograd::backward({want});
  manual_seed(5);
  Tensor got = twin.loss(ids, targets);
  autograd::backward({got});
  check_close(got, want, what + " loss");
  check_params(twin, serial, ctx, what);
  check_grad_norm(twin, serial, ctx, what);
  check_state(twin, serial, ctx, what);
  autograd::NoGradGuard no_grad;
  serial.eval();
  twin.eval();
  check_close(twin.forward(ids), serial.forward(ids), what + " logits");
  // Generation's single prompt: its batch of one is padded to split over the grid rows.
  Tensor prompt = ids.narrow(0, 0, 1).narrow(1, 0, 7).contiguous();
  check_close(twin.forward(prompt), serial.forward(prompt), what + " logits of one prompt");
  Generator gs(3), gt(3);
  const Tensor gen_s = serial.generate(prompt, 4, /*temperature=*/0.0, /*top_k=*/0, gs);
  const Tensor gen_t = twin.generate(prompt, 4, /*temperature=*/0.0, /*top_k=*/0, gt);
  RANK_CHECK(rel_error(gen_t.to(DType::f32), gen_s.to(DType::f32)) == 0.0, what,
             ": generated tokens differ");
  // In training the batch must split over the grid rows (2.5D: the depth layers, then the rows):
  // every rank refuses before a collective.
  twin.train();
  const int64_t odd = grid.depth() > 1 ? q : q + 1;
  const std::string error = parallel::testing::value_error_of([&] {
    twin.loss(ids.narrow(0, 0, odd).contiguous(), targets.narrow(0, 0, odd).contiguous());
  });
  const std::string expected = grid.depth() > 1
                                   ? str_cat("batch B divisible by depth x q = ", grid.depth(),
                                             " x ", q, " = ", grid.batch_parts())
                                   : str_cat("batch B divisible by the 2D grid side q = ", q);
  RANK_CHECK(error.find(expected) != std::string::npos, what, ": a batch of ", odd, " gave '",
             error, "'");
}

bert::BertConfig tiny_bert(int q, double dropout) {
  bert::BertConfig c;
  c.vocab_size = 37;  // padded under tensor parallelism
  c.max_positions = 16;
  c.n_layers = 2;
  c.n_heads = 2 * q;
  c.d_model = 8 * q * q;
  c.mlp_hidden = 16 * q * q;
  c.dropout = dropout;
  c.attn_dropout = dropout;
  c.num_labels = 3;  // does not split over the grid
  return c;
}

// The masked-LM plus classification loss over a batch with padding (key-padding mask), with and
// without token types, every gradient; then the eval hidden states (this rank's block) and the
// logits of both heads.
void check_bert(const ParallelContext& ctx, double dropout, bool token_types) {
  const auto grid = grid_of(ctx);
  const int q = grid.q();
  const std::string what =
      str_cat("BERT dropout ", dropout, token_types ? " token types" : "", on_grid(grid));
  const bert::BertConfig c = tiny_bert(q, dropout);
  Generator g_serial(7), g_twin(7);
  bert::Bert serial(c, g_serial);
  bert::Bert twin(c, nn::BuildContext(g_twin, &ctx));
  RANK_CHECK(g_serial.offset() == g_twin.offset(), what, ": the twin drew ", g_twin.offset(),
             " counters, the serial ", g_serial.offset());
  Generator data(11);
  const int64_t b = 2 * grid.batch_parts(), t = 16;
  Tensor ids = randint(0, c.vocab_size, {b, t}, {.dtype = DType::i64}, &data);
  Tensor types =
      token_types ? randint(0, c.type_vocab_size, {b, t}, {.dtype = DType::i64}, &data) : Tensor();
  Tensor mask = ones({b, t}, {.dtype = DType::i64});
  mask.narrow(0, 1, 1).narrow(1, 10, t - 10).fill_(0);
  mask.narrow(0, b - 1, 1).narrow(1, 13, t - 13).fill_(0);
  Tensor labels = randint(0, c.vocab_size, {b, t}, {.dtype = DType::i64}, &data);
  labels.narrow(1, 0, 3).fill_(-100);
  Tensor classes = randint(0, c.num_labels, {b}, {.dtype = DType::i64}, &data);
  auto loss = [&](bert::Bert& m) {
    Tensor h = m.forward(ids, types, mask);
    return m.mlm_loss(h, labels) + m.classification_loss(h, classes);
  };
  manual_seed(5);
  Tensor want = loss(serial);
  autograd::backward({want});
  manual_seed(5);
  Tensor got = loss(twin);
  autograd::backward({got});
  check_close(got, want, what + " loss");
  check_params(twin, serial, ctx, what, /*replicated_ok=*/true);  // the classifier's bias
  check_grad_norm(twin, serial, ctx, what);
  check_state(twin, serial, ctx, what);
  autograd::NoGradGuard no_grad;
  serial.eval();
  twin.eval();
  Tensor hs = serial.forward(ids, types, mask), ht = twin.forward(ids, types, mask);
  check_close(ht, block(hs, grid), what + " hidden states block");
  check_close(twin.mlm_logits(ht), serial.mlm_logits(hs), what + " masked-LM logits");
  check_close(twin.classify(ht), serial.classify(hs), what + " classification logits");
}

vit::ViTConfig tiny_vit(int q, double dropout) {
  vit::ViTConfig c;
  c.image_size = 12;
  c.patch_size = 4;  // 9 patches + the class token
  c.in_channels = 3;
  c.num_classes = 5;
  c.n_layers = 2;
  c.n_heads = 2 * q;
  c.d_model = 8 * q * q;
  c.dropout = dropout;
  c.attn_dropout = dropout;
  return c;
}

void check_vit(const ParallelContext& ctx, double dropout) {
  const auto grid = grid_of(ctx);
  const int q = grid.q();
  const std::string what = str_cat("ViT dropout ", dropout, on_grid(grid));
  const vit::ViTConfig c = tiny_vit(q, dropout);
  Generator g_serial(7), g_twin(7);
  vit::ViT serial(c, g_serial);
  vit::ViT twin(c, nn::BuildContext(g_twin, &ctx));
  RANK_CHECK(g_serial.offset() == g_twin.offset(), what, ": the twin drew ", g_twin.offset(),
             " counters, the serial ", g_serial.offset());
  Generator data(11);
  const int64_t b = 2 * grid.batch_parts();
  Tensor images = randn({b, 3, 12, 12}, {}, &data);
  Tensor labels = randint(0, c.num_classes, {b}, {.dtype = DType::i64}, &data);
  manual_seed(5);
  Tensor want = serial.loss(images, labels);
  autograd::backward({want});
  manual_seed(5);
  Tensor got = twin.loss(images, labels);
  autograd::backward({got});
  check_close(got, want, what + " loss");
  // The class token, positions and classifier bias are replicated.
  check_params(twin, serial, ctx, what, /*replicated_ok=*/true);
  check_grad_norm(twin, serial, ctx, what);
  check_state(twin, serial, ctx, what);
  autograd::NoGradGuard no_grad;
  serial.eval();
  twin.eval();
  check_close(twin.forward(images), serial.forward(images), what + " logits");
}

}  // namespace

int main(int argc, char** argv) {
  return parallel::run_distributed(
      argc, argv, [](const std::shared_ptr<parallel::Communicator>& world) {
        const parallel::ParallelConfig config = parallel::testing::summa_config(world->size());
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
              config.tensor.mode.c_str(), cases, on_grid(grid_of(ctx)).c_str(),
              static_cast<long long>(parallel::testing::checks_passed()));
        return 0;
      });
}
