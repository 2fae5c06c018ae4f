// cuBLAS, loaded on first use (dlopen) instead of linked: libcublasLt's static initialisers took
// ~0.3 s of CPU at every start of every satrap process (measured with perf: 74% of
// `satrap --version`), on machines without a GPU too, where no cuBLAS call is ever made. The
// binary links none of libcublas / libcublasLt; these definitions of the few cuBLAS functions
// the CUDA path calls (the names cublas_v2.h maps to) open libcublas on the first call and
// forward to it.
//
// When libcublas cannot be opened, every call returns CUBLAS_STATUS_NOT_INITIALIZED and
// cublasGetStatusString says why (dlerror), so the error that reaches the user (cublas_check,
// cuda_util.cpp) names the library and the reason.
// Threading: thread-safe (the library is opened once, under a function-local static).
#include <cublas_v2.h>
#include <dlfcn.h>

#include <string>

namespace {

struct cublas_library {
  void* handle = nullptr;
  std::string error;  // why it could not be opened
  cublas_library() {
    // The soname first (the loader's paths and this binary's RUNPATH), then the toolkit the
    // build found.
    for (const char* path : {SATRAP_CUBLAS_SONAME, SATRAP_CUBLAS_DIR "/" SATRAP_CUBLAS_SONAME}) {
      handle = ::dlopen(path, RTLD_NOW | RTLD_LOCAL);
      if (handle != nullptr)
        return;
      const char* why = ::dlerror();
      if (!error.empty())
        error += "; ";
      error += why != nullptr ? why : path;
    }
    error = "cuBLAS could not be loaded (" + error + "): install the CUDA toolkit's cuBLAS or "
            "set LD_LIBRARY_PATH to its lib directory";
  }
};

const cublas_library& library() {
  static const cublas_library lib;
  return lib;
}

template <class F>
F resolve(const char* name) {
  const auto& lib = library();
  return lib.handle == nullptr ? nullptr : reinterpret_cast<F>(::dlsym(lib.handle, name));
}

}  // namespace

extern "C" {

cublasStatus_t cublasCreate_v2(cublasHandle_t* handle) {
  static const auto f = resolve<decltype(&cublasCreate_v2)>("cublasCreate_v2");
  return f != nullptr ? f(handle) : CUBLAS_STATUS_NOT_INITIALIZED;
}

cublasStatus_t cublasDestroy_v2(cublasHandle_t handle) {
  static const auto f = resolve<decltype(&cublasDestroy_v2)>("cublasDestroy_v2");
  return f != nullptr ? f(handle) : CUBLAS_STATUS_NOT_INITIALIZED;
}

cublasStatus_t cublasSetStream_v2(cublasHandle_t handle, cudaStream_t stream) {
  static const auto f = resolve<decltype(&cublasSetStream_v2)>("cublasSetStream_v2");
  return f != nullptr ? f(handle, stream) : CUBLAS_STATUS_NOT_INITIALIZED;
}

cublasStatus_t cublasSetMathMode(cublasHandle_t handle, cublasMath_t mode) {
  static const auto f = resolve<decltype(&cublasSetMathMode)>("cublasSetMathMode");
  return f != nullptr ? f(handle, mode) : CUBLAS_STATUS_NOT_INITIALIZED;
}

cublasStatus_t cublasSgemm_v2(cublasHandle_t handle, cublasOperation_t transa,
                              cublasOperation_t transb, int m, int n, int k, const float* alpha,
                              const float* A, int lda, const float* B, int ldb, const float* beta,
                              float* C, int ldc) {
  static const auto f = resolve<decltype(&cublasSgemm_v2)>("cublasSgemm_v2");
  return f != nullptr ? f(handle, transa, transb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc)
                      : CUBLAS_STATUS_NOT_INITIALIZED;
}

cublasStatus_t cublasGemmEx(cublasHandle_t handle, cublasOperation_t transa,
                            cublasOperation_t transb, int m, int n, int k, const void* alpha,
                            const void* A, cudaDataType Atype, int lda, const void* B,
                            cudaDataType Btype, int ldb, const void* beta, void* C,
                            cudaDataType Ctype, int ldc, cublasComputeType_t computeType,
                            cublasGemmAlgo_t algo) {
  using fn = cublasStatus_t (*)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,
                                const void*, const void*, cudaDataType, int, const void*,
                                cudaDataType, int, const void*, void*, cudaDataType, int,
                                cublasComputeType_t, cublasGemmAlgo_t);
  static const auto f = resolve<fn>("cublasGemmEx");
  return f != nullptr ? f(handle, transa, transb, m, n, k, alpha, A, Atype, lda, B, Btype, ldb,
                          beta, C, Ctype, ldc, computeType, algo)
                      : CUBLAS_STATUS_NOT_INITIALIZED;
}

const char* cublasGetStatusName(cublasStatus_t status) {
  static const auto f = resolve<decltype(&cublasGetStatusName)>("cublasGetStatusName");
  return f != nullptr ? f(status) : "CUBLAS_STATUS_NOT_INITIALIZED";
}

const char* cublasGetStatusString(cublasStatus_t status) {
  static const auto f = resolve<decltype(&cublasGetStatusString)>("cublasGetStatusString");
  return f != nullptr ? f(status) : library().error.c_str();
}

}  // extern "C"
