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
//   auto    a warm-up first: the first training step runs with every chunk on the host while the
//           allocator's peak records the device memory that is not parameter chunks (activations,
//           gathered parameters, gradients). Then chunks move to the device in the order the step
//           first read them while that peak plus the chunks stays under `device_limit`; the rest
//           stay on the host. A limit below the warm-up's own peak is refused, naming both.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "parallel/zero/zero_plan.h"

namespace tessera::parallel::zero {

struct ParamPlacement {
  std::string policy = "device";  // "device", "static" or "auto"
  double host_fraction = 1.0;     // static: the share of chunks on the host, in [0, 1]
  int64_t device_limit = 0;       // auto: bytes of device memory the run may use
  int64_t chunk_bytes = 0;        // a chunk's size (a larger piece gets a chunk of its own); 0: 4 MiB
};

// One chunk of a rank's compute shard: shard elements [begin, begin + numel).
struct ChunkRange {
  int64_t begin = 0;
  int64_t numel = 0;
};

// Packs the rank's pieces (in shard order, contiguous) into chunks of at most `capacity` elements
// without splitting a piece; a piece longer than capacity is a chunk by itself.
std::vector<ChunkRange> pack_chunks(const std::vector<ShardPiece>& pieces, int64_t capacity);

// static: which of `count` chunks (in order) live on the host.
std::vector<bool> static_host_chunks(size_t count, double host_fraction);

// auto, after the warm-up: which chunks live on the device. `first_use[c]`: the position in the
// recorded access order of chunk c's first read (chunks never read come last); `bytes[c]`: its
// size; `budget`: the device bytes left for chunks. Chunks are taken in first-use order while
// they fit (a chunk that does not fit is skipped, a later smaller one may still).
std::vector<bool> auto_device_chunks(const std::vector<size_t>& first_use,
                                     const std::vector<int64_t>& bytes, int64_t budget);

// "8G", "512M", "64K" (powers of 1024) or plain bytes, as zero.device_memory_limit is written.
// Throws ValueError naming `key` for anything else or a value below 1.
int64_t parse_bytes(const std::string& text, const std::string& key);

}  // namespace tessera::parallel::zero
