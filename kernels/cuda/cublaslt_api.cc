// Loading cuBLASLt on first use (cublaslt_api.h).
#include "kernels/cuda/cublaslt_api.h"

#include <dlfcn.h>

#include <atomic>
#include <cstdlib>
#include <mutex>
#include <string>
#include <vector>

#include "core/error.h"

namespace tessera::kernels::cuda {
namespace {

#define TS_CUBLASLT_STR_INNER(x) #x
#define TS_CUBLASLT_STR(x) TS_CUBLASLT_STR_INNER(x)
constexpr const char* kSoname = "libcublasLt.so." TS_CUBLASLT_STR(CUBLAS_VER_MAJOR);
#undef TS_CUBLASLT_STR
#undef TS_CUBLASLT_STR_INNER

// The first place the library loads from; the library stays loaded for the life of the process
// (handles are destroyed at exit through it).
void* open_library() {
  std::vector<std::string> tried = {kSoname};
  if (const char* home = std::getenv("CUDA_HOME"); home != nullptr && *home != '\0') {
    tried.push_back(std::string(home) + "/lib64/" + kSoname);
  }
  tried.push_back(std::string("/usr/local/cuda/lib64/") + kSoname);
  std::string errors;
  for (const std::string& path : tried) {
    if (void* lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL)) return lib;
    const char* why = dlerror();
    errors += str_cat("\n  ", path, ": ", why != nullptr ? why : "not loadable");
  }
  throw InternalError("cublas", str_cat("expected to load cuBLASLt for GPU matrix products, got:", errors,
                                        "\n(install the CUDA Toolkit's cuBLAS, or set CUDA_HOME or "
                                        "LD_LIBRARY_PATH to where ", kSoname, " is)"));
}

template <typename Fn>
void resolve(void* lib, Fn& fn, const char* name) {
  fn = reinterpret_cast<Fn>(dlsym(lib, name));
  if (fn == nullptr) {
    throw InternalError("cublas", str_cat("expected ", kSoname, " to export ", name, ", got none: ",
                                          "the library is older than the headers Tessera was built with"));
  }
}

CublasLtApi load() {
  void* lib = open_library();
  CublasLtApi api{};
#define TS_RESOLVE(field) resolve(lib, api.field, "cublasLt" #field)
  TS_RESOLVE(GetVersion);
  TS_RESOLVE(GetStatusName);
  TS_RESOLVE(GetStatusString);
  TS_RESOLVE(Create);
  TS_RESOLVE(Destroy);
  TS_RESOLVE(MatmulDescCreate);
  TS_RESOLVE(MatmulDescDestroy);
  TS_RESOLVE(MatmulDescSetAttribute);
  TS_RESOLVE(MatrixLayoutCreate);
  TS_RESOLVE(MatrixLayoutDestroy);
  TS_RESOLVE(MatrixLayoutSetAttribute);
  TS_RESOLVE(MatmulPreferenceCreate);
  TS_RESOLVE(MatmulPreferenceDestroy);
  TS_RESOLVE(MatmulPreferenceSetAttribute);
  TS_RESOLVE(MatmulAlgoGetHeuristic);
  TS_RESOLVE(Matmul);
#undef TS_RESOLVE
  return api;
}

}  // namespace

const CublasLtApi& cublaslt() {
  // Every cuBLASLt call goes through here: after the load, one atomic read.
  static std::atomic<const CublasLtApi*> loaded{nullptr};
  if (const CublasLtApi* api = loaded.load(std::memory_order_acquire)) [[likely]]
    return *api;
  static std::mutex mu;
  static CublasLtApi api;
  std::lock_guard<std::mutex> lock(mu);
  if (loaded.load(std::memory_order_relaxed) == nullptr) {
    api = load();
    loaded.store(&api, std::memory_order_release);
  }
  return api;
}

const char* cublaslt_soname() { return kSoname; }

}  // namespace tessera::kernels::cuda
