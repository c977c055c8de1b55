// GPT without a reference: strict JSON configs, preset shapes and parameter counts, GPT-2's
// initialisation, weight tying, and generation (greedy determinism, top-k, context cropping).
#include "models/gpt/gpt.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <functional>

#include "autograd/ops.h"
#include "tests/testing/compare.h"

namespace tessera::gpt {
namespace {

using nlohmann::json;

std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const ValueError& e) {
    return e.what();
  }
  return "";
}

double stddev(const Tensor& t) {
  std::vector<double> v = testing::to_doubles(t);
  double s = 0, s2 = 0;
  for (double x : v) s += x, s2 += x * x;
  const double m = s / double(v.size());
  return std::sqrt(s2 / double(v.size()) - m * m);
}

GPTConfig small_config() {
  GPTConfig c = gpt_preset("gpt-tiny");
  c.n_layers = 2;
  c.d_model = 32;
  c.n_heads = 4;
  c.vocab_size = 50;
  c.context_length = 16;
  return c;
}

TEST_CASE("GPTConfig reads JSON strictly, over a preset", "[gpt][config]") {
  GPTConfig c =
      GPTConfig::from_json(json{{"preset", "gpt-tiny"}, {"n_layers", 3}, {"dropout", 0.1}});
  CHECK(c.n_layers == 3);
  CHECK(c.d_model == 128);
  CHECK(c.vocab_size == 256);
  CHECK(c.context_length == 64);
  CHECK(c.dropout == 0.1);
  CHECK(GPTConfig::from_json(c.to_json()).to_json() == c.to_json());

  std::string msg = error_of([] { GPTConfig::from_json(json{{"n_layer", 3}}); });
  CHECK(msg.find("unknown key 'n_layer'") != std::string::npos);
  msg = error_of([] { GPTConfig::from_json(json{{"d_model", "wide"}}); });
  CHECK(msg.find("'d_model'") != std::string::npos);
  msg = error_of([] { GPTConfig::from_json(json{{"d_model", 100}, {"n_heads", 3}}); });
  CHECK(msg.find("divisible") != std::string::npos);
  msg = error_of([] { GPTConfig::from_json(json{{"preset", "gpt-huge"}}); });
  CHECK(msg.find("gpt-huge") != std::string::npos);
  CHECK(msg.find("gpt2-124m") != std::string::npos);
  CHECK(!error_of([] { GPTConfig::from_json(json{{"dropout", 1.0}}); }).empty());
}

TEST_CASE("GPT presets have the published parameter counts", "[gpt][presets]") {
  // GPT-2 small with its tied head, built: the figure Hugging Face's GPT2LMHeadModel reports.
  Generator gen(0);
  GPT gpt2(gpt_preset("gpt2-124m"), gen);
  CHECK(gpt2.num_parameters() == 124439808);
  CHECK(gpt_num_parameters(gpt2.config()) == 124439808);
  // GPT-2 medium as released; the others from the formula (too large to build here).
  CHECK(gpt_num_parameters(gpt_preset("gpt2-350m")) == 354823168);
  CHECK(gpt_num_parameters(gpt_preset("gpt2-1.3b")) ==
        50257LL * 2048 + 1024LL * 2048 + 24LL * (12LL * 2048 * 2048 + 13LL * 2048) + 2 * 2048);
  CHECK(gpt_num_parameters(gpt_preset("gpt3-2.7b")) ==
        50257LL * 2560 + 2048LL * 2560 + 32LL * (12LL * 2560 * 2560 + 13LL * 2560) + 2 * 2560);
  for (const char* name : {"gpt-tiny", "gpt-mini"}) {
    INFO(name);
    GPTConfig c = gpt_preset(name);
    GPT m(c, gen);
    CHECK(m.num_parameters() == gpt_num_parameters(c));
    c.tie_embeddings = false;
    GPT untied(c, gen);
    CHECK(untied.num_parameters() == gpt_num_parameters(c));
    CHECK(untied.num_parameters() == m.num_parameters() + c.vocab_size * c.d_model);
  }
}

TEST_CASE("GPT initialises as GPT-2 and ties its head", "[gpt][init]") {
  GPTConfig c = gpt_preset("gpt-mini");
  Generator gen(3);
  GPT m(c, gen);
  CHECK(m.lm_head()->weight().is_same(m.wte()->weight()));
  CHECK(m.lm_head()->parallel_style() == nn::ParallelStyle::vocab);
  CHECK(m.wte()->parallel_style() == nn::ParallelStyle::vocab);
  // Names follow GPT-2's, and the state dict lists the tied weight under both names.
  std::vector<std::string> names;
  for (auto& [n, t] : m.state_dict()) names.push_back(n);
  CHECK(std::find(names.begin(), names.end(), "h.3.attn.c_attn.weight") != names.end());
  CHECK(std::find(names.begin(), names.end(), "lm_head.weight") != names.end());
  CHECK(std::abs(stddev(m.wte()->weight()) - 0.02) < 0.001);
  const double resid = 0.02 / std::sqrt(2.0 * double(c.n_layers));
  for (size_t i = 0; i < m.blocks()->size(); ++i) {
    auto b = m.blocks()->at<nn::Block>(i);
    CHECK(std::abs(stddev(b->attn()->c_attn()->weight()) - 0.02) < 0.001);
    CHECK(std::abs(stddev(b->attn()->c_proj()->weight()) - resid) < 0.0005);
    CHECK(std::abs(stddev(b->mlp()->c_proj()->weight()) - resid) < 0.0005);
    CHECK(std::abs(stddev(b->mlp()->c_fc()->weight()) - 0.02) < 0.001);
    CHECK(testing::to_doubles(b->mlp()->c_fc()->bias()) ==
          std::vector<double>(size_t(4 * c.d_model), 0.0));
  }
  // Same seed, same weights.
  Generator again(3);
  GPT twin(c, again);
  testing::require_close(twin.blocks()->at<nn::Block>(2)->attn()->c_attn()->weight(),
                         m.blocks()->at<nn::Block>(2)->attn()->c_attn()->weight(), 0.0, 0.0);
}

TEST_CASE("GPT forward checks its input", "[gpt]") {
  Generator gen(4);
  GPT m(small_config(), gen);
  CHECK(m.forward(zeros({2, 16}, {.dtype = DType::i64})).shape() == Shape{2, 16, 50});
  CHECK(m.forward(zeros({1, 5}, {.dtype = DType::i32})).shape() == Shape{1, 5, 50});
  std::string msg = error_of([&] { m.forward(zeros({2, 17}, {.dtype = DType::i64})); });
  CHECK(msg.find("T <= 16") != std::string::npos);
  CHECK(msg.find("(2, 17)") != std::string::npos);
  CHECK(!error_of([&] { m.forward(zeros({2, 4})); }).empty());  // f32 ids
  CHECK(!error_of([&] {
           m.loss(zeros({2, 4}, {.dtype = DType::i64}), zeros({2, 3}, {.dtype = DType::i64}));
         }).empty());
}

TEST_CASE("sample_token: greedy, temperature and top-k", "[gpt][generate]") {
  const std::vector<float> logits{0.5f, 3.0f, -1.0f, 2.0f, 3.0f};
  CHECK(sample_token(logits, 0.0, 0, 0.7) == 1);  // first of the tied maxima
  // top_k = 1 is greedy whatever the draw.
  for (double u : {0.0, 0.3, 0.999}) CHECK(sample_token(logits, 1.0, 1, u) == 1);
  // top_k = 3 keeps ids 1, 4, 3; their probabilities split [0, 1) in that order.
  const double e0 = 1.0, e1 = 1.0, e2 = std::exp(-1.0), total = e0 + e1 + e2;
  CHECK(sample_token(logits, 1.0, 3, 0.0) == 1);
  CHECK(sample_token(logits, 1.0, 3, (e0 + 0.5 * e1) / total) == 4);
  CHECK(sample_token(logits, 1.0, 3, (e0 + e1 + 0.5 * e2) / total) == 3);
  CHECK(sample_token(logits, 1.0, 3, 0.9999999) == 3);
  // Without top-k the least likely token can be drawn.
  CHECK(sample_token(logits, 1.0, 0, 0.9999999) == 2);
  CHECK(!error_of([&] { sample_token(logits, -1.0, 0, 0.5); }).empty());
}

TEST_CASE("GPT generate: greedy is deterministic, top-k is respected", "[gpt][generate]") {
  Generator init(5);
  GPTConfig c = small_config();
  c.dropout = 0.2;  // generate must switch it off
  GPT m(c, init);
  Tensor prompt = from_vector<int64_t>({1, 2, 3, 4, 5, 6}, {2, 3});
  Generator g1(10), g2(11);
  Tensor a = m.generate(prompt, 8, 0.0, 0, g1);
  Tensor b = m.generate(prompt, 8, 0.0, 0, g2);
  CHECK(a.shape() == Shape{2, 11});
  CHECK(testing::to_doubles(a) == testing::to_doubles(b));
  CHECK(m.is_training());  // restored
  // Greedy equals taking the argmax of forward on each prefix.
  {
    autograd::NoGradGuard no_grad;
    m.eval();
    for (int64_t t = 3; t < 11; ++t) {
      Tensor logits = m.forward(a.narrow(1, 0, t)).select(1, t - 1);  // (B, V)
      Tensor best = argmax(logits, 1);
      for (int64_t r = 0; r < 2; ++r)
        CHECK(best.select(0, r).item() == a.select(0, r).select(0, t).item());
    }
    m.train();
  }
  // Sampling with top_k = 3: every token is among the 3 most likely at its step; a seed repeats.
  Generator s1(12), s2(12);
  Tensor x = m.generate(prompt, 13, 1.5, 3, s1);  // 16 tokens: the whole context
  Tensor y = m.generate(prompt, 13, 1.5, 3, s2);
  CHECK(testing::to_doubles(x) == testing::to_doubles(y));
  autograd::NoGradGuard no_grad;
  m.eval();
  int64_t not_greedy = 0;
  for (int64_t t = 3; t < 16; ++t) {
    Tensor logits = m.forward(x.narrow(1, 0, t)).select(1, t - 1).contiguous();  // (B, V)
    for (int64_t r = 0; r < 2; ++r) {
      std::vector<double> row = testing::to_doubles(logits.select(0, r));
      const double chosen = row[size_t(x.select(0, r).select(0, t).item())];
      int64_t better = 0;
      for (double v : row) better += v > chosen;
      CHECK(better < 3);
      not_greedy += better > 0;
    }
  }
  CHECK(not_greedy > 0);  // temperature 1.5 does sample, not only take the maximum
  // Prompts longer than the context are cropped to its last context_length tokens.
  Generator s3(13);
  Tensor longer = m.generate(x, 2, 0.0, 0, s3);
  CHECK(longer.shape() == Shape{2, 18});
}

TEST_CASE("GPT activation checkpointing and dropout", "[gpt][checkpoint]") {
  GPTConfig c = small_config();
  c.dropout = 0.1;
  Generator g1(6), g2(6);
  GPT plain(c, g1);
  c.checkpoint = true;
  GPT ckpt(c, g2);
  Tensor ids = from_vector<int64_t>({1, 7, 9, 3, 2, 8, 4, 4}, {2, 4});
  Tensor tgt = from_vector<int64_t>({7, 9, 3, 2, 8, 4, 4, 1}, {2, 4});
  manual_seed(99);
  Tensor l1 = plain.loss(ids, tgt);
  autograd::backward({l1});
  manual_seed(99);
  Tensor l2 = ckpt.loss(ids, tgt);
  autograd::backward({l2});
  CHECK(l1.item() == l2.item());
  auto p1 = plain.named_parameters(), p2 = ckpt.named_parameters();
  REQUIRE(p1.size() == p2.size());
  for (size_t i = 0; i < p1.size(); ++i) {
    INFO(p1[i].first);
    testing::require_close(p2[i].second.grad(), p1[i].second.grad(), 0.0, 0.0);
  }
  // Dropout acts in training only.
  plain.eval();
  autograd::NoGradGuard no_grad;
  Tensor e1 = plain.loss(ids, tgt), e2 = plain.loss(ids, tgt);
  CHECK(e1.item() == e2.item());
  CHECK(e1.item() != l1.item());
}

}  // namespace
}  // namespace tessera::gpt
