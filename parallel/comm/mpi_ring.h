// All-reduce and reduce-scatter over nonblocking point-to-point, reduced with MPI_Reduce_local.
// All-reduce: a ring (reduce-scatter then all-gather, 2 (p-1) steps of one chunk each) for large
// tensors, recursive doubling (log2 p swaps of the whole tensor) for small ones on power-of-two
// groups. Reduce-scatter: the ring's first half (p-1 steps). Open MPI's reduce_scatter_block falls
// to about 0.2 GB/s from 16 MB up on 2 ranks of one host (its all_reduce to 0.3 GB/s from 64 MB),
// where the ring keeps 3-5 GB/s. Open MPI's own
// nonblocking all_reduce is 1.3-2x slower than its blocking one, which runs only the smallest
// all_reduces (runs_blocking() in mpi_call.h: the ranks must agree on blocking or not, so it goes
// by size). Measured on 2 ranks on one host, these match MPI_Allreduce from 16 KB (recursive
// doubling beats it by 15-20% at 16 KB) to 256 MB, whether waited for at once or polled, except
// near 16 MB, where Open MPI's blocking all_reduce is faster still. Internal (it includes mpi.h).
#pragma once

#include <mpi.h>

#include <array>
#include <cstdint>
#include <memory>

#include "core/tensor.h"
#include "parallel/comm/mpi_call.h"
#include "parallel/comm/mpi_handle.h"

namespace tessera::parallel {

// Whether `call` runs here, on 2 to 64 ranks: an all_reduce as the ring from ring_min_bytes() up,
// below it as recursive doubling (log2 p exchanges of the whole tensor, Open MPI's own choice for
// small messages) where p is a power of two, otherwise as Open MPI's MPI_Iallreduce; a
// reduce_scatter as the ring from ring_min_bytes() of input up. The same answer on every rank (it
// depends on sizes only), as it must be.
bool use_ring(const MpiCall& call);
// TESSERA_RING_MIN_BYTES when set (tests lower it to run the ring on small tensors), else 256 KB.
int64_t ring_min_bytes();

class RingCollective {
 public:
  // `call` is an all_reduce (in place on call.in) or a reduce_scatter (call.in's block r reduced
  // into call.out on rank r); `ring_comm` a private duplicate of call.comm, so the ring's messages
  // never match the user's; `tag_base` a multiple of kTagsPerCall that every rank gives the same
  // call (ring collectives in flight at once must differ in it).
  RingCollective(const MpiCall& call, std::shared_ptr<const MpiComm> ring_comm, int tag_base);
  static constexpr int kTagsPerCall = 128;

  // Moves the ring on as far as MPI allows without blocking (block = false) or to the end
  // (block = true: MPI_Waitall per step). True when the reduction is complete.
  bool advance(bool block);

 private:
  void post_step();
  void post_scatter_step();
  void reduce_received();
  int64_t offset(int chunk) const;  // in elements
  int64_t length(int chunk) const;
  int chunk_of(int steps_back) const;  // chunk (rank - steps_back) mod p
  char* at(const Tensor& t, int64_t elements) const;
  void* partial(int step) const;  // reduce_scatter: where step's partial sum is received

  MpiCall call_;
  std::shared_ptr<const MpiComm> ring_comm_;  // kept alive while messages may still be posted
  MPI_Comm comm_;
  int tag_base_;
  int rank_, size_;
  int64_t itemsize_;
  Tensor scratch_;  // all_reduce: one chunk received while reducing; reduce_scatter: two
  bool scatter_;    // a reduce_scatter: the ring's first half, reading call.in, writing call.out
  bool doubling_;   // recursive doubling instead of the ring
  int steps_;       // ring: 2 (p-1), the first p-1 reduce, the rest gather; doubling: log2 p
  int step_ = 0;
  bool posted_ = false;
  std::array<MPI_Request, 2> requests_{MPI_REQUEST_NULL, MPI_REQUEST_NULL};
};

}  // namespace tessera::parallel
