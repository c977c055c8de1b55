// The parallel form a call site asks a layer factory for (see factory.h). Serial layers record the
// hint they were built with, so tests and the tensor-parallel twins can check every call site.
#pragma once

#include <string>

namespace tessera::nn {

enum class ParallelStyle {
  none,    // always the serial layer
  column,  // Linear split along its output features: input replicated, output stays split
  row,     // Linear split along its input features: input split, output summed over the group
  vocab,   // Embedding / LM head split along the vocabulary rows
};

inline std::string parallel_style_name(ParallelStyle s) {
  switch (s) {
    case ParallelStyle::none:
      return "none";
    case ParallelStyle::column:
      return "column";
    case ParallelStyle::row:
      return "row";
    case ParallelStyle::vocab:
      return "vocab";
  }
  return "unknown";
}

}  // namespace tessera::nn
