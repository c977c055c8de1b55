// AccessOrder: record the first training window, then follow it with a cursor.
#include "parallel/zero/access_order.h"

#include <algorithm>
#include <cstddef>

namespace tessera::parallel::zero {

std::vector<size_t> AccessOrder::on_gather(size_t p, int depth) {
  if (!recorded_) {
    order_.push_back(p);
    return {};
  }
  if (cursor_ == kLost) return {};
  if (cursor_ >= order_.size() || order_[cursor_] != p) {
    // Off the record: p's next place after the cursor, else its first (a window that starts with
    // an evaluation and goes on into training wraps around once).
    const auto from = order_.begin() + std::ptrdiff_t(std::min(cursor_, order_.size()));
    auto it = std::find(from, order_.end(), p);
    if (it == order_.end()) {
      it = std::find(order_.begin(), from, p);
      if (it == from) {
        cursor_ = kLost;
        return {};
      }
    }
    cursor_ = size_t(it - order_.begin());
  }
  ++cursor_;
  std::vector<size_t> next;
  for (size_t i = cursor_; i < order_.size() && int(next.size()) < depth; ++i)
    next.push_back(order_[i]);
  return next;
}

void AccessOrder::end_window(bool training) {
  if (!recorded_) {
    if (training && !order_.empty()) {
      recorded_ = true;
    } else {
      order_.clear();  // not a step's forward and backward (loading a checkpoint, say)
    }
  }
  cursor_ = 0;
}

}  // namespace tessera::parallel::zero
