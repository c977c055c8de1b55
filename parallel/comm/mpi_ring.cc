#include "parallel/comm/mpi_ring.h"

#include <algorithm>
#include <cstdlib>
#include <utility>

#include "core/error.h"
#include "core/factory.h"
#include "parallel/comm/mpi_check.h"

namespace tessera::parallel {
namespace {

constexpr int kMaxRingRanks = RingCollective::kTagsPerCall / 2;  // 2 (p-1) tags per call

int64_t read_min_bytes() {
  const char* env = std::getenv("TESSERA_RING_MIN_BYTES");
  if (env == nullptr || *env == '\0') return int64_t(256) << 10;
  char* end = nullptr;
  const long long v = std::strtoll(env, &end, 10);
  TS_CHECK(end != env && *end == '\0' && v >= 0, "comm",
           "expected TESSERA_RING_MIN_BYTES to be a byte count >= 0, got '", env, "'");
  return v;
}

// The bytes a call reduces: all_reduce's tensor, reduce_scatter's whole input.
int64_t input_bytes(const MpiCall& call) {
  return int64_t(call.in->numel()) * int64_t(call.in->itemsize());
}

}  // namespace

int64_t ring_min_bytes() {
  static const int64_t min_bytes = read_min_bytes();
  return min_bytes;
}

bool use_ring(const MpiCall& call) {
  const bool scatter = call.kind == CommKind::reduce_scatter;
  if ((!scatter && call.kind != CommKind::all_reduce) || call.group_size < 2 ||
      call.group_size > kMaxRingRanks) {
    return false;
  }
  if (scatter) return input_bytes(call) >= ring_min_bytes();
  const bool power_of_two = (call.group_size & (call.group_size - 1)) == 0;
  return power_of_two || input_bytes(call) >= ring_min_bytes();
}

namespace {
bool use_doubling(const MpiCall& call) {
  return call.kind == CommKind::all_reduce && input_bytes(call) < ring_min_bytes();
}
int log2_of(int p) {
  int k = 0;
  while ((1 << k) < p) ++k;
  return k;
}
}  // namespace

RingCollective::RingCollective(const MpiCall& call, std::shared_ptr<const MpiComm> ring_comm,
                               int tag_base)
    : call_(call),
      ring_comm_(std::move(ring_comm)),
      comm_(ring_comm_->comm),
      tag_base_(tag_base),
      rank_(call.rank),
      size_(call.group_size),
      itemsize_(int64_t(call.in->itemsize())),
      scatter_(call.kind == CommKind::reduce_scatter),
      doubling_(use_doubling(call)),
      steps_(doubling_ ? log2_of(size_) : scatter_ ? size_ - 1 : 2 * (size_ - 1)) {
  const int64_t scratch = doubling_ ? int64_t(call.count) : scatter_ ? 2 * length(0) : length(0);
  scratch_ = empty({std::max<int64_t>(1, scratch)}, {.dtype = call.in->dtype()});
}

// all_reduce: call.count elements cut in p nearly equal chunks; reduce_scatter: p blocks of
// call.count elements (MPI counts one rank's block).
int64_t RingCollective::offset(int chunk) const {
  if (scatter_) return chunk * int64_t(call_.count);
  const int64_t base = call_.count / size_, rem = call_.count % size_;
  return chunk * base + std::min<int64_t>(chunk, rem);
}

int64_t RingCollective::length(int chunk) const {
  if (scatter_) return call_.count;
  return call_.count / size_ + (chunk < call_.count % size_ ? 1 : 0);
}

int RingCollective::chunk_of(int steps_back) const {
  return ((rank_ - steps_back) % size_ + size_) % size_;
}

char* RingCollective::at(const Tensor& t, int64_t elements) const {
  return static_cast<char*>(t.data_ptr()) + elements * itemsize_;
}

// The last step receives into call.out; the others alternate between the two scratch chunks, so
// a step's receive never overwrites the partial sum its send is still reading.
void* RingCollective::partial(int step) const {
  if (step == steps_ - 1) return call_.out->data_ptr();
  return at(scratch_, (step % 2) * length(0));
}

// Reduce-scatter step s: send the partial sum of chunk (r - s - 1) (at step 0 our own block),
// receive the partial sum of chunk (r - s - 2) from the previous rank and add our block of it;
// after p-1 steps rank r holds chunk r complete, in call.out->
void RingCollective::post_scatter_step() {
  const int s = step_, next = (rank_ + 1) % size_, prev = (rank_ + size_ - 1) % size_;
  const void* send_from = s == 0 ? at(call_.in, offset(chunk_of(1))) : partial(s - 1);
  auto lock = mpi_lock();
  TS_MPI_CHECK(MPI_Irecv(partial(s), call_.count, call_.type, prev, tag_base_ + s, comm_,
                         &requests_[0]));
  TS_MPI_CHECK(MPI_Isend(send_from, call_.count, call_.type, next, tag_base_ + s, comm_,
                         &requests_[1]));
  posted_ = true;
}

// All-reduce ring, reducing step s: send chunk (r - s), receive chunk (r - s - 1) into the scratch
// buffer and add it to ours; after p-1 steps rank r holds chunk r + 1 complete. Gathering step s:
// send chunk (r - s + 1), receive chunk (r - s) in place.
void RingCollective::post_step() {
  if (scatter_) return post_scatter_step();
  const int p = size_, r = rank_;
  if (doubling_) {
    // Step s: swap the whole tensor with rank r xor 2^s, then add theirs to ours. Every rank
    // ends with the same bits: each pair adds the same two values (addition commutes).
    const int peer = r ^ (1 << step_);
    auto lock = mpi_lock();
    TS_MPI_CHECK(MPI_Irecv(scratch_.data_ptr(), call_.count, call_.type, peer, tag_base_ + step_,
                           comm_, &requests_[0]));
    TS_MPI_CHECK(MPI_Isend(call_.in->data_ptr(), call_.count, call_.type, peer, tag_base_ + step_,
                           comm_, &requests_[1]));
    posted_ = true;
    return;
  }
  const int next = (r + 1) % p, prev = (r + p - 1) % p;
  const bool reducing = step_ < p - 1;
  const int s = reducing ? step_ : step_ - (p - 1);
  const int send_chunk = chunk_of(reducing ? s : s - 1);
  const int recv_chunk = chunk_of(reducing ? s + 1 : s);
  const int tag = tag_base_ + (reducing ? 0 : kMaxRingRanks) + s;
  void* recv_to = reducing ? scratch_.data_ptr() : at(call_.in, offset(recv_chunk));
  auto lock = mpi_lock();
  TS_MPI_CHECK(MPI_Irecv(recv_to, int(length(recv_chunk)), call_.type, prev, tag, comm_,
                         &requests_[0]));
  TS_MPI_CHECK(MPI_Isend(at(call_.in, offset(send_chunk)), int(length(send_chunk)), call_.type,
                         next, tag, comm_, &requests_[1]));
  posted_ = true;
}

// Adds what the finished step received into its destination.
void RingCollective::reduce_received() {
  const MPI_Op op = mpi_reduce_op(call_.op, call_.in->dtype());
  auto lock = mpi_lock();
  if (scatter_) {
    TS_MPI_CHECK(MPI_Reduce_local(at(call_.in, offset(chunk_of(step_ + 2))), partial(step_),
                                  call_.count, call_.type, op));
  } else if (doubling_) {
    TS_MPI_CHECK(MPI_Reduce_local(scratch_.data_ptr(), call_.in->data_ptr(), call_.count,
                                  call_.type, op));
  } else if (step_ < size_ - 1) {
    const int chunk = chunk_of(step_ + 1);
    TS_MPI_CHECK(MPI_Reduce_local(scratch_.data_ptr(), at(call_.in, offset(chunk)),
                                  int(length(chunk)), call_.type, op));
  }
}

bool RingCollective::advance(bool block) {
  while (step_ < steps_) {
    if (!posted_) post_step();
    {
      auto lock = mpi_lock();
      if (block) {
        TS_MPI_CHECK(MPI_Waitall(2, requests_.data(), MPI_STATUSES_IGNORE));
      } else {
        int flag = 0;
        TS_MPI_CHECK(MPI_Testall(2, requests_.data(), &flag, MPI_STATUSES_IGNORE));
        if (!flag) return false;
      }
    }
    posted_ = false;
    reduce_received();
    ++step_;
  }
  return true;
}

}  // namespace tessera::parallel
