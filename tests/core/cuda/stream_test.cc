// Streams, events and pinned memory on a GPU: event ordering between streams, timing, guards,
// pinned tensors and asynchronous copies through them.
#include "core/cuda/stream.h"

#include <catch2/catch.hpp>
#include <vector>

#include "core/allocator.h"
#include "core/cuda/caching_allocator.h"
#include "core/cuda/copy.h"
#include "core/cuda/pinned.h"
#include "core/factory.h"
#include "tests/testing/cuda.h"

using namespace tessera;

TEST_CASE("an event orders work of one stream after another's") {
  TS_REQUIRE_GPU();
  cuda::Stream producer(0), consumer(0);
  const int64_t n = int64_t(1) << 26;  // 256 MiB of f32: the fills take long enough to race
  Tensor x;
  {
    cuda::StreamGuard guard(producer);
    x = zeros({n}, {.device = cuda_device()});
    for (int i = 0; i < 8; ++i) x.fill_(double(i));
    x.fill_(7.0);
  }
  cuda::Event done;
  done.record(producer);
  done.wait(consumer);
  Tensor y;
  {
    cuda::StreamGuard guard(consumer);
    cuda::record_stream(x, consumer.get());
    y = x.clone();  // a device-to-device copy queued on the consumer
  }
  consumer.synchronize();
  CHECK(consumer.query());
  CHECK(done.query());
  const Tensor h = y.to(kCPU);
  const float* p = h.data<float>();
  int64_t wrong = 0;
  for (int64_t i = 0; i < n; i += 4099) wrong += p[i] != 7.0f;
  CHECK(p[n - 1] == 7.0f);
  CHECK(wrong == 0);
}

TEST_CASE("timing events measure elapsed time; guards restore the stream") {
  TS_REQUIRE_GPU();
  cuda::Stream s(0);
  const cudaStream_t before = cuda::current_stream(0);
  cuda::Event start(true), end(true);
  start.record(s);
  {
    cuda::StreamGuard guard(s);
    CHECK(cuda::current_stream(0) == s.get());
    Tensor t = zeros({1 << 22}, {.device = cuda_device()});
    t.fill_(2.0);
  }
  end.record(s);
  CHECK(cuda::current_stream(0) == before);
  end.synchronize();
  CHECK(end.query());
  const float ms = start.elapsed_ms(end);
  CHECK(ms >= 0.0f);
  CHECK(ms < 10000.0f);
  cuda::Event untimed;
  untimed.record(s);
  CHECK_THROWS_AS(untimed.elapsed_ms(end), ValueError);
  cuda::Event never;
  CHECK(never.query());
  CHECK_THROWS_AS(never.wait(s), ValueError);
}

TEST_CASE("pinned tensors are CPU tensors, counted, and recognised with their views") {
  TS_REQUIRE_GPU();
  const int64_t before = memory_stats(kCPU).current_bytes;
  {
    Tensor p = cuda::pinned_empty({1000});
    CHECK(p.device() == kCPU);
    CHECK(cuda::is_pinned(p));
    CHECK(cuda::is_pinned(p.slice(0, 10, 20)));
    CHECK(memory_stats(kCPU).current_bytes == before + 4000);
    CHECK(!cuda::is_pinned(zeros({1000})));
    p.fill_(3.0);
    CHECK(p.select(0, 999).item() == 3.0);
    const Tensor q = cuda::pin_memory(full({2, 3}, 1.25, {.dtype = DType::bf16}).transpose(0, 1));
    CHECK(cuda::is_pinned(q));
    CHECK(q.is_contiguous());
    CHECK(q.shape() == Shape{3, 2});
    CHECK(q.select(0, 2).select(0, 1).item() == 1.25);
  }
  CHECK(memory_stats(kCPU).current_bytes == before);
}

TEST_CASE("asynchronous copies through pinned memory on a side stream") {
  TS_REQUIRE_GPU();
  const int64_t n = 100003;
  Tensor src = cuda::pinned_empty({n});
  float* sp = src.data<float>();
  for (int64_t i = 0; i < n; ++i) sp[i] = float(i % 1000) * 0.5f;
  Tensor back = cuda::pinned_empty({n});
  Tensor dev = empty({n}, {.device = cuda_device()});
  cuda::Stream s(0);
  cuda::copy_async(src, dev, s.get());
  Tensor dev2 = empty({n}, {.device = cuda_device()});
  cuda::copy_async(dev, dev2, s.get());
  cuda::copy_async(dev2, back, s.get());
  s.synchronize();
  const float* bp = back.data<float>();
  int64_t wrong = 0;
  for (int64_t i = 0; i < n; ++i) wrong += bp[i] != sp[i];
  CHECK(wrong == 0);
  // Pageable host memory, mismatched dtypes or strided views are refused.
  CHECK_THROWS_WITH(cuda::copy_async(zeros({n}), dev, s.get()), Catch::Contains("pinned"));
  CHECK_THROWS_AS(
      cuda::copy_async(src, empty({n}, {.dtype = DType::f16, .device = cuda_device()}), s.get()),
      ValueError);
  CHECK_THROWS_AS(cuda::copy_async(src.slice(0, 0, n, 2), dev.slice(0, 0, n, 2), s.get()),
                  ValueError);
}
