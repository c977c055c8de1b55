// ZeRO-Offload's host domain: where it is for each compute device, that its bytes are counted
// apart from the device's and that kernels refuse to mix the two; the optimizer check's message.
#include "parallel/zero/offload.h"

#include <catch2/catch.hpp>
#include <string>

#include "autograd/ops.h"
#include "core/allocator.h"
#include "core/error.h"
#include "core/factory.h"

namespace {

using namespace tessera;
using tessera::parallel::zero::check_offload_optimizer;
using tessera::parallel::zero::offload_host_device;

}  // namespace

TEST_CASE("the offload host is the CPU for a GPU and a CPU domain of its own for the CPU", "[zero]") {
  CHECK(offload_host_device(cuda_device(1)) == kCPU);
  const Device host = offload_host_device(kCPU);
  CHECK(host.is_cpu());
  CHECK(host != kCPU);
}

TEST_CASE("host bytes are counted apart from the device's", "[zero]") {
  const Device host = offload_host_device(kCPU);
  const int64_t device_before = memory_stats(kCPU).current_bytes;
  const int64_t host_before = memory_stats(host).current_bytes;
  {
    Tensor t = zeros({1000}, {.device = host});
    CHECK(memory_stats(host).current_bytes - host_before == 4000);
    CHECK(memory_stats(kCPU).current_bytes == device_before);
    // Back on the device: the copy counts there.
    Tensor back = t.to(kCPU);
    CHECK(memory_stats(kCPU).current_bytes - device_before == 4000);
    // Element-wise kernels refuse operands from both domains.
    CHECK_THROWS(add(t, back));
  }
  CHECK(memory_stats(host).current_bytes == host_before);
  CHECK(memory_stats(kCPU).current_bytes == device_before);
}

TEST_CASE("offload takes adam and adamw, and names the key otherwise", "[zero]") {
  CHECK_NOTHROW(check_offload_optimizer("adam", "optimizer.type"));
  CHECK_NOTHROW(check_offload_optimizer("adamw", "optimizer.type"));
  try {
    check_offload_optimizer("sgd", "optimizer.type");
    FAIL("sgd was accepted");
  } catch (const ValueError& e) {
    CHECK(std::string(e.what()).find("optimizer.type sgd with zero.offload") != std::string::npos);
  }
}
