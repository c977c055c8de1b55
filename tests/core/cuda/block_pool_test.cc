// The caching allocator's block manager on a fake device: size classes, splitting, merging,
// per-stream reuse, deferred frees behind events, statistics, empty_cache and out of memory.
#include "core/cuda/block_pool.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <map>
#include <random>
#include <vector>

#include "core/error.h"

using namespace tessera;
using namespace tessera::cuda;

namespace {

constexpr size_t kMiB = size_t(1) << 20;

// Hands out addresses from a fake address space (the pool never touches the memory), with a
// capacity, and events that complete when the test says their stream is done.
class FakeBackend final : public SegmentBackend {
 public:
  explicit FakeBackend(size_t capacity) : capacity_(capacity) {}
  ~FakeBackend() override {
    for (FakeEvent* e : events_) delete e;
  }

  void* malloc_segment(size_t nbytes) override {
    if (used_ + nbytes > capacity_) {
      failed_mallocs += 1;
      return nullptr;
    }
    used_ += nbytes;
    const uintptr_t p = next_;
    next_ += nbytes + 4096;  // a gap, so neighbouring segments are never adjacent
    live[reinterpret_cast<void*>(p)] = nbytes;
    return reinterpret_cast<void*>(p);
  }
  void free_segment(void* ptr, size_t nbytes) override {
    auto it = live.find(ptr);
    REQUIRE(it != live.end());
    REQUIRE(it->second == nbytes);
    used_ -= nbytes;
    live.erase(it);
    frees += 1;
  }
  EventId record_event(StreamId stream) override {
    auto* e = new FakeEvent{stream, false};
    events_.push_back(e);
    return e;
  }
  bool event_done(EventId e) override { return static_cast<FakeEvent*>(e)->done; }
  void synchronize_event(EventId e) override {
    static_cast<FakeEvent*>(e)->done = true;
    syncs += 1;
  }
  void destroy_event(EventId e) override {
    auto it = std::find(events_.begin(), events_.end(), static_cast<FakeEvent*>(e));
    REQUIRE(it != events_.end());
    delete *it;
    events_.erase(it);
  }
  std::pair<size_t, size_t> mem_info() override { return {capacity_ - used_, capacity_}; }

  // Every event recorded on `stream` so far has completed.
  void finish(StreamId stream) {
    for (FakeEvent* e : events_)
      if (e->stream == stream) e->done = true;
  }
  size_t live_events() const { return events_.size(); }

  std::map<void*, size_t> live;
  int frees = 0;
  int syncs = 0;
  int failed_mallocs = 0;

 private:
  struct FakeEvent {
    StreamId stream;
    bool done;
  };
  size_t capacity_;
  size_t used_ = 0;
  uintptr_t next_ = 0x10000000;
  std::vector<FakeEvent*> events_;
};

char* as_char(void* p) { return static_cast<char*>(p); }

}  // namespace

TEST_CASE("block sizes round to 512 B and segment sizes follow the size class") {
  CHECK(round_block_size(0) == 512);
  CHECK(round_block_size(1) == 512);
  CHECK(round_block_size(512) == 512);
  CHECK(round_block_size(513) == 1024);
  CHECK(round_block_size(kMiB) == kMiB);
  CHECK(round_block_size(kMiB + 1) == kMiB + 512);
  CHECK(segment_size_for(512) == 2 * kMiB);
  CHECK(segment_size_for(kMiB) == 2 * kMiB);
  CHECK(segment_size_for(kMiB + 512) == 20 * kMiB);
  CHECK(segment_size_for(10 * kMiB - 512) == 20 * kMiB);
  CHECK(segment_size_for(10 * kMiB) == 10 * kMiB);
  CHECK(segment_size_for(11 * kMiB + 512) == 12 * kMiB);
}

TEST_CASE("small blocks are carved from one 2 MiB segment in address order") {
  FakeBackend backend(1024 * kMiB);
  BlockPool pool(&backend, 0);
  void* a = pool.allocate(1000, 1);
  void* b = pool.allocate(3000, 1);
  void* c = pool.allocate(1, 1);
  CHECK(as_char(b) == as_char(a) + 1024);
  CHECK(as_char(c) == as_char(b) + 3072);
  CHECK(pool.block_size(a) == 1024);
  CHECK(pool.block_size(b) == 3072);
  CHECK(pool.block_size(c) == 512);
  BlockPoolStats s = pool.stats();
  CHECK(s.num_segment_allocs == 1);
  CHECK(s.reserved_bytes == int64_t(2 * kMiB));
  CHECK(s.allocated_bytes == 1024 + 3072 + 512);
  CHECK(s.num_allocs == 3);
  CHECK(s.num_cached_blocks == 1);  // the rest of the segment
  pool.free(a);
  pool.free(b);
  pool.free(c);
  CHECK(pool.stats().allocated_bytes == 0);
}

TEST_CASE("a freed block is reused best-fit by the same stream") {
  FakeBackend backend(1024 * kMiB);
  BlockPool pool(&backend, 0);
  void* a = pool.allocate(4096, 7);
  void* keep = pool.allocate(512, 7);  // keeps a's block from merging with the segment's tail
  pool.free(a);
  void* again = pool.allocate(3000, 7);  // fits a's 4096 block, the smallest that fits
  CHECK(again == a);
  CHECK(pool.block_size(again) == 3072);  // split: 1024 B go back to the pool
  void* tail = pool.allocate(1024, 7);
  CHECK(as_char(tail) == as_char(a) + 3072);
  CHECK(pool.stats().num_segment_allocs == 1);
  pool.free(again);
  pool.free(tail);
  pool.free(keep);
}

TEST_CASE("freeing neighbours merges them back into the whole segment") {
  FakeBackend backend(1024 * kMiB);
  BlockPool pool(&backend, 0);
  void* a = pool.allocate(1024, 1);
  void* b = pool.allocate(2048, 1);
  void* c = pool.allocate(4096, 1);
  CHECK(pool.stats().num_cached_blocks == 1);
  pool.free(a);
  pool.free(c);  // merges with the tail
  CHECK(pool.stats().num_cached_blocks == 2);
  pool.free(b);  // merges with both sides
  CHECK(pool.stats().num_cached_blocks == 1);
  // The whole 2 MiB segment is one block again: a 1 MiB request fits without a new segment.
  void* big = pool.allocate(kMiB, 1);
  CHECK(big == a);
  CHECK(pool.stats().num_segment_allocs == 1);
  pool.free(big);
  pool.empty_cache();
  CHECK(backend.live.empty());
  CHECK(pool.stats().reserved_bytes == 0);
  CHECK(pool.stats().num_segment_frees == 1);
}

TEST_CASE("a block freed on one stream is not reused by another") {
  FakeBackend backend(1024 * kMiB);
  BlockPool pool(&backend, 0);
  void* a = pool.allocate(8192, 1);
  pool.free(a);
  void* b = pool.allocate(8192, 2);
  CHECK(b != a);
  CHECK(pool.stats().num_segment_allocs == 2);  // stream 2 gets its own segment
  void* c = pool.allocate(8192, 1);
  CHECK(c == a);
  pool.free(b);
  pool.free(c);
  pool.empty_cache();
  CHECK(backend.live.empty());
}

TEST_CASE("record_stream defers reuse until the other stream's event completes") {
  FakeBackend backend(1024 * kMiB);
  BlockPool pool(&backend, 0);
  void* a = pool.allocate(4096, 1);
  void* keep = pool.allocate(512, 1);
  pool.record_stream(a, 2);
  pool.record_stream(a, 2);  // recorded once
  pool.record_stream(a, 1);  // its own stream: nothing to wait for
  pool.free(a);
  CHECK(pool.stats().num_pending_events == 1);
  CHECK(backend.live_events() == 1);
  CHECK(pool.stats().allocated_bytes == 512);
  void* b = pool.allocate(4096, 1);
  CHECK(b != a);  // stream 2 may still use a
  backend.finish(2);
  void* c = pool.allocate(4096, 1);
  CHECK(c == a);
  CHECK(pool.stats().num_pending_events == 0);
  CHECK(backend.live_events() == 0);
  pool.free(b);
  pool.free(c);
  pool.free(keep);
  pool.empty_cache();
  CHECK(backend.live.empty());
}

TEST_CASE("empty_cache waits for pending events and keeps segments in use") {
  FakeBackend backend(1024 * kMiB);
  BlockPool pool(&backend, 0);
  void* a = pool.allocate(1024, 1);
  void* b = pool.allocate(1024, 1);
  void* big = pool.allocate(3 * kMiB, 1);
  pool.record_stream(big, 5);
  pool.free(big);
  pool.free(a);
  pool.empty_cache();
  CHECK(backend.syncs == 1);
  CHECK(backend.live.size() == 1);  // the small segment still holds b
  CHECK(pool.stats().reserved_bytes == int64_t(2 * kMiB));
  CHECK(pool.stats().num_segment_frees == 1);
  pool.free(b);
  pool.empty_cache();
  CHECK(backend.live.empty());
  CHECK(pool.stats().reserved_bytes == 0);
}

TEST_CASE("large blocks share 20 MiB segments and split only when over 1 MiB would remain") {
  FakeBackend backend(1024 * kMiB);
  BlockPool pool(&backend, 0);
  void* a = pool.allocate(3 * kMiB, 1);
  void* b = pool.allocate(5 * kMiB, 1);
  CHECK(as_char(b) == as_char(a) + 3 * kMiB);
  CHECK(pool.stats().num_segment_allocs == 1);
  CHECK(pool.stats().reserved_bytes == int64_t(20 * kMiB));
  pool.free(a);
  pool.free(b);
  void* c = pool.allocate(19 * kMiB + kMiB / 2, 1);  // 0.5 MiB would remain: not split
  CHECK(c == a);
  CHECK(pool.block_size(c) == 20 * kMiB);
  pool.free(c);
  void* d = pool.allocate(12 * kMiB, 1);  // fits the cached 20 MiB block
  CHECK(pool.block_size(d) == 12 * kMiB);
  CHECK(pool.stats().num_segment_allocs == 1);
  void* e = pool.allocate(30 * kMiB + 1, 1);  // its own segment, rounded to 2 MiB
  CHECK(pool.stats().num_segment_allocs == 2);
  CHECK(pool.stats().reserved_bytes == int64_t(20 * kMiB + 32 * kMiB));
  CHECK(pool.block_size(e) == 30 * kMiB + 512);  // 2 MiB - 512 B left over: split off
  // Small requests never take large blocks.
  void* s = pool.allocate(100, 1);
  CHECK(pool.stats().num_segment_allocs == 3);
  pool.free(d);
  pool.free(e);
  pool.free(s);
  pool.empty_cache();
  CHECK(backend.live.empty());
}

TEST_CASE("peak statistics follow the high-water mark until reset") {
  FakeBackend backend(1024 * kMiB);
  BlockPool pool(&backend, 0);
  void* a = pool.allocate(4 * kMiB, 1);
  void* b = pool.allocate(4 * kMiB, 1);
  pool.free(a);
  BlockPoolStats s = pool.stats();
  CHECK(s.allocated_bytes == int64_t(4 * kMiB));
  CHECK(s.peak_allocated_bytes == int64_t(8 * kMiB));
  CHECK(s.peak_reserved_bytes == int64_t(20 * kMiB));
  pool.reset_peak_stats();
  CHECK(pool.stats().peak_allocated_bytes == int64_t(4 * kMiB));
  pool.free(b);
  CHECK(pool.stats().peak_allocated_bytes == int64_t(4 * kMiB));
}

TEST_CASE("out of memory frees the cache, retries once, then says what it held") {
  FakeBackend backend(64 * kMiB);
  BlockPool pool(&backend, 3);
  void* a = pool.allocate(40 * kMiB, 1);
  pool.free(a);                           // cached: 40 MiB reserved, none allocated
  void* b = pool.allocate(50 * kMiB, 2);  // 40 + 50 > 64: the retry returns a's segment first
  REQUIRE(b != nullptr);
  BlockPoolStats s = pool.stats();
  CHECK(s.num_oom_retries == 1);
  CHECK(s.num_segment_frees == 1);
  CHECK(s.reserved_bytes == int64_t(50 * kMiB));
  CHECK(backend.failed_mallocs == 1);
  try {
    pool.allocate(100 * kMiB, 2);
    FAIL("expected an out-of-memory error");
  } catch (const ValueError& e) {
    CHECK(
        std::string(e.what()) ==
        "[cuda alloc] out of memory on cuda:3: tried to allocate 100.00 MiB; 50.00 MiB allocated, "
        "50.00 MiB reserved by Tessera, 14.00 MiB free of 64.00 MiB");
  }
  CHECK(pool.stats().num_ooms == 1);
  CHECK(backend.failed_mallocs == 3);                              // the first try and the retry
  CHECK_THROWS_AS(pool.allocate(size_t(1) << 50, 2), ValueError);  // 1 PiB
  CHECK_THROWS_WITH(pool.allocate(~size_t(0), 2), Catch::Contains("out of memory on cuda:3"));
  pool.free(b);
}

TEST_CASE("edge cases: zero bytes, nullptr, unknown pointers") {
  FakeBackend backend(64 * kMiB);
  BlockPool pool(&backend, 0);
  CHECK(pool.allocate(0, 1) == nullptr);
  CHECK(pool.stats().num_segment_allocs == 0);
  pool.free(nullptr);
  int x = 0;
  CHECK_THROWS_WITH(pool.free(&x),
                    Catch::Contains("[cuda free] expected a pointer from the caching allocator"));
  CHECK_THROWS_AS(pool.record_stream(&x, 2), ValueError);
}

TEST_CASE("random alloc/free on two streams keeps blocks disjoint and the counts exact") {
  FakeBackend backend(size_t(64) << 30);
  std::mt19937 rng(1234);
  {
    BlockPool pool(&backend, 0);
    struct Live {
      char* ptr;
      size_t size;
      StreamId stream;
    };
    std::vector<Live> live;
    std::uniform_int_distribution<int> coin(0, 99);
    std::uniform_int_distribution<size_t> small(1, 200000), large(kMiB + 1, 24 * kMiB);
    for (int step = 0; step < 4000; ++step) {
      if (live.empty() || coin(rng) < 55) {
        const size_t n = coin(rng) < 80 ? small(rng) : large(rng);
        const StreamId s = 1 + StreamId(coin(rng) % 2);
        char* p = as_char(pool.allocate(n, s));
        const size_t got = pool.block_size(p);
        REQUIRE(got >= n);
        REQUIRE(got % kRoundBytes == 0);
        live.push_back({p, got, s});
        if (coin(rng) < 10) pool.record_stream(p, 9);
      } else {
        const size_t i = size_t(coin(rng)) % live.size();
        pool.free(live[i].ptr);
        live.erase(live.begin() + int64_t(i));
      }
      if (step % 97 == 0) backend.finish(9);
      if (step % 500 == 0) {
        std::vector<Live> sorted = live;
        std::sort(sorted.begin(), sorted.end(),
                  [](const Live& x, const Live& y) { return x.ptr < y.ptr; });
        for (size_t i = 1; i < sorted.size(); ++i)
          REQUIRE(sorted[i - 1].ptr + sorted[i - 1].size <= sorted[i].ptr);
        int64_t total = 0;
        for (const Live& l : live) total += int64_t(l.size);
        REQUIRE(pool.stats().allocated_bytes == total);
        // Every live block lies inside one live segment.
        for (const Live& l : live) {
          auto it = backend.live.upper_bound(l.ptr);
          REQUIRE(it != backend.live.begin());
          --it;
          REQUIRE(l.ptr + l.size <= as_char(it->first) + it->second);
        }
      }
    }
    for (const Live& l : live) pool.free(l.ptr);
    CHECK(pool.stats().allocated_bytes == 0);
    pool.empty_cache();
    CHECK(backend.live.empty());  // everything merged back into whole segments
    CHECK(pool.stats().reserved_bytes == 0);
    CHECK(backend.live_events() == 0);
  }
}

TEST_CASE("destroying the pool returns every segment, even with blocks handed out") {
  FakeBackend backend(256 * kMiB);
  {
    BlockPool pool(&backend, 0);
    pool.allocate(1000, 1);
    void* b = pool.allocate(5 * kMiB, 1);
    pool.record_stream(b, 4);
    pool.free(b);
    pool.allocate(40 * kMiB, 2);
  }
  CHECK(backend.live.empty());
  CHECK(backend.live_events() == 0);
}
