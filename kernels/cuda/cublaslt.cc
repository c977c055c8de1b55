// The cached cuBLASLt handles and workspaces (cublaslt.h). Both live until process exit; their
// owners release them without throwing.
#include "kernels/cuda/cublaslt.h"

#include <map>
#include <memory>
#include <mutex>
#include <utility>

#include "core/cuda/device_guard.h"
#include "core/cuda/runtime.h"
#include "core/error.h"
#include "kernels/cuda/cublaslt_api.h"

namespace tessera::kernels::cuda {
namespace {

// 32 MiB: what cuBLASLt's heuristics want for the largest Hopper GEMM tiles.
constexpr size_t kWorkspaceBytes = size_t(32) << 20;

struct Handle {
  cublasLtHandle_t h = nullptr;
  ~Handle() {
    if (h != nullptr) (void)cublaslt().Destroy(h);  // destructors never throw
  }
};

struct Workspace {
  void* ptr = nullptr;
  ~Workspace() {
    if (ptr != nullptr) (void)cudaFree(ptr);
  }
};

struct Cache {
  std::mutex mu;
  std::map<int, std::unique_ptr<Handle>> handles;
  std::map<std::pair<int, cudaStream_t>, std::unique_ptr<Workspace>> workspaces;
};

Cache& cache() {
  static Cache c;
  return c;
}

}  // namespace

void cublas_check(cublasStatus_t status, const char* expr, const char* file, int line) {
  if (status == CUBLAS_STATUS_SUCCESS) [[likely]]
    return;
  throw InternalError("cublas", str_cat(expr, " failed: ", cublaslt().GetStatusName(status), " (",
                                        cublaslt().GetStatusString(status), ") at ", file, ":", line));
}

LtContext lt_context(int device, cudaStream_t stream) {
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mu);
  auto& handle = c.handles[device];
  auto& workspace = c.workspaces[{device, stream}];
  if (handle == nullptr || workspace == nullptr) {
    ::tessera::cuda::DeviceGuard guard(device);
    if (handle == nullptr) {
      auto made = std::make_unique<Handle>();
      TS_CUBLAS_CHECK(cublaslt().Create(&made->h));
      handle = std::move(made);
    }
    if (workspace == nullptr) {
      auto made = std::make_unique<Workspace>();
      TS_CUDA_CHECK(cudaMalloc(&made->ptr, kWorkspaceBytes));
      workspace = std::move(made);
    }
  }
  return {handle->h, workspace->ptr, kWorkspaceBytes};
}

}  // namespace tessera::kernels::cuda
