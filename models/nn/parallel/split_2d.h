// What model code (GPT, BERT, ViT) needs of the 2D activation layout (parallel/tensor/summa.h)
// beyond the factories' layers, as SequenceSplit is for sequence parallelism: off (every call the
// identity) unless the context is tensor-parallel in mode 2d or 2.5d. Between the layers a rank
// (grid row r, column s) holds the block (B / q, T, C / q) of the serial (B, T, C) (2.5D: B / (d q)
// rows, summa.h); the layers at the model's edges take and give whole tensors (factory.h).
#pragma once

#include <cstdint>

#include "core/tensor.h"
#include "models/nn/build_context.h"
#include "parallel/tensor/summa.h"

namespace tessera::nn {

class Split2D {
 public:
  Split2D() = default;  // off
  // On when ctx.tensor_2d().
  explicit Split2D(const BuildContext& ctx);

  bool on() const { return grid_.row != nullptr; }
  int q() const { return grid_.q(); }
  const parallel::tensor::SummaGrid& grid() const { return grid_; }

  // The serial batch B of a block (B / q, ...): its rows times q (2.5D: d q; its rows when off).
  int64_t batch(const Tensor& block) const;
  // Rows to add to a batch of b rows so that it splits over the grid rows (0 when off).
  int64_t batch_padding(int64_t b) const;
  // This rank's features (the last dim's chunk s) of a tensor every rank holds whole and adds to
  // its block (ViT's class token and positions, broadcast over the batch): backward all-gathers
  // the chunks' gradients over the row group and sums them over the batch group (the batch
  // chunks), so every rank holds the whole tensor's serial gradient.
  Tensor features(const Tensor& x) const;

 private:
  parallel::tensor::SummaGrid grid_;
};

}  // namespace tessera::nn
