// Dropout module (see dropout.h).
#include "models/nn/dropout.h"

#include "autograd/ops.h"

namespace tessera::nn {

Dropout::Dropout(double p, const DropoutChunk& chunk) : p_(p) {
  TS_CHECK(p >= 0.0 && p < 1.0, "Dropout", "expected p in [0, 1), got ", p);
  set_chunk(chunk);
}

void Dropout::set_chunk(const DropoutChunk& chunk) {
  TS_CHECK(chunk.parts >= 1 && chunk.index >= 0 && chunk.index < chunk.parts, "Dropout",
           "expected chunk index in [0, parts) with parts >= 1, got index ", chunk.index, " of ",
           chunk.parts);
  chunk_ = chunk;
}

Tensor Dropout::forward(const Tensor& x) {
  if (!is_training() || p_ == 0.0) return x;
  if (chunk_.parts == 1) return dropout(x, p_, /*training=*/true);
  TS_CHECK(x.defined() && chunk_.dim < x.dim() && -chunk_.dim <= x.dim(), "Dropout",
           "expected an input with a dim ", chunk_.dim, " (the chunked one), got ",
           x.defined() ? x.describe() : "undefined");
  const int64_t n = x.size(chunk_.dim);  // this chunk's length; the whole's is n * parts
  return dropout_slice(x, p_,
                       {.dim = chunk_.dim, .size = n * chunk_.parts, .start = n * chunk_.index},
                       /*training=*/true);
}

}  // namespace tessera::nn
