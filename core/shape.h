// Shapes and strides (in elements) and the arithmetic on them: sizes, contiguous strides,
// broadcasting, dimension wrapping.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tessera {

using Shape = std::vector<int64_t>;
using Strides = std::vector<int64_t>;

inline int64_t shape_numel(const Shape& shape) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return n;
}
Strides contiguous_strides(const Shape& shape);
// "(2, 3)"; a scalar is "()".
std::string shape_str(const Shape& shape);
// Wraps a possibly negative dim into [0, ndim); throws naming `op` when out of range.
int64_t wrap_dim(int64_t dim, int64_t ndim, const char* op);
// NumPy broadcasting of two shapes; throws naming `op` when they do not broadcast.
Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op);

}  // namespace tessera
