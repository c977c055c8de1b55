// Block bookkeeping of the caching allocator: best-fit reuse per stream, splitting, merging of free
// neighbours, deferred frees behind stream events, and the out-of-memory report.
#include "core/cuda/block_pool.h"

#include <algorithm>
#include <cstdio>
#include <limits>
#include <tuple>

#include "core/error.h"

namespace tessera::cuda {

// A piece of a segment. Blocks of one segment form a doubly linked list in address order and all
// belong to the stream the segment was created for.
struct BlockPool::Block {
  char* ptr = nullptr;
  size_t size = 0;
  StreamId stream = 0;
  bool small = false;
  bool allocated = false;         // handed out (or being handed out)
  int pending_events = 0;         // freed, waiting for events of other streams
  std::vector<StreamId> used_by;  // other streams recorded while handed out
  Block* prev = nullptr;
  Block* next = nullptr;

  bool is_free() const { return !allocated && pending_events == 0; }
};

bool BlockPool::BlockLess::operator()(const Block* a, const Block* b) const {
  if (a->stream != b->stream) return a->stream < b->stream;
  if (a->size != b->size) return a->size < b->size;
  return a->ptr < b->ptr;
}

size_t round_block_size(size_t nbytes) {
  return std::max<size_t>(1, (nbytes + kRoundBytes - 1) / kRoundBytes) * kRoundBytes;
}

size_t segment_size_for(size_t block_size) {
  if (block_size <= kSmallRequest) return kSmallSegment;
  if (block_size < kMediumRequest) return kMediumSegment;
  return (block_size + kLargeRound - 1) / kLargeRound * kLargeRound;
}

namespace {
std::string mib(double bytes) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.2f", bytes / double(1 << 20));
  return buf;
}
}  // namespace

BlockPool::BlockPool(SegmentBackend* backend, int device_index)
    : backend_(backend), device_(device_index) {}

BlockPool::~BlockPool() {
  // Every segment goes back, including ones with blocks still handed out: they die with the pool.
  try {
    synchronize_events();
  } catch (...) {
    // The device may already be gone at exit; the segments are returned below regardless.
  }
  std::set<Block*> heads;
  auto add_head = [&](Block* b) {
    while (b->prev) b = b->prev;
    heads.insert(b);
  };
  for (Block* b : small_free_) add_head(b);
  for (Block* b : large_free_) add_head(b);
  for (auto& [ptr, b] : allocated_) add_head(b);
  for (auto& [event, b] : pending_) add_head(b);
  for (Block* head : heads) {
    char* base = head->ptr;
    size_t total = 0;
    for (Block* b = head; b;) {
      Block* next = b->next;
      total += b->size;
      delete b;
      b = next;
    }
    try {
      backend_->free_segment(base, total);
    } catch (...) {
    }
  }
}

void* BlockPool::allocate(size_t nbytes, StreamId stream) {
  if (nbytes == 0) return nullptr;
  std::lock_guard<std::mutex> lock(mu_);
  if (nbytes > std::numeric_limits<size_t>::max() / 4)
    throw_oom(nbytes);  // rounding would overflow
  const size_t size = round_block_size(nbytes);
  const bool small = size <= kSmallRequest;
  process_events();
  Block* block = find_free(size, stream, small);
  if (!block) block = new_segment(size, stream, small);
  if (!block) {
    // Cached segments of every stream go back to the device, then one more try.
    stats_.num_oom_retries += 1;
    synchronize_events();
    release_free_segments();
    block = new_segment(size, stream, small);
  }
  if (!block) throw_oom(nbytes);
  block->allocated = true;  // before split, so the remainder does not merge back into it
  block = split(block, size);
  allocated_[block->ptr] = block;
  stats_.allocated_bytes += int64_t(block->size);
  stats_.peak_allocated_bytes = std::max(stats_.peak_allocated_bytes, stats_.allocated_bytes);
  stats_.num_allocs += 1;
  return block->ptr;
}

void BlockPool::free(void* ptr) {
  if (!ptr) return;
  std::lock_guard<std::mutex> lock(mu_);
  auto it = allocated_.find(ptr);
  TS_CHECK(it != allocated_.end(), "cuda free",
           "expected a pointer from the caching allocator of cuda:", device_, ", got ", ptr);
  Block* block = it->second;
  allocated_.erase(it);
  stats_.allocated_bytes -= int64_t(block->size);
  block->allocated = false;
  if (block->used_by.empty()) {
    insert_free(block);
    return;
  }
  // Other streams may still read or write the block: it is reusable once their queued work is done.
  std::vector<StreamId> streams = std::move(block->used_by);
  block->used_by.clear();
  for (StreamId s : streams) {
    EventId e = backend_->record_event(s);
    block->pending_events += 1;
    pending_.emplace_back(e, block);
  }
}

void BlockPool::record_stream(void* ptr, StreamId stream) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = allocated_.find(ptr);
  TS_CHECK(it != allocated_.end(), "record_stream",
           "expected memory from the caching allocator of cuda:", device_, ", got ", ptr);
  Block* block = it->second;
  if (stream == block->stream) return;
  if (std::find(block->used_by.begin(), block->used_by.end(), stream) == block->used_by.end())
    block->used_by.push_back(stream);
}

void BlockPool::empty_cache() {
  std::lock_guard<std::mutex> lock(mu_);
  synchronize_events();
  release_free_segments();
}

BlockPoolStats BlockPool::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  BlockPoolStats s = stats_;
  s.num_cached_blocks = int64_t(small_free_.size() + large_free_.size());
  s.num_pending_events = int64_t(pending_.size());
  return s;
}

void BlockPool::reset_peak_stats() {
  std::lock_guard<std::mutex> lock(mu_);
  stats_.peak_allocated_bytes = stats_.allocated_bytes;
  stats_.peak_reserved_bytes = stats_.reserved_bytes;
}

size_t BlockPool::block_size(void* ptr) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = allocated_.find(ptr);
  return it == allocated_.end() ? 0 : it->second->size;
}

BlockPool::Block* BlockPool::find_free(size_t size, StreamId stream, bool small) {
  FreeSet& pool = pool_for(small);
  Block key;
  key.stream = stream;
  key.size = size;
  auto it = pool.lower_bound(&key);  // the smallest block of this stream that fits
  if (it == pool.end() || (*it)->stream != stream) return nullptr;
  Block* block = *it;
  pool.erase(it);
  return block;
}

BlockPool::Block* BlockPool::new_segment(size_t size, StreamId stream, bool small) {
  const size_t seg = segment_size_for(size);
  void* ptr = backend_->malloc_segment(seg);
  if (!ptr) return nullptr;
  stats_.num_segment_allocs += 1;
  stats_.reserved_bytes += int64_t(seg);
  stats_.peak_reserved_bytes = std::max(stats_.peak_reserved_bytes, stats_.reserved_bytes);
  Block* block = new Block;
  block->ptr = static_cast<char*>(ptr);
  block->size = seg;
  block->stream = stream;
  block->small = small;
  return block;
}

BlockPool::Block* BlockPool::split(Block* block, size_t size) {
  const size_t remaining = block->size - size;
  const bool worth_it = block->small ? remaining >= kRoundBytes : remaining > kSmallRequest;
  if (!worth_it) return block;
  Block* rest = new Block;
  rest->ptr = block->ptr + size;
  rest->size = remaining;
  rest->stream = block->stream;
  rest->small = block->small;
  rest->prev = block;
  rest->next = block->next;
  if (block->next) block->next->prev = rest;
  block->next = rest;
  block->size = size;
  insert_free(rest);
  return block;
}

void BlockPool::insert_free(Block* block) {
  FreeSet& pool = pool_for(block->small);
  if (Block* prev = block->prev; prev && prev->is_free()) {
    pool.erase(prev);  // before its size (part of the set key) changes
    prev->size += block->size;
    prev->next = block->next;
    if (block->next) block->next->prev = prev;
    delete block;
    block = prev;
  }
  if (Block* next = block->next; next && next->is_free()) {
    pool.erase(next);
    block->size += next->size;
    block->next = next->next;
    if (next->next) next->next->prev = block;
    delete next;
  }
  pool.insert(block);
}

void BlockPool::process_events() {
  size_t kept = 0;
  for (size_t i = 0; i < pending_.size(); ++i) {
    auto [event, block] = pending_[i];
    if (!backend_->event_done(event)) {
      pending_[kept++] = pending_[i];
      continue;
    }
    backend_->destroy_event(event);
    if (--block->pending_events == 0) insert_free(block);
  }
  pending_.resize(kept);
}

void BlockPool::synchronize_events() {
  while (!pending_.empty()) {
    auto [event, block] = pending_.back();
    backend_->synchronize_event(event);
    backend_->destroy_event(event);
    pending_.pop_back();
    if (--block->pending_events == 0) insert_free(block);
  }
}

void BlockPool::release_free_segments() {
  for (FreeSet* pool : {&small_free_, &large_free_}) {
    for (auto it = pool->begin(); it != pool->end();) {
      Block* b = *it;
      if (b->prev || b->next) {  // part of a segment still in use
        ++it;
        continue;
      }
      it = pool->erase(it);
      backend_->free_segment(b->ptr, b->size);
      stats_.reserved_bytes -= int64_t(b->size);
      stats_.num_segment_frees += 1;
      delete b;
    }
  }
}

void BlockPool::throw_oom(size_t requested) {
  stats_.num_ooms += 1;
  size_t free_bytes = 0, total_bytes = 0;
  try {
    std::tie(free_bytes, total_bytes) = backend_->mem_info();
  } catch (...) {
    // The report still names what Tessera holds; the device's own numbers stay 0.
  }
  throw ValueError(
      "cuda alloc",
      str_cat("out of memory on cuda:", device_, ": tried to allocate ", mib(double(requested)),
              " MiB; ", mib(double(stats_.allocated_bytes)), " MiB allocated, ",
              mib(double(stats_.reserved_bytes)), " MiB reserved by Tessera, ",
              mib(double(free_bytes)), " MiB free of ", mib(double(total_bytes)), " MiB"));
}

}  // namespace tessera::cuda
