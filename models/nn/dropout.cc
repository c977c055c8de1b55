// Dropout module (see dropout.h).
#include "models/nn/dropout.h"

#include "autograd/ops.h"

namespace tessera::nn {

Dropout::Dropout(double p, const DropoutChunk& chunk) : p_(p) {
  TS_CHECK(p >= 0.0 && p < 1.0, "Dropout", "expected p in [0, 1), got ", p);
  set_chunk(chunk);
}

Generator batch_chunk_generator(uint64_t run, int parts, int index) {
  Generator& g = default_generator();
  const uint64_t first = g.reserve(run * uint64_t(parts));
  Generator at;
  at.set_state(g.seed(), first + run * uint64_t(index));
  return at;
}

namespace {

uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// The key of the micro-batch whose forward runs on this thread, when a scope set one.
thread_local bool micro_batch_keyed = false;
thread_local uint64_t micro_batch_key = 0;

}  // namespace

MicroBatchDropout::MicroBatchDropout(uint64_t key, uint64_t micro_batch)
    : had_previous_(micro_batch_keyed), previous_(micro_batch_key) {
  micro_batch_keyed = true;
  micro_batch_key = splitmix64(splitmix64(key) ^ micro_batch);
}

MicroBatchDropout::~MicroBatchDropout() {
  micro_batch_keyed = had_previous_;
  micro_batch_key = previous_;
}

void enter_dropout_unit(int64_t unit) {
  if (micro_batch_keyed) default_generator().set_state(splitmix64(micro_batch_key ^ uint64_t(unit)), 0);
}

void set_dropout_chunks(Module& m, const DropoutChunk& chunk) {
  for (const auto& child : m.children()) {
    if (auto* d = dynamic_cast<Dropout*>(child.get())) d->set_chunk(chunk);
    set_dropout_chunks(*child, chunk);
  }
}

void Dropout::set_chunk(const DropoutChunk& chunk) {
  TS_CHECK(chunk.parts >= 1 && chunk.index >= 0 && chunk.index < chunk.parts, "Dropout",
           "expected chunk index in [0, parts) with parts >= 1, got index ", chunk.index, " of ",
           chunk.parts);
  TS_CHECK(chunk.batch_parts >= 1 && chunk.batch_index >= 0 &&
               chunk.batch_index < chunk.batch_parts && (chunk.batch_parts == 1 || chunk.dim != 0),
           "Dropout",
           "expected batch chunk index in [0, batch_parts) with batch_parts >= 1 (and a chunked "
           "dim other than 0), got index ",
           chunk.batch_index, " of ", chunk.batch_parts, " with dim ", chunk.dim);
  TS_CHECK(chunk.feature_parts >= 1 && chunk.feature_index >= 0 &&
               chunk.feature_index < chunk.feature_parts &&
               (chunk.feature_parts == 1 || (chunk.dim != -1 && chunk.parts >= 1)),
           "Dropout", "expected a feature chunk index in [0, feature_parts) beside a chunked dim other "
           "than the last, got ", chunk.feature_index, " of ", chunk.feature_parts, " with dim ",
           chunk.dim);
  TS_CHECK(chunk.second_index < 0 || (chunk.second_index < chunk.parts && chunk.second_index != chunk.index),
           "Dropout", "expected a second chunk index in [0, parts) other than the first, got ",
           chunk.second_index, " of ", chunk.parts, " (first ", chunk.index, ")");
  chunk_ = chunk;
}

Tensor Dropout::forward(const Tensor& x) {
  if (!is_training() || p_ == 0.0) return x;
  if (chunk_.feature_parts > 1) return drop_feature_chunk(x);
  return drop_chunk(x);
}

// Sequence parallelism under 2D / 3D: x is a block of the serial tensor in the batch, the sequence
// and the features at once. The serial mask's counters run along the features innermost, so the
// piece of this rank's rows over every feature is drawn (feature_parts times x's counters, a
// small cost beside the layer) and this rank's features are cut from it.
Tensor Dropout::drop_feature_chunk(const Tensor& x) const {
  TS_CHECK(x.defined() && x.dim() >= 2, "Dropout", "expected an input with features in its last dim, got ",
           x.defined() ? x.describe() : "undefined");
  Shape rows = x.shape();
  const int64_t width = rows.back();
  rows.back() *= chunk_.feature_parts;
  DropoutChunk whole_rows = chunk_;
  whole_rows.feature_parts = 1;
  whole_rows.feature_index = 0;
  const Tensor mask = drop_chunk(ones(rows, {.dtype = x.dtype(), .device = x.device()}), whole_rows);
  return mul(x, narrow(mask, -1, width * chunk_.feature_index, width));  // kept: 1 / (1 - p)
}

Tensor Dropout::drop_chunk(const Tensor& x) const { return drop_chunk(x, chunk_); }

Tensor Dropout::drop_chunk(const Tensor& x, const DropoutChunk& c) const {
  if (c.parts == 1 && c.batch_parts == 1) return dropout(x, p_, /*training=*/true);
  TS_CHECK(x.defined() && c.dim < x.dim() && -c.dim <= x.dim() &&
               (c.batch_parts == 1 || x.dim() >= 2),
           "Dropout", "expected an input with a dim ", c.dim, " (the chunked one)",
           c.batch_parts > 1 ? " and a batch dim 0" : "", ", got ",
           x.defined() ? x.describe() : "undefined");
  const int held = c.second_index >= 0 ? 2 : 1;  // chunks of `parts` in x
  const int64_t n = x.size(c.dim) / held;       // one chunk's length; the whole's n * parts
  TS_CHECK(n * held == x.size(c.dim), "Dropout", "expected an even length along dim ",
           c.dim, " for two chunks, got ", x.describe());
  // This batch chunk's run of the whole tensor's counters (all of it when the batch is whole).
  Generator at = batch_chunk_generator(uint64_t(x.numel() / held) * uint64_t(c.parts),
                                       c.batch_parts, c.batch_index);
  if (c.parts == 1) return dropout(x, p_, /*training=*/true, &at);
  auto drop_piece = [&](const Tensor& piece, int index) {
    Generator from = at;  // every chunk reads the same run of counters
    return dropout_slice(piece, p_, {.dim = c.dim, .size = n * c.parts, .start = n * index},
                         /*training=*/true, &from);
  };
  if (held == 1) return drop_piece(x, c.index);
  return cat({drop_piece(narrow(x, c.dim, 0, n), c.index),
              drop_piece(narrow(x, c.dim, n, n), c.second_index)},
             c.dim);
}

}  // namespace tessera::nn
