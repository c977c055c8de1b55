#include "tests/models/nn/parallel/twin_models.h"

#include "autograd/grad_mode.h"
#include "autograd/ops.h"
#include "core/factory.h"
#include "core/generator.h"
#include "tests/models/nn/parallel/twin_checks.h"
#include "tests/parallel/rank_check.h"

namespace tessera::parallel::testing {

GptBatch gpt_batch(int64_t vocab, int64_t b, int64_t t) {
  Generator data(11);
  GptBatch x;
  x.ids = randint(0, vocab, {b, t}, {.dtype = DType::i64}, &data);
  x.targets = randint(0, vocab, {b, t}, {.dtype = DType::i64}, &data);
  x.targets.narrow(1, 0, 2).fill_(-100);
  return x;
}

BertBatch bert_batch(const bert::BertConfig& c, const BertBatchSpec& spec) {
  Generator data(11);
  const int64_t b = spec.b, t = spec.t;
  BertBatch x;
  x.ids = randint(0, c.vocab_size, {b, t}, {.dtype = DType::i64}, &data);
  if (spec.token_types)
    x.types = randint(0, c.type_vocab_size, {b, t}, {.dtype = DType::i64}, &data);
  x.mask = ones({b, t}, {.dtype = DType::i64});
  x.mask.narrow(0, 1, 1).narrow(1, spec.pad_second, t - spec.pad_second).fill_(0);
  x.mask.narrow(0, b - 1, 1).narrow(1, spec.pad_last, t - spec.pad_last).fill_(0);
  x.labels = randint(0, c.vocab_size, {b, t}, {.dtype = DType::i64}, &data);
  x.labels.narrow(1, 0, 3).fill_(-100);
  x.classes = randint(0, c.num_labels, {b}, {.dtype = DType::i64}, &data);
  return x;
}

Tensor bert_loss(bert::Bert& m, const BertBatch& x) {
  Tensor h = m.forward(x.ids, x.types, x.mask);
  return m.mlm_loss(h, x.labels) + m.classification_loss(h, x.classes);
}

BertOutputs bert_eval(bert::Bert& m, const BertBatch& x) {
  autograd::NoGradGuard no_grad;
  m.eval();
  const Tensor h = m.forward(x.ids, x.types, x.mask);
  return {h, m.mlm_logits(h), m.classify(h)};
}

VitBatch vit_batch(const vit::ViTConfig& c, int64_t b) {
  Generator data(11);
  VitBatch x;
  x.images = randn({b, c.in_channels, c.image_size, c.image_size}, {}, &data);
  x.labels = randint(0, c.num_classes, {b}, {.dtype = DType::i64}, &data);
  return x;
}

void check_gpt_layers(gpt::GPT& twin, const std::string& dims, const std::string& what) {
  RANK_CHECK(twin.wte()->type_name() == "VocabParallelEmbedding" + dims &&
                 twin.wpe()->type_name() == "Embedding" + dims &&
                 twin.ln_f()->type_name() == "LayerNorm" + dims &&
                 twin.lm_head()->type_name() == "VocabParallelLMHead" + dims,
             what, ": layers ", twin.wte()->type_name(), ", ", twin.wpe()->type_name(), ", ",
             twin.ln_f()->type_name(), ", ", twin.lm_head()->type_name());
}

void check_gpt_eval(gpt::GPT& serial, gpt::GPT& twin, const Tensor& ids, int64_t prompt,
                    int64_t new_tokens, const std::string& what) {
  autograd::NoGradGuard no_grad;
  serial.eval();
  twin.eval();
  check_close(twin.forward(ids), serial.forward(ids), what + " logits");
  const Tensor one = ids.narrow(0, 0, 1).narrow(1, 0, prompt).contiguous();
  check_close(twin.forward(one), serial.forward(one), what + " logits of one prompt");
  Generator gs(3), gt(3);
  const Tensor gen_s = serial.generate(one, new_tokens, /*temperature=*/0.0, /*top_k=*/0, gs);
  const Tensor gen_t = twin.generate(one, new_tokens, /*temperature=*/0.0, /*top_k=*/0, gt);
  RANK_CHECK(rel_error(gen_t.to(DType::f32), gen_s.to(DType::f32)) == 0.0, what,
             ": generated tokens differ");
}

}  // namespace tessera::parallel::testing
