// The CPU allocator (core/allocator.h): large blocks freed are reused for the next request of the
// same rounded size (no fresh pages to fault in), small ones are not cached, and the counters
// count tensors' bytes whether a block came from the cache or not. Under AddressSanitizer nothing
// is cached, so every use after free is still caught.
#include "core/allocator.h"

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
  void* q = a.allocate(big + 10, kCPU);                // the same rounded size
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
