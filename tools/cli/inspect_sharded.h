// The sharded-checkpoint part of `tessera checkpoint inspect` (checkpoint_inspect_sharded.cc).
#pragma once

#include <string>

namespace tessera::cli {

// Prints a sharded checkpoint's tensors, piece files and checksums (after the step and layout the
// caller printed); returns the exit code (1 when anything is damaged).
int inspect_sharded(const std::string& dir);

}  // namespace tessera::cli
