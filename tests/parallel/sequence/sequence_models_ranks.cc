// Multi-rank program run by sequence_test.sh under mpirun: BERT and ViT built under the paper's
// sequence parallelism (parallel.sequence = S) by configuration alone, against the serial models
// from the same seed, in every attention mode: the mean over the sequence ranks of their losses
// equals the serial loss, and the mean of their parameter gradients the serial gradients (the
// trainer averages both over data x sequence), within 1e-5 relative; dropout on and off. BERT runs
// with a key-padding mask, token types, masked positions that fall unevenly on the shards (one
// shard holds none) and the pooler + classifier on [CLS]; in eval mode each rank's hidden states
// and masked-LM logits are its rows of the serial ones, and the classification logits equal the
// serial ones on every rank. ViT splits its class token and patches, (N + 1)/S tokens per rank
// (N + 1 = 10): on 2 ranks and as data 2 x sequence 2 with dropout on and off; on 4 ranks padded
// to 12 tokens (masked keys), where dropout is refused naming the numbers. A failure aborts the
// job.
#include <cstdio>
#include <string>
#include <vector>

#include "autograd/engine.h"
#include "autograd/grad_mode.h"
#include "autograd/ops.h"
#include "core/factory.h"
#include "models/bert/bert.h"
#include "models/nn/nn.h"
#include "models/vit/vit.h"
#include "parallel/comm/mpi_runtime.h"
#include "parallel/mesh/parallel_context.h"
#include "tests/models/nn/parallel/twin_checks.h"
#include "tests/models/nn/parallel/twin_fixture.h"
#include "tests/models/nn/parallel/twin_models.h"
#include "tests/parallel/rank_check.h"

using namespace tessera;
using parallel::ParallelContext;

using namespace parallel::testing;  // the twin fixture (twin_*.h) and RANK_CHECK's counter

namespace {

// The mean over the sequence group of t (a copy).
Tensor group_mean(const Tensor& t, const ParallelContext& ctx) {
  Tensor sum = t.detach().to(DType::f32).contiguous().clone();
  ctx.sequence_group()->all_reduce(sum)->wait();
  return mul(sum, 1.0 / double(ctx.sequence_group()->size()));
}

// Every parameter gradient, averaged over the sequence ranks, against the serial model's.
void check_grads(const nn::Module& twin, const nn::Module& serial, const ParallelContext& ctx,
                 const std::string& what) {
  const auto got = twin.named_parameters(), want = serial.named_parameters();
  RANK_CHECK(got.size() == want.size(), what, ": ", got.size(), " parameters, serial ",
             want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    RANK_CHECK(got[i].first == want[i].first, what, ": parameter ", got[i].first, " vs ",
               want[i].first);
    RANK_CHECK(got[i].second.grad().defined() && want[i].second.grad().defined(), what, ": ",
               got[i].first, " has no gradient");
    check_close(group_mean(got[i].second.grad(), ctx), want[i].second.grad(),
                what + " grad " + got[i].first);
  }
}

// Rank r's rows [r T/S, (r + 1) T/S) of full along dim 1.
Tensor rows_of(const Tensor& full, const ParallelContext& ctx) {
  const int s = ctx.sequence_group()->size(), r = ctx.sequence_group()->rank();
  const int64_t n = full.size(1) / s;
  return full.narrow(1, r * n, n).contiguous();
}

void check_bert(const ParallelContext& ctx, double dropout, bool token_types) {
  const std::string what =
      str_cat("BERT ", parallel::sequence::mode_name(ctx.config().sequence_mode), " dropout ",
              dropout, token_types ? " token types" : "", " on S = ", ctx.sequence_group()->size());
  const bert::BertConfig c{.vocab_size = 37,
                           .max_positions = 16,
                           .n_layers = 2,
                           .n_heads = 4,
                           .d_model = 16,
                           .mlp_hidden = 32,
                           .dropout = dropout,
                           .attn_dropout = dropout,
                           .num_labels = 3};
  const auto [serial, twin] = make_twins_of<bert::Bert>(ctx, 7, what, c);
  RANK_CHECK(twin->sequence_shard().on(), what, ": the twin is not sequence parallel");
  const int64_t b = 3, t = 16;
  // Padding at the ends of two sequences: their last shards' keys are partly or wholly hidden.
  auto x =
      bert_batch(c, {.b = b, .t = t, .token_types = token_types, .pad_second = 9, .pad_last = 4});
  // Masked positions only in the first half of each row, so the last shard holds none.
  x.labels = full({b, t}, -100.0, {.dtype = DType::i64});
  for (int64_t i = 0; i < b; ++i)
    for (int64_t k = i; k < t / 2; k += 2)
      x.labels.narrow(0, i, 1).narrow(1, k, 1).fill_(double((i * 7 + k) % c.vocab_size));
  x.classes = from_vector<int64_t>({0, 2, 1}, {b});
  const auto [got, want] =
      train_step(*serial, *twin, [&](bert::Bert& m) { return bert_loss(m, x); });
  check_close(group_mean(got, ctx), want, what + " loss");
  check_grads(*twin, *serial, ctx, what);
  const auto hs = bert_eval(*serial, x), ht = bert_eval(*twin, x);
  check_close(ht.hidden, rows_of(hs.hidden, ctx), what + " hidden states (this rank's rows)");
  check_close(ht.mlm_logits, rows_of(hs.mlm_logits, ctx),
              what + " masked-LM logits (this rank's rows)");
  check_close(ht.class_logits, hs.class_logits, what + " classification logits");
}

vit::ViTConfig tiny_vit(double dropout) {
  return {.image_size = 12,
          .patch_size = 4,  // 9 patches + the class token = 10 tokens
          .in_channels = 3,
          .num_classes = 5,
          .n_layers = 2,
          .n_heads = 4,  // all_to_all on 4 ranks
          .d_model = 16,
          .dropout = dropout,
          .attn_dropout = dropout};
}

void check_vit(const ParallelContext& ctx, double dropout) {
  const std::string what =
      str_cat("ViT ", parallel::sequence::mode_name(ctx.config().sequence_mode), " dropout ",
              dropout, " on S = ", ctx.sequence_group()->size());
  const vit::ViTConfig c = tiny_vit(dropout);
  const auto [serial, twin] = make_twins_of<vit::ViT>(ctx, 7, what, c);
  auto x = vit_batch(c, 3);
  x.labels = from_vector<int64_t>({4, 0, 2}, {3});
  const auto [got, want] =
      train_step(*serial, *twin, [&](vit::ViT& m) { return m.loss(x.images, x.labels); });
  check_close(got, want, what + " loss on this rank");
  check_grads(*twin, *serial, ctx, what);
  check_eval_logits(*serial, *twin, x.images, what);
}

// The class token and 9 patches do not split over 4 ranks: padded to 12, refused with dropout.
void check_vit_padded_dropout_refused(const ParallelContext& ctx) {
  Generator gen(7);
  const std::string error =
      error_of([&] { vit::ViT twin(tiny_vit(0.1), nn::BuildContext(gen, &ctx)); });
  RANK_CHECK(error.find("(num_patches + 1 = 9 + 1 = 10) does not divide by parallel.sequence 4 "
                        "and is padded to 12") != std::string::npos,
             "ViT with dropout on S = 4 gave '", error, "'");
}

}  // namespace

int main(int argc, char** argv) {
  return parallel::run_distributed(
      argc, argv, [](const std::shared_ptr<parallel::Communicator>& world) {
        const int n = world->size();
        int cases = 0;
        for (const char* mode : {"ring", "all_to_all", "ring_flash"}) {
          parallel::ParallelConfig config;
          config.sequence = n;
          config.sequence_mode = parallel::sequence::parse_mode(mode);
          ParallelContext ctx(config, world);
          check_bert(ctx, 0.0, /*token_types=*/true);
          check_bert(ctx, 0.1, /*token_types=*/false);
          cases += 2;
          // ViT's 10 tokens split over 2 ranks (on 4: data 2 x sequence 2, then padded to 12
          // over all 4 ranks, dropout off).
          parallel::ParallelConfig vit_config = config;
          vit_config.sequence = 2;
          vit_config.data = n / 2;
          ParallelContext vit_ctx(vit_config, world);
          check_vit(vit_ctx, 0.0);
          check_vit(vit_ctx, 0.1);
          cases += 2;
          if (n == 4) {
            check_vit(ctx, 0.0);
            check_vit_padded_dropout_refused(ctx);
            cases += 1;
          }
        }
        world->barrier()->wait();
        if (world->rank() == 0)
          std::printf(
              "sequence models: %d BERT and ViT cases, all checks passed on %d ranks (%lld checks "
              "on rank 0)\n",
              cases, n, static_cast<long long>(checks_passed()));
        return 0;
      });
}
