// BlockShape (see block_shape.h).
#include "models/train/block_shape.h"

namespace tessera::train {
namespace {

template <typename ModelConfig>
BlockShape shape_of(const ModelConfig& m) {
  return {.d_model = m.d_model,
          .n_heads = m.n_heads,
          .mlp_hidden = m.mlp_hidden == 0 ? 4 * m.d_model : m.mlp_hidden};
}

}  // namespace

std::optional<BlockShape> block_shape(const TrainConfig& c) {
  switch (c.kind) {
    case ModelKind::gpt:
      return shape_of(c.gpt);
    case ModelKind::bert:
      return shape_of(c.bert);
    case ModelKind::vit:
      return shape_of(c.vit);
    case ModelKind::custom:
      return std::nullopt;
  }
  return std::nullopt;
}

}  // namespace tessera::train
