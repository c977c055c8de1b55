// cuBLASLt, loaded when the first GPU GEMM asks for it rather than when the process starts.
//
// Why: libcublasLt's load-time initialisation costs about 0.35 s of CPU in every process that
// links it, GPU or not. A CPU run of 16 ranks on one host paid about 3 s of start-up for a library
// it never calls, and every test binary paid it too. Loading it with dlopen on first use moves the
// cost to the processes that run a GPU GEMM, and lets a CPU-only machine run without the library.
#pragma once

#include <cublasLt.h>

namespace tessera::kernels::cuda {

// The cuBLASLt entry points this backend calls, resolved from the loaded library.
struct CublasLtApi {
  decltype(&::cublasLtGetVersion) GetVersion;
  decltype(&::cublasLtGetStatusName) GetStatusName;
  decltype(&::cublasLtGetStatusString) GetStatusString;
  decltype(&::cublasLtCreate) Create;
  decltype(&::cublasLtDestroy) Destroy;
  decltype(&::cublasLtMatmulDescCreate) MatmulDescCreate;
  decltype(&::cublasLtMatmulDescDestroy) MatmulDescDestroy;
  decltype(&::cublasLtMatmulDescSetAttribute) MatmulDescSetAttribute;
  decltype(&::cublasLtMatrixLayoutCreate) MatrixLayoutCreate;
  decltype(&::cublasLtMatrixLayoutDestroy) MatrixLayoutDestroy;
  decltype(&::cublasLtMatrixLayoutSetAttribute) MatrixLayoutSetAttribute;
  decltype(&::cublasLtMatmulPreferenceCreate) MatmulPreferenceCreate;
  decltype(&::cublasLtMatmulPreferenceDestroy) MatmulPreferenceDestroy;
  decltype(&::cublasLtMatmulPreferenceSetAttribute) MatmulPreferenceSetAttribute;
  decltype(&::cublasLtMatmulAlgoGetHeuristic) MatmulAlgoGetHeuristic;
  decltype(&::cublasLtMatmul) Matmul;
};

// The library of the cuBLAS major version we were compiled against (libcublasLt.so.<major>),
// loaded once on the first call: from the library search path (the binary's run path, then
// LD_LIBRARY_PATH and the system's), then from $CUDA_HOME/lib64 and /usr/local/cuda/lib64.
// Throws tessera::InternalError naming every place tried when it cannot be loaded, or the entry
// point it lacks; a later call tries again.
const CublasLtApi& cublaslt();

// The file name looked for: "libcublasLt.so." followed by CUBLAS_VER_MAJOR.
const char* cublaslt_soname();

}  // namespace tessera::kernels::cuda
