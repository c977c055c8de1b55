// What a layer factory builds from: the generator that draws initial weights and, optionally, the
// parallel context whose tensor group the layer's twin is split over. Passed explicitly (no global);
// a bare Generator converts to a serial context, so serial call sites read as before.
#pragma once

#include <memory>
#include <optional>

#include "core/generator.h"
#include "parallel/comm/communicator.h"
#include "parallel/mesh/parallel_context.h"
#include "parallel/tensor/cube_3d.h"
#include "parallel/tensor/summa.h"

namespace tessera::nn {

class BuildContext {
 public:
  BuildContext(Generator& gen) : gen_(&gen) {}  // NOLINT: implicit, a serial context
  BuildContext(Generator& gen, const parallel::ParallelContext* parallel)
      : gen_(&gen), parallel_(parallel) {}

  Generator& generator() const { return *gen_; }
  const parallel::ParallelContext* parallel() const { return parallel_; }

  // Tensor parallelism: the group's size (1 when serial), this rank's index in it, the mode (none
  // when serial) and its name for messages ("none" when serial).
  int tensor_size() const { return parallel_ ? parallel_->config().tensor.size : 1; }
  int tensor_rank() const { return tensor_size() > 1 ? parallel_->tensor_group()->rank() : 0; }
  std::optional<parallel::TensorMode> tensor_mode() const;
  const char* tensor_mode_name() const;
  // True when layers are split: a context with tensor size > 1.
  bool tensor_parallel() const { return tensor_size() > 1; }
  // 1D sequence parallelism (parallel.tensor.sequence_parallel): the activations between the
  // tensor-parallel regions are sequence shards (models/nn/parallel/sequence_1d.h).
  bool sequence_parallel() const {
    return tensor_parallel() && parallel_->config().tensor.sequence_parallel;
  }
  // 2D (SUMMA) tensor parallelism: a context with tensor size > 1 in mode 2d, or in mode 2.5d
  // (Tesseract: the 2D layers on each depth layer's batch slice; 2D is 2.5D with depth 1).
  bool tensor_2d() const {
    return tensor_mode() == parallel::TensorMode::two_d ||
           tensor_mode() == parallel::TensorMode::two_point_five_d;
  }
  // 3D tensor parallelism (mode 3d): the layers split over the q x q x q cube
  // (parallel/tensor/cube_3d.h; models/nn/parallel/*_3d.h).
  bool tensor_3d() const { return tensor_mode() == parallel::TensorMode::three_d; }
  // The tensor group (null when serial).
  std::shared_ptr<parallel::Communicator> tensor_group() const {
    return tensor_parallel() ? parallel_->tensor_group() : nullptr;
  }
  // 2D mode: the q x q grid this rank sits on, its grid row ("2d_row") and column ("2d_col")
  // groups (see parallel/tensor/summa.h); 2.5D mode: its depth layer's grid ("2.5d_row",
  // "2.5d_col") with the depth ("2.5d_dep") and batch ("2.5d_xz") groups. Throws unless
  // tensor_2d().
  parallel::tensor::SummaGrid summa_grid() const;
  // 3D mode: the q x q x q cube's input, weight and output groups (see
  // parallel/tensor/cube_3d.h). Throws unless tensor_3d(), naming `op` (the layer that asks) when
  // the context is serial.
  parallel::tensor::Cube3D cube(const char* op) const;

 private:
  Generator* gen_;
  const parallel::ParallelContext* parallel_ = nullptr;
};

}  // namespace tessera::nn
