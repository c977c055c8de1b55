// Copies and fills on cuda tensors against the CPU copy: round trips of every dtype, casts on the
// device, non-contiguous sources and destinations, broadcasts, odd and empty sizes.
#include "core/copy.h"

#include <catch2/catch.hpp>
#include <cstring>
#include <random>
#include <vector>

#include "core/factory.h"
#include "tests/testing/cuda.h"

using namespace tessera;

namespace {

const DType kAll[] = {DType::f32, DType::f16, DType::bf16, DType::i32, DType::i64, DType::b8};

// Random values with fractional parts (rounding ties included) that every dtype can hold, as
// `dtype`.
Tensor random_host(const Shape& shape, DType dtype, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-300.0f, 300.0f);
  std::vector<float> v(size_t(shape_numel(shape)));
  for (size_t i = 0; i < v.size(); ++i) {
    v[i] = (i % 7 == 3)    ? 0.0f
           : (i % 11 == 5) ? 1.0f + 1.0f / 256.0f
                           : u(rng);  // zeros, a bf16 tie
  }
  return from_vector(v, shape).to(dtype);
}

// Same shape, dtype and bytes (both are contiguous on the CPU after contiguous()).
void require_identical(const Tensor& got, const Tensor& want) {
  REQUIRE(got.device().is_cpu());
  REQUIRE(got.shape() == want.shape());
  REQUIRE(got.dtype() == want.dtype());
  const Tensor g = got.contiguous(), w = want.contiguous();
  const size_t bytes = size_t(g.numel()) * g.itemsize();
  const bool same = bytes == 0 || std::memcmp(g.data_ptr(), w.data_ptr(), bytes) == 0;
  if (!same) {
    const Tensor gf = g.to(DType::f32), wf = w.to(DType::f32);
    for (int64_t i = 0; i < g.numel(); ++i) {
      if (std::memcmp(static_cast<const char*>(g.data_ptr()) + i * g.itemsize(),
                      static_cast<const char*>(w.data_ptr()) + i * w.itemsize(),
                      g.itemsize()) != 0) {
        FAIL("first difference at flat index " << i << ": got " << gf.data<float>()[i] << ", want "
                                               << wf.data<float>()[i] << " ("
                                               << dtype_name(g.dtype()) << ")");
      }
    }
  }
}

}  // namespace

TEST_CASE("every dtype makes the round trip host -> device -> host unchanged") {
  TS_REQUIRE_GPU();
  for (DType dt : kAll) {
    for (const Shape& shape : {Shape{1}, Shape{7, 13}, Shape{3, 1, 257}, Shape{}}) {
      INFO(dtype_name(dt) << " " << shape_str(shape));
      const Tensor host = random_host(shape, dt, 7);
      const Tensor dev = host.to(cuda_device());
      REQUIRE(dev.device() == cuda_device());
      require_identical(dev.to(kCPU), host);
      require_identical(dev.clone().to(kCPU), host);  // device-to-device
    }
  }
}

TEST_CASE("casts on the device round exactly like the CPU copy") {
  TS_REQUIRE_GPU();
  for (DType from : kAll) {
    const Tensor host = random_host({5, 131}, from, 11);
    const Tensor dev = host.to(cuda_device());
    for (DType to : kAll) {
      INFO(dtype_name(from) << " -> " << dtype_name(to));
      require_identical(dev.to(to).to(kCPU), host.to(to));  // device kernel
      require_identical(host.to(to).to(cuda_device()).to(kCPU), host.to(to));
      const Tensor d = empty({5, 131}, {.dtype = to, .device = cuda_device()});
      d.copy_(host);  // host -> device with a cast: uploaded, then cast on the device
      require_identical(d.to(kCPU), host.to(to));
      const Tensor h = empty({5, 131}, {.dtype = to});
      h.copy_(dev);  // device -> host with a cast
      require_identical(h, host.to(to));
    }
  }
}

TEST_CASE("non-contiguous sources and destinations on either side") {
  TS_REQUIRE_GPU();
  for (DType dt : {DType::f32, DType::bf16, DType::i64, DType::b8}) {
    INFO(dtype_name(dt));
    const Tensor host = random_host({5, 6, 7}, dt, 3);
    const Tensor host_view = host.permute({2, 0, 1}).slice(1, 1, 5, 2);  // (7, 2, 6)
    const Tensor dev = host.to(cuda_device());
    const Tensor dev_view = dev.permute({2, 0, 1}).slice(1, 1, 5, 2);
    REQUIRE(!dev_view.is_contiguous());
    require_identical(dev_view.to(kCPU), host_view.contiguous());  // strided device -> host
    require_identical(dev_view.contiguous().to(kCPU), host_view.contiguous());
    require_identical(host_view.to(cuda_device()).to(kCPU),
                      host_view.contiguous());  // strided host
    // Into a strided device destination, with a cast, leaving the other elements alone.
    const Tensor target = zeros({6, 7, 2}, {.dtype = DType::f32, .device = cuda_device()});
    const Tensor target_view = target.permute({1, 2, 0});  // (7, 2, 6)
    target_view.copy_(host_view);
    const Tensor expect = zeros({6, 7, 2});
    expect.permute({1, 2, 0}).copy_(host_view);
    require_identical(target.to(kCPU), expect);
    // Into a strided host destination from a strided device source.
    const Tensor back = zeros({6, 7, 2}, {.dtype = DType::f16});
    back.permute({1, 2, 0}).copy_(dev_view);
    const Tensor back_expect = zeros({6, 7, 2}, {.dtype = DType::f16});
    back_expect.permute({1, 2, 0}).copy_(host_view);
    require_identical(back, back_expect);
    // Device to device between two strided views.
    const Tensor d2 = zeros({2, 6, 7}, {.dtype = dt, .device = cuda_device()});
    d2.permute({2, 0, 1}).copy_(dev_view);
    const Tensor h2 = zeros({2, 6, 7}, {.dtype = dt});
    h2.permute({2, 0, 1}).copy_(host_view);
    require_identical(d2.to(kCPU), h2);
  }
}

TEST_CASE("broadcast sources, fills, odd and empty sizes") {
  TS_REQUIRE_GPU();
  const Tensor row = random_host({1, 9}, DType::f32, 5);
  const Tensor d = empty({4, 9}, {.dtype = DType::bf16, .device = cuda_device()});
  d.copy_(row);  // expanded host source
  require_identical(d.to(kCPU), row.expand({4, 9}).to(DType::bf16));
  const Tensor drow = row.to(cuda_device());
  const Tensor d2 = empty({4, 9}, {.device = cuda_device()});
  d2.copy_(drow);  // expanded device source
  require_identical(d2.to(kCPU), row.expand({4, 9}).contiguous());

  for (DType dt : kAll) {
    INFO(dtype_name(dt));
    const Tensor f = empty({1001}, {.dtype = dt, .device = cuda_device()});
    f.fill_(-2.75);
    require_identical(f.to(kCPU), full({1001}, -2.75, {.dtype = dt}));
    // A strided fill touches only its elements.
    const Tensor g = zeros({33, 17}, {.dtype = dt, .device = cuda_device()});
    g.slice(0, 1, 33, 3).slice(1, 2, 17, 2).fill_(1.0);
    const Tensor g_host = zeros({33, 17}, {.dtype = dt});
    g_host.slice(0, 1, 33, 3).slice(1, 2, 17, 2).fill_(1.0);
    require_identical(g.to(kCPU), g_host);
  }

  const Tensor none = empty({0, 5}, {.device = cuda_device()});
  none.fill_(3.0);
  CHECK(none.to(kCPU).numel() == 0);
  CHECK(none.to(DType::f16).numel() == 0);
  CHECK(zeros({0, 5}).to(cuda_device()).numel() == 0);

  // Enough elements for the grid-stride loop to wrap (65536 blocks of 256 threads cover 2^24).
  const int64_t n = (int64_t(1) << 24) + 12345;
  const Tensor big = random_host({n}, DType::f32, 9);
  require_identical(big.to(cuda_device()).to(DType::bf16).to(kCPU), big.to(DType::bf16));
}

TEST_CASE("copies between two devices") {
  TS_REQUIRE_GPU();
  if (cuda::device_count() < 2) {
    WARN("skipped: needs two CUDA devices");
    return;
  }
  const Tensor host = random_host({6, 10}, DType::f32, 21);
  const Tensor a = host.to(cuda_device(0));
  const Tensor b = a.to(cuda_device(1));
  CHECK(b.device() == cuda_device(1));
  require_identical(b.to(kCPU), host);
  const Tensor c = empty({10, 6}, {.dtype = DType::f16, .device = cuda_device(1)});
  c.copy_(a.transpose(0, 1));
  require_identical(c.to(kCPU), host.transpose(0, 1).to(DType::f16));
}
