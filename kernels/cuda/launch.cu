// Host side of the launch helpers: multiprocessor counts and device checks.
#include <mutex>
#include <unordered_map>

#include "kernels/cuda/launch.cuh"

namespace tessera::kernels::cuda {

int sm_count(int device) {
  static std::mutex mu;
  static std::unordered_map<int, int> counts;
  std::lock_guard<std::mutex> lock(mu);
  auto it = counts.find(device);
  if (it != counts.end()) return it->second;
  int n = 0;
  TS_CUDA_CHECK(cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, device));
  counts[device] = std::max(n, 1);
  return counts[device];
}

void check_cuda_tensors(const char* op, std::initializer_list<const Tensor*> tensors) {
  const Tensor* first = nullptr;
  for (const Tensor* t : tensors) {
    if (!t->defined()) continue;
    if (first == nullptr) first = t;
    TS_CHECK(t->device().is_cuda() && t->device() == first->device(), op,
             "expected tensors on one CUDA device, got ", first->describe(), " and ", t->describe());
  }
}

}  // namespace tessera::kernels::cuda
