// Check macros for the CUDA runtime and NCCL calls of the NCCL backend: a failure throws an
// InternalError naming the call, the library's message, file and line.
#pragma once

#include <cuda_runtime.h>
#include <nccl.h>

#include "core/error.h"

#define TS_COMM_CUDA_CHECK(call)                                                               \
  do {                                                                                         \
    cudaError_t ts_cuda_rc_ = (call);                                                          \
    if (ts_cuda_rc_ != cudaSuccess) [[unlikely]]                                               \
      throw ::tessera::InternalError(                                                          \
          "cuda", ::tessera::str_cat(#call, " failed: ", cudaGetErrorString(ts_cuda_rc_), " (", \
                                     __FILE__, ":", __LINE__, ")"));                           \
  } while (0)

#define TS_NCCL_CHECK(call)                                                                    \
  do {                                                                                         \
    ncclResult_t ts_nccl_rc_ = (call);                                                         \
    if (ts_nccl_rc_ != ncclSuccess) [[unlikely]]                                               \
      throw ::tessera::InternalError(                                                          \
          "nccl", ::tessera::str_cat(#call, " failed: ", ncclGetErrorString(ts_nccl_rc_), " (", \
                                     __FILE__, ":", __LINE__, ")"));                           \
  } while (0)
