// Stage 3's compute shards as chunks (param_placement.h): per group, runs of this rank's whole
// parameter pieces in shard order, each living on the device or on the host, and a host chunk
// possibly with a device copy. The store holds and moves the bytes; where they live is a placement
// policy's decision (chunk_placement.h), as Gemini's ChunkManager beside its PlacementPolicy.
#pragma once

#include <cstdint>
#include <vector>

#include "core/tensor.h"
#include "parallel/zero/host_mover.h"
#include "parallel/zero/zero_plan.h"

namespace tessera::parallel::zero {

// What the store moved since construction or reset: chunk copies made on the device and dropped,
// the bytes those copies moved, and the most bytes of copies held at once.
struct ChunkMoves {
  int64_t fetches = 0;
  int64_t evictions = 0;
  int64_t fetched_bytes = 0;
  int64_t peak_copy_bytes = 0;
};

class ChunkStore {
 public:
  // mine[g]: this rank's pieces of group g; shards[g]: its compute shard (the parameters' dtype).
  // Not chunked: each group's shard is one chunk, the tensor itself, on the device. Chunked: cut
  // into chunks of their own of `chunk_bytes` (0: the capacity that wastes least, searched), on
  // the device until place() says otherwise.
  ChunkStore(Device device, std::vector<std::vector<ShardPiece>> mine,
             const std::vector<Tensor>& shards, bool chunked, int64_t chunk_bytes);

  bool chunked() const { return chunked_; }
  HostMover& mover() { return mover_; }
  Device device() const { return device_; }
  size_t groups() const { return chunks_.size(); }
  // Chunks counted through the groups, in shard order (the index the vectors below use).
  size_t count() const;
  std::vector<int64_t> chunk_bytes() const;
  // Per parameter: the chunks holding its pieces on this rank.
  std::vector<std::vector<size_t>> chunks_of_params(size_t params) const;

  // Group g's shard elements [offset, offset + numel) where a read finds them: the chunk's device
  // copy if it has one, else the chunk.
  Tensor piece(size_t g, int64_t offset, int64_t numel) const;
  // Writes `value` there, into the chunk and its device copy alike (the copy may be dropped, the
  // chunk is home).
  void write(size_t g, int64_t offset, const Tensor& value);
  // Every group's shard = values[g] (in any dtype and device; copies follow).
  void update(const std::vector<Tensor>& values);

  // on_host[c]: chunk c lives on the host, else on the device.
  void place(const std::vector<bool>& on_host);
  // Makes and drops device copies of host chunks so that exactly on_device[c] have one.
  void apply_copies(const std::vector<bool>& on_device);
  std::vector<bool> copies_held() const;

  // Chunks and their bytes now: on the device (or with a device copy there) and on the host.
  int64_t chunks_on_device() const;
  int64_t device_bytes() const;
  int64_t host_bytes() const;
  const ChunkMoves& moves() const { return moves_; }
  void reset_moves() { moves_ = ChunkMoves{}; }

 private:
  // Shard elements [begin, begin + numel) of a group; `data` lives where its device says.
  struct Chunk {
    int64_t begin = 0;
    int64_t numel = 0;
    Tensor data;
    Tensor copy;  // a device copy of a host chunk, while a policy keeps one
  };
  const Chunk& chunk_of(size_t g, int64_t offset, int64_t numel) const;

  Device device_;
  bool chunked_;
  std::vector<std::vector<ShardPiece>> mine_;
  std::vector<std::vector<Chunk>> chunks_;  // per group, in shard order
  // Host chunks' home (pinned on a GPU) and their moves to the device, on a copy stream there.
  HostMover mover_;
  ChunkMoves moves_;
};

}  // namespace tessera::parallel::zero
