// cuBLASLt is loaded on the first call that needs it, not at start-up, and every entry point the
// GEMMs call resolves from the loaded library. Loading needs the library, not a GPU.
#include <dlfcn.h>

#include <catch2/catch.hpp>

#include <string>

#include "kernels/cuda/cublaslt_api.h"

using namespace tessera::kernels::cuda;

TEST_CASE("cuBLASLt is loaded on first use, with every entry point") {
  REQUIRE(std::string(cublaslt_soname()) == "libcublasLt.so." + std::to_string(CUBLAS_VER_MAJOR));

  // Nothing has asked for a GPU GEMM yet: the process has not loaded the library (RTLD_NOLOAD
  // only looks).
  REQUIRE(dlopen(cublaslt_soname(), RTLD_NOW | RTLD_NOLOAD) == nullptr);

  const CublasLtApi& api = cublaslt();
  void* loaded = dlopen(cublaslt_soname(), RTLD_NOW | RTLD_NOLOAD);
  REQUIRE(loaded != nullptr);
  dlclose(loaded);  // drops the reference NOLOAD took; cublaslt()'s own stays
  REQUIRE(&cublaslt() == &api);

  // The library is the major version the headers describe.
  REQUIRE(api.GetVersion() / 10000 == size_t(CUBLAS_VER_MAJOR));

  // Every pointer resolved, and the ones that need no GPU answer as the library does.
  for (const void* fn : {(const void*)api.GetStatusName, (const void*)api.GetStatusString, (const void*)api.Create,
                         (const void*)api.Destroy, (const void*)api.MatmulDescCreate,
                         (const void*)api.MatmulDescDestroy, (const void*)api.MatmulDescSetAttribute,
                         (const void*)api.MatrixLayoutCreate, (const void*)api.MatrixLayoutDestroy,
                         (const void*)api.MatrixLayoutSetAttribute, (const void*)api.MatmulPreferenceCreate,
                         (const void*)api.MatmulPreferenceDestroy, (const void*)api.MatmulPreferenceSetAttribute,
                         (const void*)api.MatmulAlgoGetHeuristic, (const void*)api.Matmul}) {
    REQUIRE(fn != nullptr);
  }
  REQUIRE(std::string(api.GetStatusName(CUBLAS_STATUS_NOT_SUPPORTED)) == "CUBLAS_STATUS_NOT_SUPPORTED");

  // Descriptors are host objects: a layout is made and destroyed without a device.
  cublasLtMatrixLayout_t layout = nullptr;
  REQUIRE(api.MatrixLayoutCreate(&layout, CUDA_R_32F, 4, 3, 4) == CUBLAS_STATUS_SUCCESS);
  REQUIRE(layout != nullptr);
  REQUIRE(api.MatrixLayoutDestroy(layout) == CUBLAS_STATUS_SUCCESS);
}
