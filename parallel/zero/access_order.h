// Stage 3's prefetch prediction, pure (no ranks, no tensors). Every rank runs the same model code,
// so parameters are gathered in the same order on every rank and in every training step. The
// order of the first training window (the gathers of one step's forward and backward) is recorded;
// in later windows each gather moves a cursor along the record, and the parameters just after it
// are the ones to gather ahead. A gather off the record (evaluation, generation, a different
// path) resyncs at the parameter's next place in the record, or stops predicting until the window
// ends. Prediction only decides what to gather early: it never changes what a rank computes.
#pragma once

#include <cstddef>
#include <vector>

namespace tessera::parallel::zero {

class AccessOrder {
 public:
  // Parameter p is being gathered; returns up to `depth` parameters expected next, in order
  // (empty while recording, or when the window has left the record).
  std::vector<size_t> on_gather(size_t p, int depth);
  // The window ended (every parameter released). `training`: it held a step's forward and
  // backward; the first such window's order becomes the record.
  void end_window(bool training);

  bool recorded() const { return recorded_; }
  // The record position of the last gather, or kOffRecord (recording, off the record, or no
  // gather yet in this window).
  static constexpr size_t kOffRecord = static_cast<size_t>(-1);
  size_t position() const {
    return recorded_ && cursor_ != kLost && cursor_ > 0 ? cursor_ - 1 : kOffRecord;
  }
  const std::vector<size_t>& order() const { return order_; }

 private:
  static constexpr size_t kLost = static_cast<size_t>(-1);
  std::vector<size_t> order_;
  bool recorded_ = false;
  size_t cursor_ = 0;  // the record's next expected position, or kLost
};

}  // namespace tessera::parallel::zero
