// The 1D row of the twin table (see layer_twins.h): Megatron's pairs where the hint asks for them
// (column then row linears, the vocabulary-split embedding and head); every other layer, and a
// layer asked for with ParallelStyle::none, is the serial one, replicated on the tensor ranks.
#include "models/nn/layer_twins.h"
#include "models/nn/parallel/linear_1d.h"
#include "models/nn/parallel/vocab_1d.h"

namespace tessera::nn {
namespace {

std::shared_ptr<Linear> linear_1d(const LinearSpec& spec, const BuildContext& ctx,
                                  ParallelStyle style) {
  switch (style) {
    case ParallelStyle::column:
      return std::make_shared<ColumnParallelLinear>(spec, ctx);
    case ParallelStyle::row:
      return std::make_shared<RowParallelLinear>(spec, ctx);
    case ParallelStyle::none:
    case ParallelStyle::vocab:  // refused by make_linear before it gets here
      break;
  }
  return serial_twins().linear(spec, ctx, style);
}

std::shared_ptr<Embedding> embedding_1d(const EmbeddingSpec& spec, const BuildContext& ctx,
                                        ParallelStyle style) {
  if (style == ParallelStyle::vocab) return std::make_shared<VocabParallelEmbedding>(spec, ctx);
  return serial_twins().embedding(spec, ctx, style);
}

std::shared_ptr<LMHead> lm_head_1d(const LMHeadSpec& spec, const BuildContext& ctx,
                                   ParallelStyle style) {
  if (style == ParallelStyle::vocab) return std::make_shared<VocabParallelLMHead>(spec, ctx);
  return serial_twins().lm_head(spec, ctx, style);
}

// A head tied to a vocab-parallel embedding shares its shard; to a whole table, the table.
std::shared_ptr<LMHead> tied_lm_head_1d(const LMHeadSpec& spec, const Embedding& embedding,
                                        const BuildContext& ctx, ParallelStyle style) {
  auto* split = dynamic_cast<const VocabParallelEmbedding*>(&embedding);
  if (split == nullptr) return serial_twins().tied_lm_head(spec, embedding, ctx, style);
  TS_CHECK(style == ParallelStyle::vocab, "make_tied_lm_head",
           "expected ParallelStyle vocab for a head tied to a vocab-parallel embedding, got ",
           parallel_style_name(style));
  return std::make_shared<VocabParallelLMHead>(spec, *split, ctx);
}

}  // namespace

const LayerTwins& twins_1d() {
  static const LayerTwins row = [] {
    LayerTwins r = serial_twins();
    r.linear = linear_1d;
    r.embedding = embedding_1d;
    r.lm_head = lm_head_1d;
    r.tied_lm_head = tied_lm_head_1d;
    return r;
  }();
  return row;
}

}  // namespace tessera::nn
