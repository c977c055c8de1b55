// The caching allocator's block manager for one device, independent of CUDA: it gets raw segments
// and stream events through SegmentBackend, so tests drive it with a fake backend on host memory.
//
// Size classes (chosen after PyTorch's, for the same reasons):
//   - every request is rounded up to a multiple of 512 B (kRoundBytes);
//   - small requests (<= 1 MiB) are carved from 2 MiB segments, so many small tensors share one
//     cudaMalloc and split freely down to 512 B;
//   - large requests (> 1 MiB) get a 20 MiB segment when below 10 MiB (medium tensors share a
//     segment), else a segment of the request rounded up to 2 MiB. A large block is split only
//     when more than 1 MiB would remain, so large segments do not shatter into small pieces.
// Small and large blocks live in separate pools; a free block is reused only for the stream it
// was last used on, and a block used by other streams (record_stream) returns to its pool only
// once events recorded on those streams have completed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <set>
#include <unordered_map>
#include <utility>
#include <vector>

namespace tessera::cuda {

using StreamId = uintptr_t;  // a cudaStream_t as an integer (0: the legacy default stream)
using EventId = void*;       // an opaque event of the backend

// Raw memory and stream events of one device.
class SegmentBackend {
 public:
  virtual ~SegmentBackend() = default;
  // A new segment of nbytes, or nullptr when the device is out of memory (never throws for that).
  virtual void* malloc_segment(size_t nbytes) = 0;
  virtual void free_segment(void* ptr, size_t nbytes) = 0;
  // An event recorded now on `stream`; done once the stream's work queued so far has finished.
  virtual EventId record_event(StreamId stream) = 0;
  virtual bool event_done(EventId event) = 0;
  virtual void synchronize_event(EventId event) = 0;  // blocks until done
  virtual void destroy_event(EventId event) = 0;
  // The device's free and total bytes, for the out-of-memory message.
  virtual std::pair<size_t, size_t> mem_info() = 0;
};

struct BlockPoolStats {
  int64_t allocated_bytes = 0;  // in blocks handed out (rounded sizes)
  int64_t reserved_bytes = 0;   // in segments held from the device
  int64_t peak_allocated_bytes = 0;
  int64_t peak_reserved_bytes = 0;
  int64_t num_allocs = 0;          // blocks handed out so far
  int64_t num_segment_allocs = 0;  // successful malloc_segment calls (cudaMalloc)
  int64_t num_segment_frees = 0;   // free_segment calls (cudaFree)
  int64_t num_oom_retries = 0;     // times the cache was freed to retry a failed malloc_segment
  int64_t num_ooms = 0;            // out-of-memory errors thrown
  int64_t num_cached_blocks = 0;   // free blocks waiting for reuse
  int64_t num_pending_events = 0;  // events that freed blocks still wait for (record_stream)
};

inline constexpr size_t kRoundBytes = 512;
inline constexpr size_t kSmallRequest = size_t(1) << 20;  // <= this: small pool
inline constexpr size_t kSmallSegment = size_t(2) << 20;
inline constexpr size_t kMediumRequest = size_t(10) << 20;  // < this: 20 MiB segment
inline constexpr size_t kMediumSegment = size_t(20) << 20;
inline constexpr size_t kLargeRound = size_t(2) << 20;

// The block size a request of nbytes gets, and the segment size a new segment for it gets.
size_t round_block_size(size_t nbytes);
size_t segment_size_for(size_t block_size);

class BlockPool {
 public:
  // device_index names the device in error messages; the backend must outlive the pool.
  BlockPool(SegmentBackend* backend, int device_index);
  ~BlockPool();  // returns every cached segment; blocks still handed out are leaked to the backend
  BlockPool(const BlockPool&) = delete;
  BlockPool& operator=(const BlockPool&) = delete;

  // A block of at least nbytes for work on `stream`; throws ValueError "[cuda alloc] out of
  // memory ..." when the device cannot provide it even after freeing the cache. nbytes == 0 gives
  // nullptr.
  void* allocate(size_t nbytes, StreamId stream);
  // Returns a block from allocate(); nullptr is ignored. Unknown pointers throw ValueError.
  void free(void* ptr);
  // Marks the block holding ptr as used by `stream` too: its free waits for that stream's work.
  void record_stream(void* ptr, StreamId stream);
  // Returns every fully free segment to the backend (waiting for pending events first).
  void empty_cache();

  BlockPoolStats stats() const;
  void reset_peak_stats();
  // The size of the block handed out for ptr (0 when unknown), for tests and diagnostics.
  size_t block_size(void* ptr) const;

 private:
  struct Block;
  struct BlockLess {
    bool operator()(const Block* a, const Block* b) const;
  };
  using FreeSet = std::set<Block*, BlockLess>;

  FreeSet& pool_for(bool small) { return small ? small_free_ : large_free_; }
  Block* find_free(size_t size, StreamId stream, bool small);
  Block* new_segment(size_t size, StreamId stream, bool small);
  Block* split(Block* block, size_t size);
  void insert_free(Block* block);  // merges with free neighbours
  void process_events();           // returns blocks whose events have completed
  void synchronize_events();
  void release_free_segments();
  [[noreturn]] void throw_oom(size_t requested);

  SegmentBackend* backend_;
  int device_;
  mutable std::mutex mu_;
  FreeSet small_free_, large_free_;
  std::unordered_map<void*, Block*> allocated_;
  std::vector<std::pair<EventId, Block*>> pending_;  // events in recording order
  BlockPoolStats stats_;
};

}  // namespace tessera::cuda
