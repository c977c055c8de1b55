// The entry point of sequence-parallel attention (attention.h): mode names and the dispatch.
#include "parallel/sequence/attention.h"

#include "autograd/ops.h"
#include "core/error.h"

namespace tessera::parallel::sequence {

const char* mode_name(SequenceAttentionMode mode) {
  switch (mode) {
    case SequenceAttentionMode::ring:
      return "ring";
    case SequenceAttentionMode::all_to_all:
      return "all_to_all";
    default:
      return "ring_flash";
  }
}

SequenceAttentionMode parse_mode(const std::string& name) {
  if (name == "ring") return SequenceAttentionMode::ring;
  if (name == "all_to_all") return SequenceAttentionMode::all_to_all;
  if (name == "ring_flash") return SequenceAttentionMode::ring_flash;
  throw ValueError(
      "sequence attention",
      str_cat("expected a mode \"ring\", \"all_to_all\" or \"ring_flash\", got \"", name, "\""));
}

Tensor attention(const Tensor& q, const Tensor& k, const Tensor& v,
                 const SequenceAttentionArgs& args) {
  switch (args.mode) {
    case SequenceAttentionMode::ring:
      return ring_attention(q, k, v, args);
    case SequenceAttentionMode::all_to_all:
      return all_to_all_attention(q, k, v, args);
    default:
      return ring_flash_attention(q, k, v, args).out;
  }
}

}  // namespace tessera::parallel::sequence
