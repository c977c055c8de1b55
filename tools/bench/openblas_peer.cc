#include "tools/bench/openblas_peer.h"

#include <dlfcn.h>

#include <cstdlib>
#include <optional>

namespace tessera::bench {
namespace {

// CBLAS's enum values (cblas.h is not installed with the runtime library).
constexpr int kCblasRowMajor = 101, kCblasNoTrans = 111, kCblasTrans = 112;

// Sets an environment variable for the scope of a library's initialisation, then restores it.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::string& value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    ::setenv(name, value.c_str(), 1);
  }
  ~ScopedEnv() {
    if (old_) {
      ::setenv(name_, old_->c_str(), 1);
    } else {
      ::unsetenv(name_);
    }
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
  std::optional<std::string> old_;
};

}  // namespace

const char* openblas_coretype(bool avx512) { return avx512 ? "SkylakeX" : "Haswell"; }

std::string openblas_coretype_for_host() {
  __builtin_cpu_init();
  // TESSERA_ISA=avx2 runs our AVX2 kernels on an AVX-512 host; the peer then runs its AVX2 ones.
  const char* isa = std::getenv("TESSERA_ISA");
  const bool avx2_only = isa != nullptr && std::string(isa) == "avx2";
  if (!avx2_only && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl")) {
    return openblas_coretype(true);
  }
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
    return openblas_coretype(false);
  }
  return "";
}

std::unique_ptr<OpenBlas> OpenBlas::load(const std::string& coretype, int threads,
                                         std::string* reason) {
  void* handle = nullptr;
  {
    // OpenBLAS reads both when it initialises, i.e. during dlmopen.
    ScopedEnv core("OPENBLAS_CORETYPE", coretype);
    ScopedEnv omp("OMP_NUM_THREADS", std::to_string(threads));
    // A new namespace gives a copy of its own, initialised now under this environment, even when
    // the process has loaded OpenBLAS already.
    handle = ::dlmopen(LM_ID_NEWLM, "libopenblas.so.0", RTLD_NOW | RTLD_LOCAL);
  }
  if (handle == nullptr) {
    const char* error = ::dlerror();
    *reason = std::string("could not load libopenblas.so.0: ") + (error ? error : "unknown error");
    return nullptr;
  }
  std::unique_ptr<OpenBlas> blas(new OpenBlas());
  blas->sgemm_ = reinterpret_cast<SgemmFn>(::dlsym(handle, "cblas_sgemm"));
  blas->corename_ = reinterpret_cast<NameFn>(::dlsym(handle, "openblas_get_corename"));
  blas->config_ = reinterpret_cast<NameFn>(::dlsym(handle, "openblas_get_config"));
  auto set_threads = reinterpret_cast<void (*)(int)>(::dlsym(handle, "openblas_set_num_threads"));
  if (!blas->sgemm_ || !blas->corename_ || !blas->config_ || !set_threads) {
    *reason = "libopenblas.so.0 lacks cblas_sgemm or the openblas_* queries";
    return nullptr;
  }
  set_threads(threads);
  return blas;
}

std::string OpenBlas::corename() const { return corename_(); }
std::string OpenBlas::config() const { return config_(); }

void OpenBlas::sgemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                     const float* a, int64_t lda, const float* b, int64_t ldb, float beta,
                     float* c, int64_t ldc) const {
  sgemm_(kCblasRowMajor, trans_a ? kCblasTrans : kCblasNoTrans,
         trans_b ? kCblasTrans : kCblasNoTrans, int(m), int(n), int(k), alpha, a, int(lda), b,
         int(ldb), beta, c, int(ldc));
}

}  // namespace tessera::bench
