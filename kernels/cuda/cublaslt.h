// cuBLASLt plumbing: a status check macro, and the cached handle (per device) and workspace (per
// device and stream) every GEMM of this backend runs with.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <cstddef>

namespace tessera::kernels::cuda {

// Throws tessera::InternalError naming the failed call and cuBLAS's status.
void cublas_check(cublasStatus_t status, const char* expr, const char* file, int line);

#define TS_CUBLAS_CHECK(expr) ::tessera::kernels::cuda::cublas_check((expr), #expr, __FILE__, __LINE__)

struct LtContext {
  cublasLtHandle_t handle = nullptr;
  void* workspace = nullptr;
  size_t workspace_bytes = 0;
};

// The handle of `device` and a workspace for work queued on `stream`; created on first use (with
// the device current) and kept for the life of the process. A workspace per stream keeps GEMMs
// that run concurrently on different streams from sharing scratch memory.
LtContext lt_context(int device, cudaStream_t stream);

}  // namespace tessera::kernels::cuda
