// Walks an N-d index space over several operands with their own element strides, one innermost
// row at a time. Dimensions that are contiguous across all operands are merged first, so a
// contiguous tensor is one long row. Shared by copies and the element-wise CPU kernels.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "core/shape.h"

namespace tessera {

template <size_t N>
class StridedLoop {
 public:
  // strides[k] are operand k's strides over `shape` (0 where it is broadcast).
  StridedLoop(const Shape& shape, const std::array<Strides, N>& strides) {
    // Drop size-1 dims, then merge dim d into d+1 when every operand steps across it evenly.
    for (size_t d = 0; d < shape.size(); ++d) {
      if (shape[d] == 1) continue;
      std::array<int64_t, N> s;
      for (size_t k = 0; k < N; ++k) s[k] = strides[k][d];
      if (!sizes_.empty()) {
        bool mergeable = true;
        for (size_t k = 0; k < N; ++k) mergeable &= strides_.back()[k] == s[k] * shape[d];
        if (mergeable) {
          sizes_.back() *= shape[d];
          strides_.back() = s;
          continue;
        }
      }
      sizes_.push_back(shape[d]);
      strides_.push_back(s);
    }
    if (sizes_.empty()) {
      sizes_.push_back(1);
      strides_.push_back({});
    }
  }

  int64_t row_size() const { return sizes_.back(); }
  std::array<int64_t, N> row_strides() const { return strides_.back(); }
  int64_t num_rows() const {
    int64_t n = 1;
    for (size_t d = 0; d + 1 < sizes_.size(); ++d) n *= sizes_[d];
    return n;
  }

  // fn(const std::array<int64_t, N>& offsets) for rows [begin, end): the element offset of each
  // operand at the row's start. Rows may be split across threads by the caller.
  template <typename Fn>
  void for_rows(int64_t begin, int64_t end, Fn&& fn) const {
    const int64_t outer = int64_t(sizes_.size()) - 1;
    std::vector<int64_t> index(outer, 0);
    std::array<int64_t, N> off{};
    int64_t r = begin;
    for (int64_t d = outer - 1; d >= 0; --d) {  // unravel `begin`
      index[d] = r % sizes_[d];
      r /= sizes_[d];
      for (size_t k = 0; k < N; ++k) off[k] += index[d] * strides_[d][k];
    }
    for (int64_t row = begin; row < end; ++row) {
      fn(off);
      for (int64_t d = outer - 1; d >= 0; --d) {  // odometer step
        for (size_t k = 0; k < N; ++k) off[k] += strides_[d][k];
        if (++index[d] < sizes_[d]) break;
        for (size_t k = 0; k < N; ++k) off[k] -= sizes_[d] * strides_[d][k];
        index[d] = 0;
      }
    }
  }

 private:
  std::vector<int64_t> sizes_;
  std::vector<std::array<int64_t, N>> strides_;
};

}  // namespace tessera
