// Embedding: a lookup table weight (num_embeddings, dim) drawn from N(0, init_std), like
// torch.nn.Embedding with GPT-2's initialisation. Build it through make_embedding (factory.h).
#pragma once

#include "core/generator.h"
#include "models/nn/module.h"
#include "models/nn/parallel_style.h"

namespace tessera::nn {

struct EmbeddingSpec {
  int64_t num_embeddings = 0;
  int64_t dim = 0;
  double init_std = 0.02;
};

class Embedding : public Module {
 public:
  // `style`: ParallelStyle::vocab for a table a tensor-parallel twin would split by rows.
  Embedding(const EmbeddingSpec& spec, Generator& gen, ParallelStyle style = ParallelStyle::none);
  std::string type_name() const override { return "Embedding"; }

  // ids (...) i32/i64 -> (..., dim)
  virtual Tensor forward(const Tensor& ids);
  // The embedding of one id, (dim), to add to (broadcast over) forward()'s output, its gradient
  // that of every position it was added to (BERT's token type 0). A twin gives its layout's piece
  // of the row (2D: the grid column's features, (dim / q)).
  virtual Tensor row(int64_t id);

  const Tensor& weight() const { return weight_; }  // (num_embeddings, dim)
  const EmbeddingSpec& spec() const { return spec_; }
  ParallelStyle parallel_style() const { return style_; }

 protected:
  // For the vocab-parallel twin: the spec and hint without a table; adopt() registers the shard.
  Embedding(const EmbeddingSpec& spec, ParallelStyle style, std::nullptr_t);
  void adopt(const Tensor& weight, const parallel::tensor::Placement& placement);
  // row(id)'s check, which every twin runs before any collective: 0 <= id < num_embeddings.
  void check_id(int64_t id) const;

 private:
  static void check_spec(const EmbeddingSpec& spec);
  EmbeddingSpec spec_;
  ParallelStyle style_;
  Tensor weight_;
};

}  // namespace tessera::nn
