// The CPU allocator (core/allocator.h): large blocks freed are reused for the next request of the
// same rounded size (no fresh pages to fault in), small ones are not cached, and the counters
// count tensors' bytes whether a block came from the cache or not, and the cache's cap follows the
// tensors' peak. Under AddressSanitizer nothing is cached, so every use after free is still caught.
#include "core/allocator.h"

#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <utility>
#include <vector>

using namespace tessera;

namespace {

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kCaching = false;
#else
constexpr bool kCaching = true;
#endif

}  // namespace

TEST_CASE("a freed large block serves the next request of its rounded size") {
  Allocator& a = allocator_for(kCPU);
  const int64_t before = memory_stats(kCPU).current_bytes;
  const size_t big = (size_t(3) << 20) + 100;  // rounds to 3 MiB + 64 KiB
  void* p = a.allocate(big, kCPU);
  CHECK(memory_stats(kCPU).current_bytes - before == int64_t(big));
  a.deallocate(p, big, kCPU);
  CHECK(memory_stats(kCPU).current_bytes == before);  // the cache is not counted
  void* q = a.allocate(big + 10, kCPU);               // the same rounded size
  CHECK((q == p) == kCaching);
  CHECK(memory_stats(kCPU).current_bytes - before == int64_t(big + 10));
  static_cast<char*>(q)[big + 9] = 1;  // the whole request is usable
  a.deallocate(q, big + 10, kCPU);
  // Another rounded size is a fresh block, and the cached one is not handed out for it.
  void* r = a.allocate(size_t(8) << 20, kCPU);
  CHECK(r != q);
  a.deallocate(r, size_t(8) << 20, kCPU);
  CHECK(memory_stats(kCPU).current_bytes == before);
}

TEST_CASE("blocks of many sizes reuse their own, and every byte stays usable") {
  Allocator& a = allocator_for(kCPU);
  for (int round = 0; round < 3; ++round) {
    std::vector<std::pair<void*, size_t>> held;
    for (size_t mb = 1; mb <= 6; ++mb) {
      const size_t n = mb << 20;
      auto* p = static_cast<unsigned char*>(a.allocate(n, kCPU));
      p[0] = p[n - 1] = static_cast<unsigned char>(mb);
      held.emplace_back(p, n);
    }
    for (const auto& [p, n] : held) {
      CHECK(static_cast<unsigned char*>(p)[n - 1] == static_cast<unsigned char>(n >> 20));
      a.deallocate(p, n, kCPU);
    }
  }
}

TEST_CASE("the cache grows with the tensors' peak, so a step's freed blocks are all kept") {
  if (!kCaching) {
    CHECK(cpu_cache_stats().cap_bytes == 0);
    return;
  }
  Allocator& a = allocator_for(kCPU);
  const int64_t quarter = int64_t(sysconf(_SC_PHYS_PAGES)) * sysconf(_SC_PAGESIZE) / 4;
  const int64_t gib = int64_t(1) << 30;
  CHECK(cpu_cache_stats().cap_bytes >= std::min(gib, quarter));
  // Three 512 MiB blocks held at once: 1.5 GiB, more than the 1 GiB the cap starts from. Never
  // written, so they cost no pages.
  const int64_t half = int64_t(512) << 20;
  std::vector<void*> held;
  for (int i = 0; i < 3; ++i) held.push_back(a.allocate(size_t(half), kCPU));
  const CpuCacheStats grown = cpu_cache_stats();
  CHECK(grown.cap_bytes <= std::max(gib, quarter));
  if (quarter < 3 * half) {  // the cap stops at a quarter of the memory: nothing more to check
    WARN("under 6 GiB of memory: the cache's growth past a quarter of it is not checked");
    for (void* p : held) a.deallocate(p, size_t(half), kCPU);
    return;
  }
  CHECK(grown.cap_bytes >= 3 * half);
  for (void* p : held) a.deallocate(p, size_t(half), kCPU);
  // All three kept (older cached blocks may have made room for them).
  const int64_t kept = cpu_cache_stats().cached_bytes;
  CHECK(kept >= 3 * half);
  CHECK(kept <= cpu_cache_stats().cap_bytes);
  // The next step takes them back.
  std::vector<void*> again;
  for (int i = 0; i < 3; ++i) again.push_back(a.allocate(size_t(half), kCPU));
  for (void* p : again) CHECK(std::find(held.begin(), held.end(), p) != held.end());
  CHECK(cpu_cache_stats().cached_bytes == kept - 3 * half);
  for (void* p : again) a.deallocate(p, size_t(half), kCPU);
}
