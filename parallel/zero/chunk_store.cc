// Stage 3's compute shards in chunks: storage, placement moves and device copies (see
// chunk_store.h).
#include "parallel/zero/chunk_store.h"

#include <algorithm>
#include <utility>

#include "autograd/grad_mode.h"
#include "core/error.h"
#include "core/factory.h"
#include "parallel/zero/param_placement.h"

namespace tessera::parallel::zero {

namespace {

// zero.chunk_mb 0: the chunk capacity searched between these (search_chunk_capacity).
constexpr int64_t kMinChunkBytes = int64_t(1) << 20;
constexpr int64_t kMaxChunkBytes = int64_t(64) << 20;
constexpr int64_t kChunkSearchStep = int64_t(256) << 10;

int64_t bytes_of(const Tensor& t) { return t.numel() * int64_t(t.itemsize()); }

}  // namespace

ChunkStore::ChunkStore(Device device, std::vector<std::vector<ShardPiece>> mine,
                       const std::vector<Tensor>& shards, bool chunked, int64_t chunk_bytes)
    : device_(device), chunked_(chunked), mine_(std::move(mine)), mover_(device) {
  for (size_t g = 0; g < shards.size(); ++g) {
    const Tensor shard = shards[g].detach();
    std::vector<Chunk> chunks;
    if (!chunked_) {
      chunks.push_back({.begin = 0, .numel = shard.numel(), .data = shard, .copy = Tensor()});
    } else {
      // Chunks of their own, so that each can move alone.
      const int64_t item = int64_t(dtype_size(shard.dtype()));
      const int64_t capacity =
          chunk_bytes > 0 ? std::max<int64_t>(1, chunk_bytes / item)
                          : search_chunk_capacity(mine_[g], kMinChunkBytes / item,
                                                  kMaxChunkBytes / item, kChunkSearchStep / item);
      for (const ChunkRange& r : pack_chunks(mine_[g], capacity))
        chunks.push_back({.begin = r.begin,
                          .numel = r.numel,
                          .data = shard.narrow(0, r.begin, r.numel).clone(),
                          .copy = Tensor()});
    }
    chunks_.push_back(std::move(chunks));
  }
}

size_t ChunkStore::count() const {
  size_t n = 0;
  for (const auto& chunks : chunks_) n += chunks.size();
  return n;
}

std::vector<int64_t> ChunkStore::chunk_bytes() const {
  std::vector<int64_t> out;
  for (const auto& chunks : chunks_)
    for (const Chunk& c : chunks) out.push_back(bytes_of(c.data));
  return out;
}

std::vector<std::vector<size_t>> ChunkStore::chunks_of_params(size_t params) const {
  std::vector<std::vector<size_t>> out(params);
  size_t index = 0;
  for (size_t g = 0; g < chunks_.size(); ++g) {
    for (const Chunk& c : chunks_[g]) {
      for (const ShardPiece& pc : mine_[g])
        if (pc.shard_offset >= c.begin && pc.shard_offset < c.begin + c.numel)
          out[pc.param].push_back(index);
      ++index;
    }
  }
  return out;
}

const ChunkStore::Chunk& ChunkStore::chunk_of(size_t g, int64_t offset, int64_t numel) const {
  const std::vector<Chunk>& chunks = chunks_[g];
  // The last chunk beginning at or before offset (chunks are in shard order).
  auto it = std::upper_bound(chunks.begin(), chunks.end(), offset,
                             [](int64_t at, const Chunk& c) { return at < c.begin; });
  TS_CHECK(it != chunks.begin(), "zero", "no chunk holds shard element ", offset, " of group ", g);
  const Chunk& c = *std::prev(it);
  TS_CHECK(offset + numel <= c.begin + c.numel, "zero", "shard elements [", offset, ", ",
           offset + numel, ") of group ", g, " cross the chunk [", c.begin, ", ", c.begin + c.numel,
           ")");
  return c;
}

Tensor ChunkStore::piece(size_t g, int64_t offset, int64_t numel) const {
  const Chunk& c = chunk_of(g, offset, numel);
  return (c.copy.defined() ? c.copy : c.data).narrow(0, offset - c.begin, numel);
}

void ChunkStore::write(size_t g, int64_t offset, const Tensor& value) {
  const Chunk& c = chunk_of(g, offset, value.numel());
  const int64_t at = offset - c.begin;
  for (const Tensor& held : {c.data, c.copy})
    if (held.defined()) held.narrow(0, at, value.numel()).copy_(value);
}

void ChunkStore::update(const std::vector<Tensor>& values) {
  TS_CHECK(values.size() == chunks_.size(), "zero", "expected a master shard per group (",
           chunks_.size(), "), got ", values.size());
  autograd::NoGradGuard no_grad;
  mover_.synchronize();  // the host chunks are written below: no move may still read them
  for (size_t g = 0; g < chunks_.size(); ++g) {
    // Round-to-nearest-even, as stage 1 and 2 gather them (ShardedOptimizer::gather_parameters).
    const DType dtype = chunks_[g].empty() ? DType::f32 : chunks_[g][0].data.dtype();
    const Tensor v = dtype == DType::f32 ? values[g].detach() : values[g].detach().to(dtype);
    if (!chunked_) {
      if (!chunks_[g].empty()) chunks_[g][0].data = v;
      continue;
    }
    for (Chunk& c : chunks_[g]) {
      c.data.copy_(v.narrow(0, c.begin, c.numel));
      if (c.copy.defined()) mover_.copy(c.data, c.copy);
    }
  }
}

void ChunkStore::place(const std::vector<bool>& on_host) {
  autograd::NoGradGuard no_grad;
  size_t i = 0;
  for (auto& chunks : chunks_) {
    for (Chunk& c : chunks) {
      const bool home = on_host.at(i++);
      if (home && c.data.device() != mover_.host()) c.data = mover_.host_copy(c.data);
      if (!home && c.data.device() != device_) c.data = c.data.to(device_);
    }
  }
}

std::vector<bool> ChunkStore::copies_held() const {
  std::vector<bool> out;
  for (const auto& chunks : chunks_)
    for (const Chunk& c : chunks) out.push_back(c.copy.defined());
  return out;
}

void ChunkStore::apply_copies(const std::vector<bool>& on_device) {
  autograd::NoGradGuard no_grad;
  // Drops first, so the device never holds a new copy beside one the policy has let go.
  size_t i = 0;
  for (auto& chunks : chunks_)
    for (Chunk& c : chunks)
      if (!on_device[i++] && c.copy.defined()) {
        c.copy = Tensor();
        ++moves_.evictions;
      }
  i = 0;
  int64_t held = 0;
  for (auto& chunks : chunks_) {
    for (Chunk& c : chunks) {
      if (on_device[i++] && !c.copy.defined()) {
        // Queued on the copy stream: it overlaps the compute until a gather reads the copy.
        c.copy = empty({c.numel}, {.dtype = c.data.dtype(), .device = device_});
        mover_.copy(c.data, c.copy);
        ++moves_.fetches;
        moves_.fetched_bytes += bytes_of(c.copy);
      }
      if (c.copy.defined()) held += bytes_of(c.copy);
    }
  }
  moves_.peak_copy_bytes = std::max(moves_.peak_copy_bytes, held);
}

int64_t ChunkStore::chunks_on_device() const {
  int64_t n = 0;
  for (const auto& chunks : chunks_)
    for (const Chunk& c : chunks) n += c.data.device() == device_ || c.copy.defined() ? 1 : 0;
  return n;
}

int64_t ChunkStore::device_bytes() const {
  int64_t n = 0;
  for (const auto& chunks : chunks_)
    for (const Chunk& c : chunks)
      n += (c.data.device() == device_ ? bytes_of(c.data) : 0) +
           (c.copy.defined() ? bytes_of(c.data) : 0);
  return n;
}

int64_t ChunkStore::host_bytes() const {
  int64_t n = 0;
  for (const auto& chunks : chunks_)
    for (const Chunk& c : chunks) n += c.data.device() == device_ ? 0 : bytes_of(c.data);
  return n;
}

}  // namespace tessera::parallel::zero
