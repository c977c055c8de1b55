// The caching allocator behind cuda tensors: a clear error without a GPU, and on a GPU the
// statistics, per-stream reuse, record_stream, empty_cache and the out-of-memory message.
#include "core/allocator.h"

#include <catch2/catch.hpp>

#include "core/cuda/caching_allocator.h"
#include "core/cuda/pinned.h"
#include "core/cuda/stream.h"
#include "core/factory.h"
#include "tests/testing/cuda.h"

using namespace tessera;

TEST_CASE("without a GPU a cuda tensor is a ValueError naming the reason; CPU is unaffected") {
  if (cuda::is_available()) {
    WARN("skipped: this machine has a GPU");
    return;
  }
  const std::string reason = cuda::unavailable_reason();
  REQUIRE(!reason.empty());
  CHECK_THROWS_AS(empty({2, 3}, {.device = cuda_device()}), ValueError);
  CHECK_THROWS_WITH(
      empty({2, 3}, {.device = cuda_device()}),
      Catch::Contains("[cuda alloc] cannot allocate on cuda:0") && Catch::Contains(reason));
  CHECK_THROWS_WITH(ones({4}).to(cuda_device()), Catch::Contains(reason));
  CHECK_THROWS_WITH(cuda::pinned_empty({4}), Catch::Contains(reason));
  CHECK_THROWS_AS(cuda::Stream(0), ValueError);
  CHECK(cuda::allocator_stats(0).num_segment_allocs == 0);
  cuda::empty_cache();  // nothing to return, and no driver call that could fail
  Tensor t = full({3}, 2.0);
  CHECK(t.to(DType::bf16).to(DType::f32).select(0, 2).item() == 2.0);
  CHECK(!cuda::is_pinned(t));
}

TEST_CASE("StreamGuard sets and restores the current stream") {
  const cudaStream_t before = cuda::current_stream(0);
  auto fake = reinterpret_cast<cudaStream_t>(uintptr_t(0x1000));
  {
    cuda::StreamGuard guard(0, fake);
    CHECK(cuda::current_stream(0) == fake);
    CHECK(cuda::current_stream(1) == cudaStream_t{nullptr});
  }
  CHECK(cuda::current_stream(0) == before);
}

TEST_CASE("allocator statistics and memory_stats follow cuda tensors") {
  TS_REQUIRE_GPU();
  cuda::empty_cache();
  const cuda::BlockPoolStats s0 = cuda::allocator_stats(0);
  const MemoryStats m0 = memory_stats(cuda_device());
  void* first = nullptr;
  {
    Tensor t = empty({1000}, {.device = cuda_device()});  // 4000 B -> a 4096 B block
    first = t.data_ptr();
    const cuda::BlockPoolStats s1 = cuda::allocator_stats(0);
    CHECK(s1.allocated_bytes == s0.allocated_bytes + 4096);
    CHECK(s1.reserved_bytes >= s0.reserved_bytes);
    CHECK(s1.peak_allocated_bytes >= s1.allocated_bytes);
    CHECK(memory_stats(cuda_device()).current_bytes == m0.current_bytes + 4000);
  }
  const cuda::BlockPoolStats s2 = cuda::allocator_stats(0);
  CHECK(s2.allocated_bytes == s0.allocated_bytes);
  CHECK(memory_stats(cuda_device()).current_bytes == m0.current_bytes);
  {
    Tensor again = empty({1000}, {.device = cuda_device()});
    CHECK(again.data_ptr() == first);  // cached, same stream
    CHECK(cuda::allocator_stats(0).num_segment_allocs == s2.num_segment_allocs);
  }
  cuda::empty_cache();
  const cuda::BlockPoolStats s3 = cuda::allocator_stats(0);
  CHECK(s3.reserved_bytes == 0);
  CHECK(s3.allocated_bytes == 0);
  CHECK(s3.num_segment_frees >= 1);
}

TEST_CASE("blocks are reused per stream, and record_stream delays reuse until the stream is done") {
  TS_REQUIRE_GPU();
  cuda::Stream side(0);
  void* on_side = nullptr;
  {
    cuda::StreamGuard guard(side);
    Tensor t = zeros({5000}, {.device = cuda_device()});
    on_side = t.data_ptr();
  }
  {
    Tensor u = empty({5000}, {.device = cuda_device()});  // default stream: not the side block
    CHECK(u.data_ptr() != on_side);
  }
  {
    cuda::StreamGuard guard(side);
    Tensor v = empty({5000}, {.device = cuda_device()});
    CHECK(v.data_ptr() == on_side);
  }
  void* recorded = nullptr;
  {
    Tensor w = zeros({3000}, {.device = cuda_device()});
    recorded = w.data_ptr();
    cuda::record_stream(w, side.get());
  }
  side.synchronize();
  {
    Tensor x = empty({3000}, {.device = cuda_device()});  // the event has completed: reused
    CHECK(x.data_ptr() == recorded);
    CHECK(cuda::allocator_stats(0).num_pending_events == 0);
  }
}

TEST_CASE("asking for 1 PiB is a clear out-of-memory error and the device stays usable") {
  TS_REQUIRE_GPU();
  try {
    Tensor huge = empty({int64_t(1) << 48}, {.device = cuda_device()});
    FAIL("expected an out-of-memory error");
  } catch (const ValueError& e) {
    const std::string msg = e.what();
    CHECK_THAT(msg,
               Catch::StartsWith(
                   "[cuda alloc] out of memory on cuda:0: tried to allocate 1073741824.00 MiB; "));
    CHECK_THAT(msg, Catch::Contains(" MiB allocated, ") &&
                        Catch::Contains(" MiB reserved by Tessera, ") &&
                        Catch::Contains(" MiB free of "));
  }
  CHECK(cuda::allocator_stats(0).num_ooms >= 1);
  Tensor ok = full({17}, 1.5, {.device = cuda_device()});
  CHECK(ok.to(kCPU).select(0, 16).item() == 1.5);
}
