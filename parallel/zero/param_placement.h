// Heterogeneous memory for ZeRO stage 3's parameters (zero.offload_params): this rank's compute
// shard of each group is cut into chunks, runs of whole parameter pieces in flat (model) order, and
// every chunk lives either on the compute device or on the host (offload.h's host domain), as
// Colossal-AI's Gemini keeps its chunks. A gather copies an owner's piece from wherever its chunk
// is; nothing else changes, so the placement never changes what a rank computes, only where the
// bytes wait between uses. Pure arithmetic here (no tensors): stage3_params.h applies it.
//
// Policies:
//   device  every chunk on the device (zero.offload_params false): the compute shard stays one
//           tensor, as without this file.
//   static  the last `host_fraction` of the chunks (by count, in model order: the layers forward
//           reaches last) on the host, the rest on the device (Gemini's offload_param_frac).
//   auto    a warm-up first: the first training step runs with every chunk on the host while a
//           tracer samples the device memory that is not parameter chunks (activations, gathered
//           parameters, gradients) between every two gathers. Every chunk then stays on the host,
//           and the device holds copies: between steps those that fit under `device_limit` beside
//           the step's peak (in the order the step first reads them), and within a step as many
//           as the trace leaves room for at each gather, the copy read latest evicted first
//           (ChunkSchedule below). A limit below the warm-up's own peak is refused, naming both.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "parallel/zero/zero_plan.h"

namespace tessera::parallel::zero {

// The policies above, parsed where the config is read (zero.placement names static and auto;
// device is the placement without zero.offload_params).
enum class PlacementPolicy : uint8_t { device, static_share, auto_traced };
// "device", "static" or "auto", as the config writes them.
const char* placement_policy_name(PlacementPolicy policy);
// The policy a config names; throws ValueError naming `key` for any other name.
PlacementPolicy parse_placement_policy(const std::string& name, const std::string& key);

struct ParamPlacement {
  PlacementPolicy policy = PlacementPolicy::device;
  double host_fraction = 1.0;     // static: the share of chunks on the host, in [0, 1]
  int64_t device_limit = 0;       // auto: bytes of device memory the run may use
  // A chunk's capacity (a larger piece gets a chunk of its own); 0: searched between 1 and 64 MiB
  // (search_chunk_capacity).
  int64_t chunk_bytes = 0;
};

// One chunk of a rank's compute shard: shard elements [begin, begin + numel).
struct ChunkRange {
  int64_t begin = 0;
  int64_t numel = 0;
};

// Packs the rank's pieces (in shard order, contiguous) into chunks of at most `capacity` elements
// without splitting a piece; a piece longer than capacity is a chunk by itself.
std::vector<ChunkRange> pack_chunks(const std::vector<ShardPiece>& pieces, int64_t capacity);

// The capacity in [min_capacity, max_capacity] (elements, tried in steps of `step` and at
// max_capacity) that wastes least, as Gemini searches its chunk size: waste is what chunks of
// equal size would pad, the sum over the packed chunks of capacity - numel. Chunks are allocated
// at their used size here, so the waste is not memory lost: the least of it gives the fullest,
// most equal chunks, which the device limit's fitting and the eviction count in. Candidates start
// at the longest piece that is not extra-large, so that only those stand alone: the pieces longer
// than max_capacity or than the pieces' mean + 3 standard deviations (Gemini filters its
// extra-large parameters so: a token table). Ties go to the smaller capacity (finer placement).
// Throws unless 1 <= min_capacity <= max_capacity and step >= 1.
int64_t search_chunk_capacity(const std::vector<ShardPiece>& pieces, int64_t min_capacity,
                              int64_t max_capacity, int64_t step);

// static: which of `count` chunks (in order) live on the host.
std::vector<bool> static_host_chunks(size_t count, double host_fraction);

// auto, after the warm-up: which chunks live on the device. `first_use[c]`: the position in the
// recorded access order of chunk c's first read (chunks never read come last); `bytes[c]`: its
// size; `budget`: the device bytes left for chunks. Chunks are taken in first-use order while
// they fit (a chunk that does not fit is skipped, a later smaller one may still).
std::vector<bool> auto_device_chunks(const std::vector<size_t>& first_use,
                                     const std::vector<int64_t>& bytes, int64_t budget);

// auto, within each training step (in-step eviction, as Gemini's chunk manager evicts): every
// chunk's home is the host, and the device holds copies of some. The warm-up's trace gives, for
// each gather of the recorded order, the device bytes that are not chunks until the next gather,
// so the caller knows how many bytes of chunks the device may hold there (`budget`). The schedule
// is pure and follows the record: the read positions of every chunk are known, so it evicts the
// copy read latest (Belady's rule: the farthest next read, wrapping into the next step; a chunk
// never read first), and keeps a chunk it reads on the device when it fits by evicting only copies
// read after it. Evicting a copy moves nothing (the home holds the same values); keeping one is
// the copy the gather makes anyway, of the whole chunk.
class ChunkSchedule {
 public:
  // reads[c]: the record positions at which chunk c is read, ascending; bytes[c]: its size;
  // length: the record's length.
  ChunkSchedule(std::vector<std::vector<size_t>> reads, std::vector<int64_t> bytes, size_t length);

  // The gather at record position `at` reads chunks `need`; until the next gather the device may
  // hold `budget` bytes of copies. Updates on_device (which chunks have a device copy).
  void step(size_t at, const std::vector<size_t>& need, int64_t budget,
            std::vector<bool>& on_device) const;
  // Evicts copies, read latest after position `at` first, until they fit in `budget`.
  void fit(size_t at, int64_t budget, std::vector<bool>& on_device) const;
  // Record positions from `at` (exclusive) to chunk c's next read, wrapping into the next step;
  // SIZE_MAX for a chunk never read.
  size_t until_read(size_t c, size_t at) const;
  int64_t device_bytes(const std::vector<bool>& on_device) const;

 private:
  std::vector<std::vector<size_t>> reads_;
  std::vector<int64_t> bytes_;
  size_t length_;
};

// "8G", "512M", "64K" (powers of 1024) or plain bytes, as zero.device_memory_limit is written.
// Throws ValueError naming `key` for anything else or a value below 1.
int64_t parse_bytes(const std::string& text, const std::string& key);

}  // namespace tessera::parallel::zero
