// HostMover: ZeRO-Offload's device-host moves. On the CPU they are plain copies into memory domain
// 1; on a GPU (skipped without one) they run on the mover's copy stream, ordered with the compute
// stream, from and into pinned memory.
#include "parallel/zero/host_mover.h"

#include <catch2/catch.hpp>
#include <thread>
#include <vector>

#include "core/allocator.h"
#include "core/cuda/pinned.h"
#include "core/cuda/stream.h"
#include "core/factory.h"
#include "tests/testing/cuda.h"

using namespace tessera;
using tessera::parallel::zero::HostMover;
using tessera::parallel::zero::MoveReady;

namespace {

// How many of every `step`-th element of a CPU f32 tensor differ from `want`.
int64_t count_wrong(const Tensor& cpu, float want, int64_t step = 4099) {
  const float* p = cpu.data<float>();
  int64_t wrong = 0;
  for (int64_t i = 0; i < cpu.numel(); i += step) wrong += p[i] != want;
  return wrong + (p[cpu.numel() - 1] != want);
}

}  // namespace

TEST_CASE("on the CPU a move is a plain copy into the host memory domain") {
  HostMover mover(kCPU);
  CHECK(mover.host() == (Device{DeviceType::cpu, 1}));
  const int64_t before = memory_stats(mover.host()).current_bytes;
  Tensor home = mover.host_zeros(1000, DType::f32);
  CHECK(home.device() == mover.host());
  CHECK(memory_stats(mover.host()).current_bytes == before + 4000);
  CHECK(count_wrong(home, 0.0f, 1) == 0);

  const Tensor x = arange(0, 1000, 1, {.dtype = DType::f32});
  MoveReady ready = mover.copy(x, home);
  CHECK(ready.done());
  ready.wait();
  Tensor back = empty({1000});
  mover.copy(home, back).wait();
  const float* p = back.data<float>();
  int64_t wrong = 0;
  for (int64_t i = 0; i < 1000; ++i) wrong += p[i] != float(i);
  CHECK(wrong == 0);
  CHECK(mover.stats().sync_copies == 2);
  CHECK(mover.stats().async_copies == 0);

  const Tensor copied = mover.host_copy(x.view({10, 100}));
  CHECK(copied.device() == mover.host());
  CHECK(copied.shape() == (Shape{10, 100}));
  CHECK(copied.data<float>()[999] == 999.0f);
  mover.synchronize();  // nothing in flight: returns at once
}

TEST_CASE("on a GPU a move to the device is ordered before the compute stream's next kernels") {
  TS_REQUIRE_GPU();
  HostMover mover(cuda_device());
  const int64_t n = int64_t(1) << 24;  // 64 MiB of f32: long enough for a race to show
  Tensor home = mover.host_empty(n, DType::f32);
  CHECK(cuda::is_pinned(home));
  home.fill_(3.0);
  Tensor dev = empty({n}, {.device = cuda_device()});
  mover.copy(home, dev);
  const Tensor later = dev.clone();  // queued on the compute stream right after the move
  CHECK(count_wrong(later.to(kCPU), 3.0f) == 0);
  CHECK(mover.stats().async_copies == 1);
  CHECK(mover.stats().async_bytes == n * 4);
}

TEST_CASE("on a GPU a move to the host follows the compute stream's work and is waited for") {
  TS_REQUIRE_GPU();
  HostMover mover(cuda_device());
  const int64_t n = int64_t(1) << 24;
  Tensor home = mover.host_zeros(n, DType::f32);
  MoveReady ready;
  {
    Tensor dev = zeros({n}, {.device = cuda_device()});
    for (int i = 0; i < 8; ++i) dev.fill_(double(i));  // queued, not yet run
    ready = mover.copy(dev, home);
  }  // dev is freed here: the copy stream's use keeps its block until the copy is done
  Tensor other = empty({n}, {.device = cuda_device()});
  other.fill_(-1.0);  // would overwrite the block if it were reused early
  // The worker thread of the overlapped step waits like this, off the thread that trains.
  int64_t wrong = -1;
  std::thread reader([&] {
    ready.wait();
    wrong = count_wrong(home, 7.0f);
  });
  reader.join();
  CHECK(ready.done());
  CHECK(wrong == 0);
}

TEST_CASE("on a GPU the moves follow a compute stream a StreamGuard made current") {
  TS_REQUIRE_GPU();
  HostMover mover(cuda_device());
  cuda::Stream side(cuda_device().index);
  const int64_t n = int64_t(1) << 22;
  Tensor home = mover.host_empty(n, DType::f32);
  {
    cuda::StreamGuard guard(side);
    Tensor dev = empty({n}, {.device = cuda_device()});
    dev.fill_(5.0);
    mover.copy(dev, home).wait();
  }
  CHECK(count_wrong(home, 5.0f) == 0);
}

TEST_CASE("on a GPU a host side that is not pinned is copied synchronously") {
  TS_REQUIRE_GPU();
  HostMover mover(cuda_device());
  const Tensor pageable = full({1000}, 2.0);
  Tensor dev = empty({1000}, {.device = cuda_device()});
  CHECK(mover.copy(pageable, dev).done());
  CHECK(mover.stats().sync_copies == 1);
  CHECK(mover.stats().async_copies == 0);
  CHECK(count_wrong(dev.to(kCPU), 2.0f, 1) == 0);
  mover.synchronize();
}

TEST_CASE("kept host buffers are new zeros each time on the CPU") {
  HostMover mover(kCPU);
  Tensor first = mover.kept_host_zeros(0, 100, DType::f32, /*rezero=*/false);
  CHECK(first.device() == mover.host());
  first.fill_(4.0);
  const Tensor second = mover.kept_host_zeros(0, 100, DType::f32, /*rezero=*/false);
  CHECK(second.data_ptr() != first.data_ptr());
  CHECK(count_wrong(second, 0.0f, 1) == 0);
}

TEST_CASE("on a GPU kept host buffers are pinned once and handed out again") {
  TS_REQUIRE_GPU();
  HostMover mover(cuda_device());
  Tensor grads = mover.kept_host_zeros(1, 1000, DType::f32, /*rezero=*/false);
  CHECK(cuda::is_pinned(grads));
  CHECK(count_wrong(grads, 0.0f, 1) == 0);
  grads.fill_(6.0);
  const Tensor kept = mover.kept_host_zeros(1, 1000, DType::f32, /*rezero=*/false);
  CHECK(kept.data_ptr() == grads.data_ptr());
  CHECK(count_wrong(kept, 6.0f, 1) == 0);  // what the last step wrote
  const Tensor zeroed = mover.kept_host_zeros(1, 1000, DType::f32, /*rezero=*/true);
  CHECK(zeroed.data_ptr() == grads.data_ptr());
  CHECK(count_wrong(zeroed, 0.0f, 1) == 0);
  // Another key, another buffer; a new size, a new one.
  CHECK(mover.kept_host_zeros(0, 1000, DType::f32, false).data_ptr() != grads.data_ptr());
  CHECK(mover.kept_host_zeros(1, 500, DType::f32, false).numel() == 500);
}
