#include "parallel/sequence/modes.h"

#include "core/error.h"

namespace tessera::parallel::sequence {

const char* mode_name(SequenceAttentionMode mode) {
  switch (mode) {
    case SequenceAttentionMode::ring:
      return "ring";
    case SequenceAttentionMode::all_to_all:
      return "all_to_all";
    case SequenceAttentionMode::ring_flash:
      return "ring_flash";
  }
  return "?";
}

SequenceAttentionMode parse_mode(const std::string& name) {
  for (SequenceAttentionMode m : {SequenceAttentionMode::ring, SequenceAttentionMode::all_to_all,
                                  SequenceAttentionMode::ring_flash})
    if (name == mode_name(m)) return m;
  throw ValueError(
      "sequence attention",
      str_cat("expected a mode \"ring\", \"all_to_all\" or \"ring_flash\", got \"", name, "\""));
}

const char* layout_name(SequenceLayout layout) {
  switch (layout) {
    case SequenceLayout::contiguous:
      return "contiguous";
    case SequenceLayout::zigzag:
      return "zigzag";
  }
  return "?";
}

SequenceLayout parse_layout(const std::string& name) {
  for (SequenceLayout l : {SequenceLayout::contiguous, SequenceLayout::zigzag})
    if (name == layout_name(l)) return l;
  throw ValueError("sequence layout",
                   str_cat("expected \"contiguous\" or \"zigzag\", got \"", name, "\""));
}

}  // namespace tessera::parallel::sequence
