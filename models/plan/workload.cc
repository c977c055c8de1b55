// The layout-free shape of a training run (see workload.h).
#include "models/plan/workload.h"

#include "core/error.h"

namespace tessera::plan {
namespace {

int64_t block_params(int64_t d, int64_t hidden, bool bias) {
  const int64_t b = bias ? 1 : 0;
  const int64_t attn = d * 3 * d + b * 3 * d + d * d + b * d;
  const int64_t mlp = d * hidden + b * hidden + hidden * d + b * d;
  return 2 * 2 * d + attn + mlp;  // two LayerNorms (weight and bias)
}

DType dtype_of(const std::string& name) {
  if (name == "bf16") return DType::bf16;
  if (name == "f16") return DType::f16;
  return DType::f32;
}

Workload gpt_workload(const train::TrainConfig& c) {
  const gpt::GPTConfig& g = c.gpt;
  Workload w;
  w.n_layers = g.n_layers, w.d_model = g.d_model, w.n_heads = g.n_heads;
  w.mlp_hidden = g.mlp_hidden > 0 ? g.mlp_hidden : 4 * g.d_model;
  w.vocab = g.vocab_size, w.embedding_rows = g.vocab_size, w.positions = g.context_length;
  w.seq = c.seq_len(), w.outputs_per_sample = w.seq;
  w.bias = g.bias, w.tied_head = g.tie_embeddings, w.causal = true, w.checkpoint = g.checkpoint;
  w.parameters = gpt::gpt_num_parameters(g);
  return w;
}

Workload bert_workload(const train::TrainConfig& c) {
  const bert::BertConfig& b = c.bert;
  Workload w;
  w.n_layers = b.n_layers, w.d_model = b.d_model, w.n_heads = b.n_heads;
  w.mlp_hidden = b.mlp_hidden > 0 ? b.mlp_hidden : 4 * b.d_model;
  w.vocab = b.num_labels > 0 ? b.num_labels : b.vocab_size;
  w.embedding_rows = b.vocab_size, w.positions = b.max_positions;
  w.seq = c.seq_len(), w.outputs_per_sample = b.num_labels > 0 ? 1 : w.seq;
  w.bias = true, w.tied_head = b.num_labels == 0, w.causal = false, w.checkpoint = b.checkpoint;
  const int64_t d = b.d_model;
  const int64_t embeddings = (b.vocab_size + b.max_positions + b.type_vocab_size) * d + 2 * d;
  const int64_t head = b.num_labels > 0 ? d * d + d + d * b.num_labels + b.num_labels
                                        : d * d + d + 2 * d + b.vocab_size;
  w.parameters = embeddings + b.n_layers * block_params(d, w.mlp_hidden, true) + head;
  return w;
}

Workload vit_workload(const train::TrainConfig& c) {
  const vit::ViTConfig& v = c.vit;
  Workload w;
  w.n_layers = v.n_layers, w.d_model = v.d_model, w.n_heads = v.n_heads;
  w.mlp_hidden = v.mlp_hidden > 0 ? v.mlp_hidden : 4 * v.d_model;
  w.vocab = v.num_classes, w.embedding_rows = 0;
  w.seq = v.num_patches() + 1, w.positions = w.seq, w.outputs_per_sample = 1;
  w.patch_features = v.in_channels * v.patch_size * v.patch_size;
  w.bias = true, w.tied_head = false, w.causal = false, w.checkpoint = v.checkpoint;
  const int64_t d = v.d_model;
  w.parameters = w.patch_features * d + d + d + w.seq * d +
                 v.n_layers * block_params(d, w.mlp_hidden, true) + 2 * d + d * v.num_classes +
                 v.num_classes;
  return w;
}

}  // namespace

double Workload::forward_flops_per_sample() const {
  const double t = double(seq), d = double(d_model), h = double(mlp_hidden);
  const double linears = 2.0 * t * (3 * d * d + d * d + 2 * d * h);  // qkv, proj, the MLP
  // Scores and values: 2 t^2 d each; a causal mask computes half the pairs.
  const double attention = 2.0 * 2.0 * t * t * d * (causal ? 0.5 : 1.0);
  const double head = 2.0 * double(outputs_per_sample) * d * double(vocab) +
                      2.0 * t * double(patch_features) * d;
  return double(n_layers) * (linears + attention) + head;
}

int64_t Workload::units_per_sample() const { return kind == train::ModelKind::vit ? 1 : seq; }

Workload workload_of(const train::TrainConfig& c) {
  Workload w;
  switch (c.kind) {
    case train::ModelKind::gpt:
      w = gpt_workload(c);
      break;
    case train::ModelKind::bert:
      w = bert_workload(c);
      break;
    case train::ModelKind::vit:
      w = vit_workload(c);
      break;
    case train::ModelKind::custom:
      TS_FAIL("plan", "expected a bundled model (model.type gpt, bert or vit): a custom model's "
                      "layers are its own, which the planner cannot count");
  }
  w.kind = c.kind;
  w.block_parameters = block_params(w.d_model, w.mlp_hidden, w.bias);
  w.batch = c.train.batch_size;
  w.dtype = dtype_of(c.precision.dtype);
  const std::string optimizer = c.optimizer.value("type", "adamw");
  if (optimizer == "sgd")
    w.optimizer_bytes = c.optimizer.value("momentum", 0.0) > 0 ? 4 : 0;
  else if (optimizer == "lars")
    w.optimizer_bytes = 4;
  return w;
}

}  // namespace tessera::plan
