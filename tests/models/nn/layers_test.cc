// Layer behaviour beyond the PyTorch comparison: GPT-2 initialisation (statistics, residual
// scaling, seeding), parameter counts, the factories' parallel hints, dropout in train / eval mode,
// checkpointing with dropout, and the layers' input checks.
#include <catch2/catch.hpp>
#include <cmath>

#include "autograd/node.h"
#include "autograd/ops.h"
#include "models/nn/nn.h"
#include "tests/testing/compare.h"

namespace tessera::nn {
namespace {

using testing::require_close;
using testing::to_doubles;

double mean_of(const Tensor& t) {
  double s = 0;
  for (double v : to_doubles(t)) s += v;
  return s / double(t.numel());
}

double std_of(const Tensor& t) {
  const double m = mean_of(t);
  double s = 0;
  for (double v : to_doubles(t)) s += (v - m) * (v - m);
  return std::sqrt(s / double(t.numel()));
}

bool all_equal(const Tensor& t, double value) {
  for (double v : to_doubles(t))
    if (v != value) return false;
  return true;
}

TEST_CASE("A GPT-2-small-shaped block has 7,087,872 parameters", "[nn][init]") {
  Generator gen(0);
  auto block =
      make_block({.d_model = 768, .n_heads = 12, .causal = true, .residual_layers = 12}, gen);
  REQUIRE(block->num_parameters() == 7087872);
  REQUIRE(block->named_parameters().size() == 12);

  Generator gen2(0);
  auto no_bias = make_linear({.in_features = 768, .out_features = 3072, .bias = false}, gen2);
  REQUIRE(no_bias->num_parameters() == 768 * 3072);
  REQUIRE(make_layer_norm({.dim = 768})->num_parameters() == 1536);
  REQUIRE(make_layer_norm({.dim = 768, .bias = false})->num_parameters() == 768);
  REQUIRE(make_layer_norm({.dim = 768, .affine = false})->num_parameters() == 0);
}

TEST_CASE(
    "GPT-2 initialisation: N(0, 0.02), zero biases, unit LayerNorm, scaled residual projections",
    "[nn][init]") {
  Generator gen(11);
  const int64_t layers = 12;
  auto block =
      make_block({.d_model = 256, .n_heads = 4, .causal = true, .residual_layers = layers}, gen);
  const double residual = 0.02 / std::sqrt(2.0 * layers);
  // Over 65k-262k draws the sample std is within 1% of the target.
  CHECK(std_of(block->attn()->c_attn()->weight()) == Approx(0.02).epsilon(0.01));
  CHECK(std_of(block->mlp()->c_fc()->weight()) == Approx(0.02).epsilon(0.01));
  CHECK(std_of(block->attn()->c_proj()->weight()) == Approx(residual).epsilon(0.01));
  CHECK(std_of(block->mlp()->c_proj()->weight()) == Approx(residual).epsilon(0.01));
  CHECK(std::abs(mean_of(block->mlp()->c_fc()->weight())) < 2e-4);
  CHECK(all_equal(block->attn()->c_attn()->bias(), 0.0));
  CHECK(all_equal(block->mlp()->c_proj()->bias(), 0.0));
  CHECK(all_equal(block->ln_1()->weight(), 1.0));
  CHECK(all_equal(block->ln_2()->bias(), 0.0));

  auto emb = make_embedding({.num_embeddings = 1000, .dim = 64}, gen);
  CHECK(std_of(emb->weight()) == Approx(0.02).epsilon(0.01));

  // PyTorch's default Linear bound and the zero init.
  auto uni =
      make_linear({.in_features = 400, .out_features = 300, .init = LinearInit::uniform}, gen);
  const double bound = 1.0 / std::sqrt(400.0);
  for (double v : to_doubles(uni->weight())) REQUIRE(std::abs(v) <= bound);
  CHECK(std_of(uni->weight()) == Approx(bound / std::sqrt(3.0)).epsilon(0.01));
  CHECK_FALSE(all_equal(uni->bias(), 0.0));
  auto zero = make_linear({.in_features = 4, .out_features = 3, .init = LinearInit::zeros}, gen);
  CHECK(all_equal(zero->weight(), 0.0));
}

TEST_CASE("The same seed gives the same model; another seed another one", "[nn][init]") {
  auto build = [](uint64_t seed) {
    Generator gen(seed);
    return make_block({.d_model = 16, .n_heads = 2, .causal = true, .residual_layers = 2}, gen);
  };
  auto a = build(5), b = build(5), c = build(6);
  auto pa = a->named_parameters(), pb = b->named_parameters(), pc = c->named_parameters();
  for (size_t i = 0; i < pa.size(); ++i) {
    INFO(pa[i].first);
    REQUIRE(to_doubles(pa[i].second) == to_doubles(pb[i].second));
  }
  REQUIRE(to_doubles(pa[2].second) != to_doubles(pc[2].second));  // attn.c_attn.weight
  // Distinct layers draw distinct numbers from one generator.
  REQUIRE(to_doubles(a->attn()->c_attn()->weight().slice(0, 0, 16)) !=
          to_doubles(a->mlp()->c_fc()->weight().slice(0, 0, 16)));
}

TEST_CASE("Factories record each call site's parallel hint and refuse ones without a twin",
          "[nn][factory]") {
  Generator gen(1);
  auto block = make_block({.d_model = 8, .n_heads = 2}, gen);
  CHECK(block->attn()->c_attn()->parallel_style() == ParallelStyle::column);
  CHECK(block->attn()->c_proj()->parallel_style() == ParallelStyle::row);
  CHECK(block->mlp()->c_fc()->parallel_style() == ParallelStyle::column);
  CHECK(block->mlp()->c_proj()->parallel_style() == ParallelStyle::row);
  CHECK(make_embedding({.num_embeddings = 5, .dim = 2}, gen, ParallelStyle::vocab)
            ->parallel_style() == ParallelStyle::vocab);
  CHECK(make_embedding({.num_embeddings = 5, .dim = 2}, gen)->parallel_style() ==
        ParallelStyle::none);
  CHECK(
      make_lm_head({.d_model = 2, .vocab_size = 5}, gen, ParallelStyle::vocab)->parallel_style() ==
      ParallelStyle::vocab);
  auto patch = make_patch_embedding(
      {.image_height = 4, .image_width = 4, .patch_size = 2, .embed_dim = 3}, gen);
  CHECK(patch->proj()->parallel_style() == ParallelStyle::none);

  CHECK_THROWS_WITH(
      make_linear({.in_features = 2, .out_features = 2}, gen, ParallelStyle::vocab),
      Catch::Contains("[make_linear] expected ParallelStyle none, column, row, got vocab"));
  CHECK_THROWS_WITH(
      make_embedding({.num_embeddings = 5, .dim = 2}, gen, ParallelStyle::column),
      Catch::Contains("[make_embedding] expected ParallelStyle none, vocab, got column"));
  CHECK_THROWS_AS(make_lm_head({.d_model = 2, .vocab_size = 5}, gen, ParallelStyle::row),
                  ValueError);
}

TEST_CASE("Dropout acts in training mode only", "[nn][dropout]") {
  manual_seed(3);
  Dropout d(0.5);
  Tensor x = ones({4000});
  Tensor y = d.forward(x);
  int dropped = 0;
  for (double v : to_doubles(y)) {
    REQUIRE((v == 0.0 || v == 2.0));  // kept values scaled by 1 / (1 - p)
    dropped += v == 0.0;
  }
  CHECK(dropped > 1800);
  CHECK(dropped < 2200);
  d.eval();
  REQUIRE(d.forward(x).is_same(x));
  CHECK_THROWS_WITH(Dropout(1.0), Catch::Contains("expected p in [0, 1)"));
}

TEST_CASE("A Dropout on chunks of the serial input draws the serial mask's chunks", "[nn][dropout]") {
  // The serial (2, 8, 3) tensor's mask, then each of 4 chunks along dim 1 from the same seed, one
  // chunk and the zigzag pairs (r, 3 - r) of two ranks: the same values, the generator advanced
  // alike.
  Tensor x = add(ones({2, 8, 3}), arange(0.0, 48.0, 1.0).reshape({2, 8, 3}));
  manual_seed(11);
  const Tensor serial = Dropout(0.5).forward(x);
  const uint64_t after = default_generator().offset();
  auto chunk = [&](int64_t start, int64_t len) { return narrow(serial, 1, start, len); };
  for (int r = 0; r < 4; ++r) {
    manual_seed(11);
    const Tensor got = Dropout(0.5, {.dim = 1, .parts = 4, .index = r}).forward(narrow(x, 1, 2 * r, 2));
    CHECK(to_doubles(got) == to_doubles(chunk(2 * r, 2)));
    CHECK(default_generator().offset() == after);
  }
  for (int r = 0; r < 2; ++r) {
    manual_seed(11);
    const Tensor local = cat({narrow(x, 1, 2 * r, 2), narrow(x, 1, 2 * (3 - r), 2)}, 1);
    const Tensor got =
        Dropout(0.5, {.dim = 1, .parts = 4, .index = r, .second_index = 3 - r}).forward(local);
    CHECK(to_doubles(got) == to_doubles(cat({chunk(2 * r, 2), chunk(2 * (3 - r), 2)}, 1)));
    CHECK(default_generator().offset() == after);
  }
  CHECK_THROWS_WITH(Dropout(0.5, {.dim = 1, .parts = 4, .index = 1, .second_index = 1}),
                    Catch::Contains("second chunk index"));
}

TEST_CASE("A Dropout on a block cut in the batch, the sequence and the features draws the serial mask's block",
          "[nn][dropout]") {
  // Sequence parallelism inside a 2 x 2 grid: the serial (4, 8, 6) tensor cut into batch rows (2
  // parts), sequence chunks (2 parts, and the zigzag pairs of 4) and feature columns (2 or 3 parts).
  Tensor x = add(ones({4, 8, 6}), arange(0.0, 192.0, 1.0).reshape({4, 8, 6}));
  manual_seed(5);
  const Tensor serial = Dropout(0.3).forward(x);
  const uint64_t after = default_generator().offset();
  for (int features : {2, 3}) {
    const int64_t w = 6 / features;
    for (int b = 0; b < 2; ++b) {
      for (int s = 0; s < 2; ++s) {
        for (int f = 0; f < features; ++f) {
          auto block = [&](const Tensor& t) {
            return narrow(narrow(narrow(t, 0, 2 * b, 2), 1, 4 * s, 4), 2, w * f, w);
          };
          manual_seed(5);
          const Tensor got = Dropout(0.3, {.dim = 1, .parts = 2, .index = s, .batch_parts = 2,
                                           .batch_index = b, .feature_parts = features,
                                           .feature_index = f})
                                 .forward(block(x));
          CHECK(to_doubles(got) == to_doubles(block(serial)));
          CHECK(default_generator().offset() == after);
          // Zigzag: chunks s and 3 - s of 4 along the sequence.
          auto zig = [&](const Tensor& t) {
            const Tensor rows = narrow(narrow(t, 0, 2 * b, 2), 2, w * f, w);
            return cat({narrow(rows, 1, 2 * s, 2), narrow(rows, 1, 2 * (3 - s), 2)}, 1);
          };
          manual_seed(5);
          const Tensor zz = Dropout(0.3, {.dim = 1, .parts = 4, .index = s, .batch_parts = 2,
                                          .batch_index = b, .second_index = 3 - s,
                                          .feature_parts = features, .feature_index = f})
                                .forward(zig(x));
          CHECK(to_doubles(zz) == to_doubles(zig(serial)));
        }
      }
    }
  }
  CHECK_THROWS_WITH(Dropout(0.5, {.dim = -1, .parts = 2, .feature_parts = 2}),
                    Catch::Contains("feature chunk index"));
}

TEST_CASE("Dropout masks keyed by micro-batch and unit do not depend on what ran before",
          "[nn][dropout]") {
  Tensor x = ones({64});
  auto unit_mask = [&](uint64_t micro, int64_t unit, int draws_before) {
    MicroBatchDropout keyed(7, micro);
    for (int i = 0; i < draws_before; ++i) Dropout(0.5).forward(x);  // another unit's draws
    enter_dropout_unit(unit);
    return to_doubles(Dropout(0.5).forward(x));
  };
  CHECK(unit_mask(0, 3, 0) == unit_mask(0, 3, 5));  // a stage that ran no earlier unit
  CHECK(unit_mask(0, 3, 0) != unit_mask(0, 4, 0));  // another unit
  CHECK(unit_mask(0, 3, 0) != unit_mask(1, 3, 0));  // another micro-batch
  // Outside a scope the stream runs on as drawn: entering a unit leaves the generator alone.
  manual_seed(5);
  Dropout(0.5).forward(x);
  const uint64_t seed = default_generator().seed(), offset = default_generator().offset();
  enter_dropout_unit(3);
  CHECK(default_generator().seed() == seed);
  CHECK(default_generator().offset() == offset);
}

TEST_CASE("train / eval toggles attention and residual dropout in a block", "[nn][dropout]") {
  Generator gen(4);
  auto block = make_block(
      {.d_model = 8, .n_heads = 2, .causal = true, .dropout = 0.3, .attn_dropout = 0.3}, gen);
  Generator gen_plain(4);
  auto plain = make_block({.d_model = 8, .n_heads = 2, .causal = true}, gen_plain);
  Tensor x = randn({2, 5, 8}, {}, &gen);
  const Tensor reference = plain->forward(x);

  manual_seed(1);
  Tensor t1 = block->forward(x);
  manual_seed(2);
  Tensor t2 = block->forward(x);
  REQUIRE(to_doubles(t1) != to_doubles(t2));  // fresh masks each call
  REQUIRE(to_doubles(t1) != to_doubles(reference));

  block->eval();
  require_close(block->forward(x), reference, 0.0, 0.0);  // eval: no dropout anywhere
  block->train();
  manual_seed(1);
  require_close(block->forward(x), t1, 0.0, 0.0);  // masks come from the default generator
}

TEST_CASE("Checkpointed blocks replay dropout masks: identical gradients", "[nn][checkpoint]") {
  auto run = [](bool checkpoint) {
    Generator gen(8);
    auto block = make_block({.d_model = 8,
                             .n_heads = 2,
                             .causal = true,
                             .dropout = 0.2,
                             .attn_dropout = 0.2,
                             .checkpoint = checkpoint},
                            gen);
    Tensor x = randn({2, 6, 8}, {}, &gen).set_requires_grad(true);
    manual_seed(77);
    // Two checkpointed blocks in a row share one generator stream, as in a model.
    Tensor y = block->forward(block->forward(x));
    autograd::backward({sum(y * y)});
    std::vector<Tensor> grads{y.detach(), x.grad()};
    for (const Tensor& p : block->parameters()) grads.push_back(p.grad());
    return grads;
  };
  std::vector<Tensor> plain = run(false), ckpt = run(true);
  REQUIRE(plain.size() == ckpt.size());
  for (size_t i = 0; i < plain.size(); ++i) {
    INFO("tensor " << i);
    require_close(ckpt[i], plain[i], 0.0, 0.0);
  }
}

TEST_CASE("Checkpointing records one node with grad mode and is skipped without", "[nn][checkpoint]") {
  Generator gen(2);
  auto block = make_block({.d_model = 8, .n_heads = 2, .checkpoint = true}, gen);
  Tensor x = randn({1, 3, 8}, {}, &gen);
  REQUIRE(block->forward(x).grad_fn()->name() == "CheckpointBackward");
  block->set_checkpoint(false);
  REQUIRE(block->forward(x).grad_fn()->name() != "CheckpointBackward");
  block->set_checkpoint(true);
  autograd::NoGradGuard no_grad;
  Tensor y = block->forward(x);
  REQUIRE_FALSE(y.requires_grad());
  REQUIRE(y.grad_fn() == nullptr);
}

TEST_CASE("Heads, patch embedding and attention shapes and input checks", "[nn][shapes]") {
  Generator gen(3);
  auto patch = make_patch_embedding(
      {.image_height = 8, .image_width = 12, .patch_size = 4, .in_channels = 3, .embed_dim = 16},
      gen);
  REQUIRE(patch->num_patches() == 6);
  REQUIRE(patch->forward(randn({2, 3, 8, 12}, {}, &gen)).shape() == Shape{2, 6, 16});
  CHECK_THROWS_WITH(
      patch->forward(randn({2, 3, 12, 8}, {}, &gen)),
      Catch::Contains("[PatchEmbedding] expected images (B, 3, 8, 12), got (2, 3, 12, 8)"));
  CHECK_THROWS_WITH(
      make_patch_embedding({.image_height = 10, .image_width = 12, .patch_size = 4, .embed_dim = 2},
                           gen),
      Catch::Contains("divisible by the patch size"));

  auto head = make_classification_head(
      {.d_model = 16, .num_classes = 10, .pooling = Pooling::cls, .norm = true}, gen);
  REQUIRE(head->forward(randn({2, 6, 16}, {}, &gen)).shape() == Shape{2, 10});
  auto token_head = make_classification_head({.d_model = 16, .num_classes = 5}, gen);
  REQUIRE(token_head->forward(randn({2, 6, 16}, {}, &gen)).shape() == Shape{2, 6, 5});
  CHECK_THROWS_WITH(head->forward(randn({2, 16}, {}, &gen)), Catch::Contains("to pool"));

  auto attn = make_attention({.d_model = 16, .n_heads = 4}, gen);
  CHECK_THROWS_WITH(
      attn->forward(randn({2, 6, 12}, {}, &gen)),
      Catch::Contains("[MultiHeadAttention] expected input (B, T, 16), got (2, 6, 12)"));
  CHECK_THROWS_WITH(make_attention({.d_model = 10, .n_heads = 4}, gen),
                    Catch::Contains("d_model divisible by n_heads"));
  Tensor bad_mask = ones({2, 5}, {.dtype = DType::b8});
  CHECK_THROWS_WITH(attn->forward(randn({2, 6, 16}, {}, &gen), bad_mask),
                    Catch::Contains("key_padding_mask"));

  auto lin = make_linear({.in_features = 4, .out_features = 2}, gen);
  CHECK_THROWS_WITH(lin->forward(randn({3, 5}, {}, &gen)),
                    Catch::Contains("[Linear] expected input (..., 4)"));
  auto lm = make_lm_head({.d_model = 4, .vocab_size = 9}, gen);
  REQUIRE(lm->forward(randn({2, 3, 4}, {}, &gen)).shape() == Shape{2, 3, 9});
  REQUIRE_FALSE(lm->bias().defined());
  CHECK_THROWS_WITH(make_mlp({.d_model = 4, .gelu = "relu"}, gen),
                    Catch::Contains("expected gelu 'tanh' or 'none'"));
}

}  // namespace
}  // namespace tessera::nn
