// A counter-based random generator: a seed and a running offset. Each draw of n values reserves
// offsets [offset, offset + n), and value i of the draw is philox(seed, offset + i), so a tensor drawn
// whole or shard by shard (given the shard's start index) holds the same numbers.
#pragma once

#include <cstdint>

namespace tessera {

class Generator {
 public:
  explicit Generator(uint64_t seed = 0) : seed_(seed) {}
  uint64_t seed() const { return seed_; }
  uint64_t offset() const { return offset_; }
  void set_state(uint64_t seed, uint64_t offset) {
    seed_ = seed;
    offset_ = offset;
  }
  // Reserves n counters and returns the first.
  uint64_t reserve(uint64_t n) {
    uint64_t first = offset_;
    offset_ += n;
    return first;
  }

 private:
  uint64_t seed_;
  uint64_t offset_ = 0;
};

// The process-wide generator used when none is passed.
Generator& default_generator();
void manual_seed(uint64_t seed);

}  // namespace tessera
