// Seeded epoch permutations, data-parallel sharding and resumable positions (see sampler.h).
#include "models/data/sampler.h"

#include <algorithm>

#include "core/error.h"
#include "core/philox.h"

namespace tessera::data {

nlohmann::json DataPosition::to_json() const { return {{"epoch", epoch}, {"index", index}}; }

DataPosition DataPosition::from_json(const nlohmann::json& j) {
  const auto field = [&](const char* name) {
    TS_CHECK(j.is_object() && j.contains(name) && j.at(name).is_number_integer() &&
                 j.at(name).get<int64_t>() >= 0,
             "data_position", "expected {\"epoch\": int >= 0, \"index\": int >= 0}, got ", j.dump(),
             " (field '", name, "')");
    return j.at(name).get<int64_t>();
  };
  TS_CHECK(j.is_object() && j.size() == 2, "data_position",
           "expected exactly the fields epoch and index, got ", j.dump());
  return DataPosition{field("epoch"), field("index")};
}

EpochPermutation::EpochPermutation(int64_t n, uint64_t seed, int64_t epoch) : n_(n) {
  int bits = 2;
  while (bits < 62 && (int64_t(1) << bits) < n) ++bits;
  bits += bits & 1;  // balanced halves
  half_bits_ = bits / 2;
  half_mask_ = (uint64_t(1) << half_bits_) - 1;
  const Philox4 keys = philox(seed, uint64_t(epoch));
  for (int k = 0; k < 4; ++k) round_keys_[k] = keys.v[k];
}

uint64_t EpochPermutation::permute_domain(uint64_t x) const {
  uint64_t left = x >> half_bits_, right = x & half_mask_;
  for (int round = 0; round < 4; ++round) {
    const uint64_t key = (uint64_t(round_keys_[round]) << 32) | uint64_t(round);
    const uint64_t f = philox(key, right).v[0] & half_mask_;
    const uint64_t mixed = left ^ f;
    left = right;
    right = mixed;
  }
  return (left << half_bits_) | right;
}

int64_t EpochPermutation::operator()(int64_t i) const {
  // Cycle walking: the domain is a permutation of [0, 4^h) and i < n, so following i's cycle
  // reaches a value below n, and distinct i reach distinct values. Expected steps < 4.
  uint64_t x = permute_domain(uint64_t(i));
  while (x >= uint64_t(n_)) x = permute_domain(x);
  return int64_t(x);
}

Sampler::Sampler(int64_t num_items, const SamplerOptions& options)
    : num_items_(num_items),
      options_(options),
      permutation_(std::max<int64_t>(num_items, 1), options.seed, 0) {
  TS_CHECK(num_items >= 1, "sampler", "expected at least one item, got ", num_items);
  TS_CHECK(options.world_size >= 1 && options.rank >= 0 && options.rank < options.world_size,
           "sampler", "expected 0 <= rank < world_size, got rank ", options.rank, " of world size ",
           options.world_size);
}

const EpochPermutation& Sampler::permutation(int64_t epoch) const {
  if (epoch != permutation_epoch_) {
    permutation_ = EpochPermutation(num_items_, options_.seed, epoch);
    permutation_epoch_ = epoch;
  }
  return permutation_;
}

int64_t Sampler::item_at(int64_t epoch, int64_t index) const {
  TS_CHECK(epoch >= 0 && index >= 0 && index < num_items_, "sampler",
           "expected epoch >= 0 and index in [0, ", num_items_, "), got epoch ", epoch, " index ",
           index);
  return options_.shuffle ? permutation(epoch)(index) : index;
}

std::vector<int64_t> Sampler::next(int64_t batch_size) {
  TS_CHECK(batch_size >= 1, "sampler", "expected a batch size >= 1, got ", batch_size);
  std::vector<int64_t> items(size_t(batch_size), 0);
  const int64_t first = position_.index + options_.rank * batch_size;  // may pass the epoch end
  for (int64_t j = 0; j < batch_size; ++j) {
    const int64_t p = first + j;
    items[size_t(j)] = item_at(position_.epoch + p / num_items_, p % num_items_);
  }
  const int64_t advanced = position_.index + batch_size * options_.world_size;
  position_ = DataPosition{position_.epoch + advanced / num_items_, advanced % num_items_};
  return items;
}

void Sampler::set_position(const DataPosition& position) {
  TS_CHECK(position.epoch >= 0 && position.index >= 0 && position.index < num_items_, "sampler",
           "expected epoch >= 0 and index in [0, ", num_items_, "), got epoch ", position.epoch,
           " index ", position.index);
  position_ = position;
}

}  // namespace tessera::data
