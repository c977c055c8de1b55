// Ring hops over batched send/recv (ring_exchange.h).
#include "parallel/sequence/ring_exchange.h"

#include <optional>

#include "autograd/grad_mode.h"
#include "autograd/ops.h"
#include "core/error.h"
#include "core/factory.h"
#include "parallel/sequence/ring_plan.h"

namespace tessera::parallel::sequence {
namespace {

// Tags of the two ring walks in flight together (chunks, and the sums one hop behind them).
constexpr int kChunkTag = 100;
constexpr int kSumTag = 200;

}  // namespace

RingShift::RingShift(Communicator& group, const std::vector<Tensor>& tensors, int tag) {
  const int p = group.size(), next = (group.rank() + 1) % p, prev = (group.rank() + p - 1) % p;
  std::vector<P2POp> ops;
  for (size_t i = 0; i < tensors.size(); ++i) {
    sent_.push_back(tensors[i].contiguous());
    received_.push_back(
        empty(tensors[i].shape(), {.dtype = tensors[i].dtype(), .device = tensors[i].device()}));
    ops.push_back({P2POp::Kind::send, sent_.back(), next, tag + int(i)});
    ops.push_back({P2POp::Kind::recv, received_.back(), prev, tag + int(i)});
  }
  work_ = group.batch_send_recv(ops);
}

std::vector<Tensor> RingShift::wait() {
  work_->wait();
  sent_.clear();
  return std::move(received_);
}

void ring_visit(Communicator* group, std::vector<Tensor> chunks, const RingVisit& visit) {
  const int p = group ? group->size() : 1, rank = group ? group->rank() : 0;
  for (int step = 0; step < p; ++step) {
    std::optional<RingShift> shift;
    if (step + 1 < p) shift.emplace(*group, chunks, kChunkTag);
    visit(ring_owner(rank, step, p), chunks);
    if (shift) chunks = shift->wait();
  }
}

std::vector<Tensor> ring_visit_accumulate(Communicator* group, std::vector<Tensor> chunks,
                                          const RingAccumulate& visit) {
  autograd::NoGradGuard no_grad;
  const int p = group ? group->size() : 1, rank = group ? group->rank() : 0;
  if (p == 1) return visit(rank, chunks);
  std::optional<RingShift> sums_in_flight;
  for (int step = 0; step < p; ++step) {
    std::optional<RingShift> shift;
    if (step + 1 < p) shift.emplace(*group, chunks, kChunkTag);
    std::vector<Tensor> sums = visit(ring_owner(rank, step, p), chunks);
    if (sums_in_flight) {  // the sums so far for this step's owner, from the previous rank
      std::vector<Tensor> so_far = sums_in_flight->wait();
      TS_ASSERT(so_far.size() == sums.size());
      for (size_t i = 0; i < sums.size(); ++i) add_(so_far[i], sums[i]);
      sums = std::move(so_far);
    }
    // After the last step the next rank is the owner of what this rank holds: the last hop.
    sums_in_flight.emplace(*group, sums, kSumTag);
    if (shift) chunks = shift->wait();
  }
  return sums_in_flight->wait();
}

}  // namespace tessera::parallel::sequence
