// Dropout as a module: active only in training mode. Its masks come from the default generator, so
// activation checkpointing (which rewinds that generator) replays the same masks. Under sequence
// parallelism a Dropout sees one chunk of the tensor the serial layer drops and draws that chunk
// of the serial mask (DropoutChunk).
#pragma once

#include <cstdint>

#include "core/generator.h"
#include "models/nn/module.h"

namespace tessera::nn {

// Where a Dropout's input lies in the tensor the serial layer drops: chunk `index` of `parts`
// equal chunks along `dim` (sequence parallelism: dim 1 of (B, T, C), one chunk per rank of the
// tensor group; 2D tensor parallelism: the last dim, by grid column), and within that, batch chunk
// `batch_index` of `batch_parts` along dim 0 (2D: by grid row). parts 1: the whole tensor. With a
// second_index the input is two chunks along `dim`, index then second_index, each half of it (the
// zigzag layout of sequence parallelism).
struct DropoutChunk {
  int64_t dim = 0;
  int parts = 1;
  int index = 0;
  int batch_parts = 1;  // > 1 needs dim != 0
  int batch_index = 0;
  int second_index = -1;  // >= 0: a second chunk, after the first
  // > 1: the last dim is cut as well, this rank holding chunk feature_index of feature_parts
  // (sequence parallelism under 2D / 3D: dim 1 is the sequence chunk, the batch and the features
  // are the grid's); dim must then be another one.
  int feature_parts = 1;
  int feature_index = 0;
};

// A generator at the first counter of run `index` of `parts` equal runs of `run` counters, all of
// them reserved from the default generator (the serial draw of which this rank draws one run).
// The batch is the outermost dim of a tensor and of attention's probabilities, so a batch chunk's
// counters are one such run. parts 1: the default generator's next `run` counters.
Generator batch_chunk_generator(uint64_t run, int parts, int index);

// Dropout masks by place in the model, not by call order. The default generator is one stream, so
// a layer's masks depend on every draw before it: a pipeline stage, which runs only its own layers
// and interleaves micro-batches, would draw other masks than the serial model. While a
// MicroBatchDropout is alive, enter_dropout_unit(u) restarts the default generator at a seed keyed
// by (the scope's key, its micro-batch, u); the models call it at each pipeline unit (0: the
// embeddings, i + 1: block i), so every layout, pipelined or not, draws the same masks. Outside a
// scope enter_dropout_unit does nothing (the stream as drawn). Activation checkpointing still
// replays a block's masks: it rewinds to the state the block started from.
class MicroBatchDropout {
 public:
  MicroBatchDropout(uint64_t key, uint64_t micro_batch);
  ~MicroBatchDropout();
  MicroBatchDropout(const MicroBatchDropout&) = delete;
  MicroBatchDropout& operator=(const MicroBatchDropout&) = delete;

 private:
  bool had_previous_ = false;
  uint64_t previous_ = 0;
};
void enter_dropout_unit(int64_t unit);

// Sets `chunk` on every Dropout below `m` (its children, recursively).
void set_dropout_chunks(Module& m, const DropoutChunk& chunk);

class Dropout : public Module {
 public:
  explicit Dropout(double p = 0.0, const DropoutChunk& chunk = {});
  std::string type_name() const override { return "Dropout"; }

  // Same shape; identity in eval mode or when p == 0. With a chunk of parts > 1 the generator
  // advances by the whole tensor's counters, as the serial layer's does.
  Tensor forward(const Tensor& x);
  double p() const { return p_; }
  const DropoutChunk& chunk() const { return chunk_; }
  // Set by the layer that knows its input is a chunk (Block, under sequence parallelism).
  void set_chunk(const DropoutChunk& chunk);

 private:
  Tensor drop_chunk(const Tensor& x) const;
  Tensor drop_chunk(const Tensor& x, const DropoutChunk& chunk) const;
  Tensor drop_feature_chunk(const Tensor& x) const;

  double p_;
  DropoutChunk chunk_;
};

}  // namespace tessera::nn
