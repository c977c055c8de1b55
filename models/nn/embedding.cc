// Embedding construction and lookup (see embedding.h).
#include "models/nn/embedding.h"

#include "autograd/ops.h"

namespace tessera::nn {

void Embedding::check_spec(const EmbeddingSpec& spec) {
  TS_CHECK(spec.num_embeddings > 0 && spec.dim > 0, "Embedding",
           "expected positive num_embeddings and dim, got ", spec.num_embeddings, " and ",
           spec.dim);
}

Embedding::Embedding(const EmbeddingSpec& spec, ParallelStyle style, std::nullptr_t)
    : spec_(spec), style_(style) {
  check_spec(spec);
}

void Embedding::adopt(const Tensor& weight, const parallel::tensor::Placement& placement) {
  weight_ = register_parameter("weight", weight, placement);
}

Embedding::Embedding(const EmbeddingSpec& spec, Generator& gen, ParallelStyle style)
    : spec_(spec), style_(style) {
  check_spec(spec);
  Tensor w = empty({spec.num_embeddings, spec.dim});
  normal_(w, 0.0, spec.init_std, &gen);
  weight_ = register_parameter("weight", w);
}

Tensor Embedding::forward(const Tensor& ids) { return embedding(weight_, ids); }

void Embedding::check_id(int64_t id) const {
  TS_CHECK(id >= 0 && id < spec_.num_embeddings, type_name(), "expected an id in [0, ",
           spec_.num_embeddings, "), got ", id);
}

Tensor Embedding::row(int64_t id) {
  check_id(id);
  return select(weight_, 0, id);
}

}  // namespace tessera::nn
