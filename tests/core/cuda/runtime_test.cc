// The CUDA runtime: discovery never throws, and with a GPU a kernel built by nvcc runs.
#include <catch2/catch.hpp>
#include <vector>

#include "core/cuda/probe.h"
#include "core/cuda/runtime.h"
#include "tests/testing/cuda.h"

using namespace tessera;

TEST_CASE("discovery is consistent and never throws") {
  const bool available = cuda::is_available();
  CHECK(available == (cuda::device_count() > 0));
  CHECK(available == cuda::unavailable_reason().empty());
}

TEST_CASE("an nvcc-built kernel runs on the device") {
  TS_REQUIRE_GPU();
  const int n = 1000;
  std::vector<float> x(n), y(n);
  for (int i = 0; i < n; ++i) x[i] = float(i), y[i] = 1.0f;
  float *dx = nullptr, *dy = nullptr;
  TS_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&dx), n * sizeof(float)));
  TS_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&dy), n * sizeof(float)));
  TS_CUDA_CHECK(cudaMemcpy(dx, x.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  TS_CUDA_CHECK(cudaMemcpy(dy, y.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  cuda::probe_axpy(n, 2.0f, dx, dy, cuda::current_stream(0));
  TS_CUDA_CHECK(cudaMemcpy(y.data(), dy, n * sizeof(float), cudaMemcpyDeviceToHost));
  cudaFree(dx);
  cudaFree(dy);
  for (int i = 0; i < n; ++i) REQUIRE(y[i] == 2.0f * i + 1.0f);
}

TEST_CASE("an impossible device index is a clear error") {
  CHECK_THROWS_WITH(cuda::set_device(cuda::device_count() + 3),
                    Catch::Contains("expected a device index"));
}
