// vocab_shard's padding arithmetic, and the one-rank vocab-parallel cross-entropy (no group, or a
// group of one): cross_entropy on the unpadded columns, padding ignored. The sharded path runs
// under mpirun (vocab_cross_entropy_ranks.cc).
#include "parallel/tensor/vocab_cross_entropy.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <vector>

#include "autograd/engine.h"
#include "autograd/ops.h"
#include "tests/testing/compare.h"

using namespace tessera;
using tessera::parallel::tensor::vocab_parallel_cross_entropy;
using tessera::parallel::tensor::vocab_shard;
using tessera::parallel::tensor::VocabShard;
using tessera::testing::to_doubles;

TEST_CASE("vocab_shard pads to a multiple of the split and cuts equal slices",
          "[parallel][vocab]") {
  SECTION("V = 37 on 4 ranks") {
    const int64_t starts[] = {0, 10, 20, 30}, valid[] = {10, 10, 10, 7};
    for (int r = 0; r < 4; ++r) {
      const VocabShard s = vocab_shard(37, r, 4);
      CHECK(s.vocab_size == 37);
      CHECK(s.padded_vocab_size == 40);
      CHECK(s.local == 10);
      CHECK(s.start == starts[r]);
      CHECK(s.valid() == valid[r]);
    }
  }
  SECTION("a multiple wider than the remainder leaves a slice of padding only") {
    const int64_t valid[] = {16, 16, 5, 0};
    for (int r = 0; r < 4; ++r) {
      const VocabShard s = vocab_shard(37, r, 4, 8);
      CHECK(s.padded_vocab_size == 64);
      CHECK(s.local == 16);
      CHECK(s.start == 16 * r);
      CHECK(s.valid() == valid[r]);
    }
  }
  SECTION("Megatron's GPT-2 padding: 50257 by 128 per rank") {
    CHECK(vocab_shard(50257, 0, 1, 128).padded_vocab_size == 50304);
    const VocabShard s = vocab_shard(50257, 7, 8, 128);
    CHECK(s.padded_vocab_size == 51200);
    CHECK(s.local == 6400);
    CHECK(s.start == 44800);
    CHECK(s.valid() == 50257 - 44800);
  }
  SECTION("no padding when the split divides V; one rank holds everything") {
    CHECK(vocab_shard(64, 1, 2).padded_vocab_size == 64);
    CHECK(vocab_shard(64, 1, 2).valid() == 32);
    const VocabShard one = vocab_shard(37, 0, 1);
    CHECK(one.padded_vocab_size == 37);
    CHECK(one.start == 0);
    CHECK(one.valid() == 37);
  }
  SECTION("every layout tiles [0, V_pad) in rank order, real ids first") {
    for (int64_t v : {1, 2, 3, 7, 37, 64, 100, 1001})
      for (int size : {1, 2, 3, 4, 8})
        for (int64_t multiple : {1, 3, 8, 128}) {
          INFO("V " << v << " size " << size << " multiple " << multiple);
          int64_t next = 0, real = 0;
          for (int r = 0; r < size; ++r) {
            const VocabShard s = vocab_shard(v, r, size, multiple);
            REQUIRE(s.start == next);
            REQUIRE(s.local * size == s.padded_vocab_size);
            // Real ids are [start, start + valid): all of them before any padding.
            REQUIRE(s.valid() == std::clamp<int64_t>(v - s.start, 0, s.local));
            next += s.local;
            real += s.valid();
          }
          const VocabShard s = vocab_shard(v, 0, size, multiple);
          CHECK(next == s.padded_vocab_size);
          CHECK(real == v);
          CHECK(s.padded_vocab_size % (size * multiple) == 0);
          CHECK(s.padded_vocab_size - v < size * multiple);
        }
  }
  SECTION("bad arguments") {
    CHECK_THROWS_WITH(vocab_shard(0, 0, 1), Catch::Contains("expected a positive vocabulary size"));
    CHECK_THROWS_WITH(vocab_shard(37, 4, 4),
                      Catch::Contains("expected 0 <= rank < size, got rank 4"));
    CHECK_THROWS_WITH(vocab_shard(37, 0, 0), Catch::Contains("expected 0 <= rank < size"));
    CHECK_THROWS_WITH(vocab_shard(37, 0, 2, 0), Catch::Contains("expected a positive multiple"));
  }
}

namespace {

// (batch..., V_pad) logits whose padding columns hold a logit that would dominate if counted.
Tensor padded_logits(const Shape& batch, int64_t vocab, int64_t padded, DType dtype,
                     uint64_t seed) {
  Shape shape = batch;
  shape.push_back(padded);
  Generator gen(seed);
  Tensor x = mul(randn(shape, {}, &gen), 2.0);
  x.narrow(int64_t(batch.size()), vocab, padded - vocab).fill_(30.0);
  return x.to(dtype);
}

Tensor targets_for(const Shape& batch, int64_t vocab, int64_t ignore_index) {
  std::vector<int64_t> t(static_cast<size_t>(shape_numel(batch)));
  for (size_t i = 0; i < t.size(); ++i) t[i] = i % 4 == 2 ? ignore_index : int64_t(i * 5) % vocab;
  return from_vector(t, batch, {.dtype = DType::i64});
}

void require_equal(const Tensor& a, const Tensor& b) {
  REQUIRE(a.shape() == b.shape());
  REQUIRE(a.dtype() == b.dtype());
  const std::vector<double> x = to_doubles(a), y = to_doubles(b);
  for (size_t i = 0; i < x.size(); ++i) {
    INFO("element " << i);
    if (std::isnan(y[i])) {
      CHECK(std::isnan(x[i]));
    } else {
      CHECK(x[i] == y[i]);
    }
  }
}

}  // namespace

TEST_CASE("one rank is cross_entropy on the unpadded logits", "[parallel][vocab]") {
  const int64_t vocab = 37;
  // Padded as if for 8 ranks of multiple 1, but held whole by the one rank.
  const VocabShard shard = vocab_shard(vocab, 0, 1, 8);
  REQUIRE(shard.padded_vocab_size == 40);
  for (DType dtype : {DType::f32, DType::bf16})
    for (const Shape& batch : {Shape{9}, Shape{2, 5}})
      for (double smoothing : {0.0, 0.1})
        for (const char* reduction : {"mean", "sum", "none"}) {
          INFO(dtype_name(dtype) << " targets " << shape_str(batch) << " smoothing " << smoothing
                                 << " " << reduction);
          const CrossEntropyOptions opts{.label_smoothing = smoothing, .reduction = reduction};
          const Tensor padded = padded_logits(batch, vocab, shard.padded_vocab_size, dtype, 5);
          const Tensor targets = targets_for(batch, vocab, opts.ignore_index);
          const int64_t last = int64_t(batch.size());

          Tensor serial_in = padded.narrow(last, 0, vocab).clone().set_requires_grad(true);
          Tensor want = cross_entropy(serial_in, targets, opts);
          Tensor local = padded.clone().set_requires_grad(true);
          Tensor got = vocab_parallel_cross_entropy(local, targets, shard, opts);
          require_equal(got, want);

          Generator gen(11);
          const Tensor g = want.dim() == 0 ? full(Shape{}, 0.5) : randn(want.shape(), {}, &gen);
          autograd::backward({want}, {g});
          autograd::backward({got}, {g});
          require_equal(local.grad().narrow(last, 0, vocab), serial_in.grad());
          const std::vector<double> pad = to_doubles(local.grad().narrow(last, vocab, 3));
          for (double p : pad) CHECK(p == 0.0);
        }
}

TEST_CASE("one rank: all ignored gives NaN for the mean, as cross_entropy", "[parallel][vocab]") {
  const VocabShard shard = vocab_shard(5, 0, 1, 4);
  const Tensor logits = padded_logits({3}, 5, shard.padded_vocab_size, DType::f32, 2);
  const Tensor targets =
      from_vector(std::vector<int64_t>{-100, -100, -100}, {3}, {.dtype = DType::i64});
  CHECK(std::isnan(vocab_parallel_cross_entropy(logits, targets, shard).item()));
  CHECK(vocab_parallel_cross_entropy(logits, targets, shard, {.reduction = "sum"}).item() == 0.0);
}

TEST_CASE("vocab_parallel_cross_entropy refuses bad input with the shapes named",
          "[parallel][vocab]") {
  const VocabShard shard = vocab_shard(37, 0, 1, 8);  // local 40
  const Tensor logits = padded_logits({4}, 37, 40, DType::f32, 1);
  const Tensor targets = targets_for({4}, 37, -100);
  CHECK_THROWS_WITH(vocab_parallel_cross_entropy(logits.narrow(1, 0, 39), targets, shard),
                    Catch::Contains("shard's width 40, got logits (4, 39)"));
  CHECK_THROWS_WITH(vocab_parallel_cross_entropy(logits, targets_for({3}, 37, -100), shard),
                    Catch::Contains("expected logits (N, V_local) with targets (N)"));
  CHECK_THROWS_WITH(vocab_parallel_cross_entropy(logits, targets, shard, {.reduction = "avg"}),
                    Catch::Contains("expected reduction"));
  // Without a group of several ranks, the one shard must hold the whole vocabulary.
  const VocabShard quarter = vocab_shard(37, 0, 4);  // local 10
  CHECK_THROWS_WITH(vocab_parallel_cross_entropy(logits.narrow(1, 0, 10), targets, quarter),
                    Catch::Contains("expected one shard holding the whole vocabulary"));
  // A padding id is not a class.
  const Tensor padding_target =
      from_vector(std::vector<int64_t>{0, 1, 38, 2}, {4}, {.dtype = DType::i64});
  CHECK_THROWS_WITH(vocab_parallel_cross_entropy(logits, padding_target, shard),
                    Catch::Contains("expected targets in [0, 37)"));
}
