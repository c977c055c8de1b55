// Dropout as a module: active only in training mode. Its masks come from the default generator, so
// activation checkpointing (which rewinds that generator) replays the same masks. Under sequence
// parallelism a Dropout sees one chunk of the tensor the serial layer drops and draws that chunk
// of the serial mask (DropoutChunk).
#pragma once

#include <cstdint>

#include "models/nn/module.h"

namespace tessera::nn {

// Where a Dropout's input lies in the tensor the serial layer drops: chunk `index` of `parts`
// equal chunks along `dim` (sequence parallelism: dim 1 of (B, T, C), one chunk per rank of the
// tensor group). parts 1: the whole tensor.
struct DropoutChunk {
  int64_t dim = 0;
  int parts = 1;
  int index = 0;
};

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
  double p_;
  DropoutChunk chunk_;
};

}  // namespace tessera::nn
