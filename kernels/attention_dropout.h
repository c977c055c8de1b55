// Where an attention call's probabilities sit in the layer's whole dropout draw: the counter of
// probability (t, s) of one head, shared by the CPU and CUDA kernels so both draw the same mask,
// and so a head shard (tensor parallelism) or a (query, key) block of a sharded sequence (sequence
// parallelism) draws the serial layer's mask.
#pragma once

#include <cstdint>

#include "core/error.h"
#include "core/macros.h"
#include "kernels/kernels.h"

namespace tessera::kernels {

// The whole draw is (B, heads, rows, cols), row-major from `offset`; this call holds H heads from
// head_offset, and its (T, S) probabilities are rows [row_offset, + T) and columns
// [col_offset, + S) of each head.
struct AttentionDropoutGrid {
  uint64_t offset = 0;
  int64_t H = 1;  // this call's heads
  int64_t heads = 1, head_offset = 0;
  int64_t rows = 0, cols = 0;
  int64_t row_offset = 0, col_offset = 0;
};

// The counter of probability (query t, key s) of this call's (batch, head) row bh = b * H + h:
//   offset + ((b * heads + head_offset + h) * rows + row_offset + t) * cols + col_offset + s.
TS_HOST_DEVICE TS_INLINE uint64_t attention_dropout_index(const AttentionDropoutGrid& g, int64_t bh,
                                                          int64_t t, int64_t s) {
  const int64_t head = (bh / g.H) * g.heads + g.head_offset + bh % g.H;
  return g.offset + uint64_t(head * g.rows + g.row_offset + t) * uint64_t(g.cols) +
         uint64_t(g.col_offset + s);
}

// The grid of a call of H heads, T queries and S keys, from its options (0 sizes: this call's
// own); throws when the call does not fit inside the grid it names.
inline AttentionDropoutGrid attention_dropout_grid(const char* op, const AttentionOptions& opts,
                                                   int64_t H, int64_t T, int64_t S) {
  AttentionDropoutGrid g;
  g.offset = opts.offset;
  g.H = H > 0 ? H : 1;
  g.heads = opts.dropout_heads > 0 ? opts.dropout_heads : H;
  g.head_offset = opts.dropout_head_offset;
  g.rows = opts.dropout_rows > 0 ? opts.dropout_rows : T;
  g.cols = opts.dropout_cols > 0 ? opts.dropout_cols : S;
  g.row_offset = opts.dropout_row_offset;
  g.col_offset = opts.dropout_col_offset;
  TS_CHECK(g.head_offset >= 0 && g.head_offset + H <= g.heads, op, "expected heads [",
           g.head_offset, ", ", g.head_offset + H, ") inside the layer's ", g.heads,
           " dropout heads");
  TS_CHECK(g.row_offset >= 0 && g.row_offset + T <= g.rows && g.col_offset >= 0 &&
               g.col_offset + S <= g.cols,
           op, "expected the (", T, ", ", S, ") probabilities at rows [", g.row_offset, ", ",
           g.row_offset + T, ") and columns [", g.col_offset, ", ", g.col_offset + S,
           ") inside the (", g.rows, ", ", g.cols, ") dropout grid");
  return g;
}

}  // namespace tessera::kernels
