// What model code (BERT, ViT) needs of the 3D activation layout (parallel/tensor/cube_3d.h) beyond
// the factories' layers, as Split2D is for mode 2d: off (every call the identity) unless the
// context is tensor-parallel in mode 3d. Between the layers rank (i, j, k) holds the piece
// (B / q, T, C / q^2) of the serial (B, T, C): batch chunk i, features chunk k q + j.
// A parameter every token adds (ViT's class token and positions) is cut along its features as a
// 3D vector (parallel/tensor/placement_3d.h): (..., C / q^3), chunk (k q + j) q + i, so nothing is
// replicated; features() all-gathers it over the weight group to the rank's chunk k q + j.
#pragma once

#include <cstdint>

#include "core/shape.h"
#include "core/tensor.h"
#include "models/nn/build_context.h"
#include "parallel/tensor/cube_3d.h"
#include "parallel/tensor/placement.h"

namespace tessera::nn {

// The placement of a parameter (..., C) whose last dim is cut as a 3D vector: local (..., C / q^3).
// Needs C divisible by q^3 (`op` names the layer in the error).
parallel::tensor::Placement features_placement_3d(const Shape& shape,
                                                  const parallel::tensor::CubeCoords& at,
                                                  const char* op);

class Split3D {
 public:
  Split3D() = default;  // off
  // On when ctx.tensor_3d().
  explicit Split3D(const BuildContext& ctx);

  bool on() const { return cube_.input != nullptr; }
  int q() const { return cube_.q(); }
  const parallel::tensor::Cube3D& cube() const { return cube_; }

  // The serial batch B of a piece (B / q, ...): its rows times q (its rows when off).
  int64_t batch(const Tensor& piece) const;
  // features_placement_3d(shape) on this rank's coordinates; replicated when off.
  parallel::tensor::Placement features_placement(const Shape& shape, const char* op) const;
  // A shard (..., C / q^3) by features_placement -> this rank's features chunk (..., C / q^2),
  // all-gathered over the weight group; backward reduce-scatters there, summing the q batch
  // chunks' gradients. The identity when off.
  Tensor features(const Tensor& shard) const;

 private:
  parallel::tensor::Cube3D cube_;
};

}  // namespace tessera::nn
