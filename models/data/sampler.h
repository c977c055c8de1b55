// Which items a rank reads, in what order: a seeded per-epoch permutation (or sequential order),
// split across data-parallel ranks, with a position that can be saved and restored to resume
// mid-epoch. Items are anything indexable: token windows, masked-LM sequences, images.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <vector>

namespace tessera::data {

// A point in the global sample stream, the same on every rank: `index` positions of epoch
// `epoch`'s order have been consumed (by all ranks together).
struct DataPosition {
  int64_t epoch = 0;
  int64_t index = 0;

  nlohmann::json to_json() const;
  // Throws ValueError unless j is {"epoch": int >= 0, "index": int >= 0}.
  static DataPosition from_json(const nlohmann::json& j);
  bool operator==(const DataPosition&) const = default;
};

// A pseudo-random permutation of [0, n) keyed by (seed, epoch), computed per element with no
// table: a 4-round Feistel network over the smallest even power of two >= n whose round function
// is Philox, with cycle walking to stay below n. Random access, O(1) memory, and the same on every
// rank and machine.
class EpochPermutation {
 public:
  EpochPermutation(int64_t n, uint64_t seed, int64_t epoch);
  int64_t operator()(int64_t i) const;

 private:
  uint64_t permute_domain(uint64_t x) const;

  int64_t n_;
  int half_bits_ = 0;
  uint64_t half_mask_ = 0;
  uint32_t round_keys_[4] = {};
};

struct SamplerOptions {
  bool shuffle = true;  // false: items in order 0, 1, 2, ... every epoch
  uint64_t seed = 0;
  int64_t rank = 0;  // this rank's place among the data-parallel ranks
  int64_t world_size = 1;
};

// Sharding: a global batch is the next batch_size * world_size positions of the stream; rank r
// takes the r-th contiguous block of batch_size of them. So ranks see disjoint items, together
// exactly the items one rank would see with the global batch size, and every rank advances the
// same position. Batches run on across epoch ends into the next epoch's order (no item dropped
// or repeated within an epoch).
class Sampler {
 public:
  // Throws ValueError for num_items < 1 or a rank outside [0, world_size).
  Sampler(int64_t num_items, const SamplerOptions& options);

  // This rank's items of the next global batch; advances the position by batch_size * world_size.
  std::vector<int64_t> next(int64_t batch_size);
  // The item at a stream position (epoch, index < num_items).
  int64_t item_at(int64_t epoch, int64_t index) const;

  int64_t num_items() const { return num_items_; }
  const SamplerOptions& options() const { return options_; }
  const DataPosition& position() const { return position_; }
  // Throws ValueError for a negative epoch or an index outside [0, num_items).
  void set_position(const DataPosition& position);

 private:
  const EpochPermutation& permutation(int64_t epoch) const;

  int64_t num_items_;
  SamplerOptions options_;
  DataPosition position_;
  mutable EpochPermutation permutation_;  // of permutation_epoch_
  mutable int64_t permutation_epoch_ = 0;
};

}  // namespace tessera::data
