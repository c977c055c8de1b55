// Tensor factories: empty, zeros, ones, full, arange, from host data, and random draws (counter
// based, see generator.h).
#pragma once

#include <vector>

#include "core/generator.h"
#include "core/tensor.h"

namespace tessera {

struct TensorOptions {
  DType dtype = DType::f32;
  Device device = kCPU;
  bool requires_grad = false;
};

Tensor empty(const Shape& shape, const TensorOptions& opts = {});
Tensor zeros(const Shape& shape, const TensorOptions& opts = {});
Tensor ones(const Shape& shape, const TensorOptions& opts = {});
Tensor full(const Shape& shape, double value, const TensorOptions& opts = {});
Tensor scalar_tensor(double value, const TensorOptions& opts = {});
// [start, end) in steps of `step`; dtype from opts.
Tensor arange(double start, double end, double step = 1.0, const TensorOptions& opts = {.dtype = DType::i64});
Tensor empty_like(const Tensor& t);
Tensor zeros_like(const Tensor& t);
Tensor ones_like(const Tensor& t);

// Copies host values into a new tensor of dtype_of<T> (double gives f32) on `device`.
template <typename T>
Tensor from_vector(const std::vector<T>& values, const Shape& shape, Device device = kCPU);
// The same, converted to opts.dtype.
template <typename T>
Tensor from_vector(const std::vector<T>& values, const Shape& shape, const TensorOptions& opts);
Tensor from_vector(const std::vector<float>& values, const Shape& shape, const TensorOptions& opts = {});

// Random draws. The value at flat index i depends only on (generator seed, offset, i).
Tensor randn(const Shape& shape, const TensorOptions& opts = {}, Generator* gen = nullptr);
Tensor rand(const Shape& shape, const TensorOptions& opts = {}, Generator* gen = nullptr);
Tensor randint(int64_t low, int64_t high, const Shape& shape,
               const TensorOptions& opts = {.dtype = DType::i64}, Generator* gen = nullptr);
// Draw into an existing tensor: normal(mean, std) or uniform [low, high).
void normal_(const Tensor& t, double mean, double std, Generator* gen = nullptr);
void uniform_(const Tensor& t, double low, double high, Generator* gen = nullptr);

// Where a slice sits in a draw made for a whole tensor: the draw's seed and first counter (what
// Generator::reserve(numel(whole)) returned), the whole tensor's shape, and the slice's start per
// dimension. A shard drawn at its slice holds exactly the values of the same slice of the whole draw
// (tensor-parallel layers initialise their shards this way, equal to the serial layer).
struct DrawSlice {
  uint64_t seed = 0;
  uint64_t first = 0;
  Shape whole;
  std::vector<int64_t> start;  // one per dimension of `whole`
};
// t (the slice's shape) receives what normal_ / uniform_ would put at [start, start + t.shape()) of
// the whole tensor. Reserves no counters (the caller reserved the whole draw).
void normal_slice_(const Tensor& t, double mean, double std, const DrawSlice& at);
void uniform_slice_(const Tensor& t, double low, double high, const DrawSlice& at);

}  // namespace tessera
