// The entry point of sequence-parallel attention (attention.h): mode names and the dispatch.
#include "parallel/sequence/attention.h"

#include "autograd/ops.h"
#include "core/error.h"

namespace tessera::parallel::sequence {

Tensor attention(const Tensor& q, const Tensor& k, const Tensor& v,
                 const SequenceAttentionArgs& args) {
  switch (args.mode) {
    case SequenceAttentionMode::ring:
      return ring_attention(q, k, v, args);
    case SequenceAttentionMode::all_to_all:
      return all_to_all_attention(q, k, v, args);
    case SequenceAttentionMode::ring_flash:
      return ring_flash_attention(q, k, v, args).out;
  }
  TS_FAIL("sequence attention", "unknown mode ", int(args.mode));  // not reached
}

}  // namespace tessera::parallel::sequence
