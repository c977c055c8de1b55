// Start-up check that every rank holds the same configuration: ranks that disagree (a different
// file, a different --set) would otherwise deadlock in mismatched collectives.
#pragma once

#include <cstdint>
#include <string>

#include "parallel/comm/communicator.h"

namespace tessera::parallel {

// 64-bit FNV-1a of the text: stable across runs, machines and compilers.
uint64_t config_hash(const std::string& text);

// Collective: all-gathers every rank's hash of `config_text`. If any differs from rank 0's, every
// rank throws a ValueError naming the ranks that differ.
void check_same_config(Communicator& comm, const std::string& config_text);

}  // namespace tessera::parallel
