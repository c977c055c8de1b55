// The names of optimizer state tensors, "state.<k>.<name>": k counts the parameters through the
// groups (Optimizer::state_dict's numbering), name is the state ("exp_avg", "momentum_buffer").
// The one writer and reader of that format, for the optimizers, ZeRO and the checkpoint code.
#pragma once

#include <cstddef>
#include <optional>
#include <string>

namespace tessera::optim {

struct StateKey {
  size_t param = 0;  // k
  std::string name;  // non-empty
};

// "state.<param>.<name>".
std::string state_key(size_t param, const std::string& name);
std::string state_key(const StateKey& key);

// The parts of `key`, or nullopt unless it is "state." then decimal digits, a dot and a non-empty
// name.
std::optional<StateKey> parse_state_key(const std::string& key);

}  // namespace tessera::optim
