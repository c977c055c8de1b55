#include "parallel/comm/config_check.h"

#include <cstdio>
#include <vector>

#include "core/error.h"
#include "core/factory.h"

namespace tessera::parallel {
namespace {
std::string hex(uint64_t v) {
  char buf[19];
  std::snprintf(buf, sizeof(buf), "0x%016llx", static_cast<unsigned long long>(v));
  return buf;
}
}  // namespace

uint64_t config_hash(const std::string& text) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : text) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return h;
}

void check_same_config(Communicator& comm, const std::string& config_text) {
  const int p = comm.size();
  // On the communicator's device (NCCL moves only GPU tensors); the hashes are read on the host.
  const Device device = comm.device();
  Tensor mine = from_vector<int64_t>({int64_t(config_hash(config_text))}, {1}, kCPU).to(device);
  Tensor all = empty({int64_t(p)}, {.dtype = DType::i64, .device = device});
  comm.all_gather(mine, all)->wait();
  const Tensor host = all.to(kCPU);
  const int64_t* h = host.data<int64_t>();
  std::vector<int> differ;
  for (int r = 1; r < p; ++r) {
    if (h[r] != h[0]) differ.push_back(r);
  }
  if (differ.empty()) return;
  std::string ranks;
  for (size_t i = 0; i < differ.size(); ++i) {
    ranks += (i ? ", " : "") + std::to_string(differ[i]) + " (" + hex(uint64_t(h[differ[i]])) + ")";
  }
  TS_FAIL("check_same_config", "expected every rank of group ", comm.name(),
          " to hold the same configuration, got a different one on rank", differ.size() > 1 ? "s " : " ",
          ranks, " than on rank 0 (", hex(uint64_t(h[0])), ")");
}

}  // namespace tessera::parallel
