// The sequence-parallel choices a configuration names: how attention runs over a split sequence
// and how positions lie on the ranks. Enums parsed where the config is read, so no other file
// compares their names; dependency-free, so the configuration (parallel/mesh) can hold them.
#pragma once

#include <cstdint>
#include <string>

namespace tessera::parallel::sequence {

enum class SequenceAttentionMode : uint8_t { ring, all_to_all, ring_flash };
const char* mode_name(SequenceAttentionMode mode);
// "ring", "all_to_all" or "ring_flash"; anything else throws naming the choices.
SequenceAttentionMode parse_mode(const std::string& name);

enum class SequenceLayout : uint8_t { contiguous, zigzag };
const char* layout_name(SequenceLayout layout);
// "contiguous" or "zigzag"; anything else throws naming the choices.
SequenceLayout parse_layout(const std::string& name);

}  // namespace tessera::parallel::sequence
