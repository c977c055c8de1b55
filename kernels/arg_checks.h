// Argument checks and op traits shared by the CPU and CUDA kernels, so both backends accept and
// refuse exactly the same calls with the same messages. Device checks stay with each backend.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/kernels.h"

namespace tessera::kernels {

// Comparisons and logical ops: any dtype in, bool out.
bool is_comparison_or_logic(BinaryOp op);
// The binary ops defined on integers as well as floats.
bool is_numeric_op(BinaryOp op);

// reduce(): dims sorted, unique and in range, out of keepdim shape, the output dtype the op
// produces, p > 0 for norms.
void check_reduce_args(ReduceOp op, const char* name, const Tensor& x,
                       const std::vector<int64_t>& dims, const Tensor& out, double param);

// gather / scatter_add: an i64 index of the same rank as both tensors, equal dtypes, and an index
// shape that fits (equal to `dense` when dense_equal, else within it; within `indexed` off `dim`).
// Index values are checked by each backend.
void check_index_args(const char* op, const Tensor& dense, const Tensor& index,
                      const Tensor& indexed, int64_t dim, bool dense_equal);

}  // namespace tessera::kernels
