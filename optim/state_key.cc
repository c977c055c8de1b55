// Writing and parsing "state.<k>.<name>" (see state_key.h).
#include "optim/state_key.h"

#include <cctype>
#include <cstdint>
#include <limits>

namespace tessera::optim {

namespace {
constexpr char kPrefix[] = "state.";
constexpr size_t kPrefixSize = sizeof(kPrefix) - 1;
}  // namespace

std::string state_key(size_t param, const std::string& name) {
  return kPrefix + std::to_string(param) + "." + name;
}

std::string state_key(const StateKey& key) { return state_key(key.param, key.name); }

std::optional<StateKey> parse_state_key(const std::string& key) {
  if (key.compare(0, kPrefixSize, kPrefix) != 0) return std::nullopt;
  const size_t dot = key.find('.', kPrefixSize);
  if (dot == std::string::npos || dot == kPrefixSize || dot + 1 == key.size()) return std::nullopt;
  size_t param = 0;
  for (size_t i = kPrefixSize; i < dot; ++i) {
    const unsigned char c = static_cast<unsigned char>(key[i]);
    // Digits only, and no index that would wrap a size_t.
    if (!std::isdigit(c) || param > (std::numeric_limits<size_t>::max() - 9) / 10)
      return std::nullopt;
    param = param * 10 + size_t(c - '0');
  }
  return StateKey{.param = param, .name = key.substr(dot + 1)};
}

}  // namespace tessera::optim
