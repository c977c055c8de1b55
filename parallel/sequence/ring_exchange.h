// Point-to-point hops around the ring of a sequence group (rank r sends to r + 1 and receives from
// r - 1, mod size), started asynchronously so the next block's transfer runs while the current one
// computes, and the two ring walks the attention modes are built from.
#pragma once

#include <functional>
#include <vector>

#include "core/tensor.h"
#include "parallel/comm/communicator.h"

namespace tessera::parallel::sequence {

// One hop: sends `tensors` (made contiguous) to the next rank and receives tensors of the same
// shapes and dtypes from the previous one, tags tag, tag + 1, ..., all started at once.
class RingShift {
 public:
  RingShift(Communicator& group, const std::vector<Tensor>& tensors, int tag);
  // Waits for both directions and returns the received tensors.
  std::vector<Tensor> wait();

 private:
  std::vector<Tensor> sent_, received_;
  WorkPtr work_;
};

// Calls visit(owner, chunks) once per rank of the group, owner = ring_owner(rank, step), starting
// with this rank's own `chunks`; each step's chunks travel on to the next rank while visit runs.
// size - 1 hops of the chunks. A null group is a ring of one rank.
using RingVisit = std::function<void(int owner, const std::vector<Tensor>& chunks)>;
void ring_visit(Communicator* group, std::vector<Tensor> chunks, const RingVisit& visit);

// As ring_visit, where visit returns a contribution to the gradients of the chunks it saw (same
// shapes on every step, any dtype, e.g. f32 accumulators): the contributions travel with the chunks
// and are summed on the way, one hop behind them, so each rank gets back the sum over all ranks of
// the contributions to its own chunks. size - 1 hops of the chunks and size hops of the sums; the
// hop of one step's sums overlaps the next step's visit.
using RingAccumulate =
    std::function<std::vector<Tensor>(int owner, const std::vector<Tensor>& chunks)>;
std::vector<Tensor> ring_visit_accumulate(Communicator* group, std::vector<Tensor> chunks,
                                          const RingAccumulate& visit);

}  // namespace tessera::parallel::sequence
