// The tensor-parallel modes, parsed once where the configuration is read: everything past the
// reader switches over the enum (no `default:`), so a new mode is a compile error wherever it is
// not handled yet.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>

namespace tessera::parallel {

enum class TensorMode : uint8_t {
  one_d,             // "1d": Megatron's column / row split
  two_d,             // "2d": SUMMA on a q x q grid
  two_point_five_d,  // "2.5d": Tesseract, depth stacked q x q grids
  three_d,           // "3d": a q x q x q cube
};

// "1d", "2d", "2.5d" or "3d" to its mode; throws a ValueError naming parallel.tensor.mode and the
// accepted names otherwise.
TensorMode tensor_mode_from_name(const std::string& name);
// The mode's configuration name: "1d", "2d", "2.5d" or "3d".
const char* tensor_mode_name(TensorMode mode);
// Writes tensor_mode_name(mode), so error messages (str_cat) name the mode as the config does.
std::ostream& operator<<(std::ostream& os, TensorMode mode);

}  // namespace tessera::parallel
