// The cuBLAS side of cuda_kernels.hpp: the handle, the row-major GEMM, and the linear layer.
#include <cublas_v2.h>

#include <utility>

#include "models/cuda/cuda_kernels.hpp"

namespace satrap {

result<cublas_handle> cublas_handle::create(cudaStream_t stream, dense_precision precision) {
  cublasHandle_t h = nullptr;
  SATRAP_TRY(SATRAP_CUBLAS_CHECK(cublasCreate(&h)));
  cublas_handle handle(h, stream, precision);  // owns h from here on
  SATRAP_TRY(SATRAP_CUBLAS_CHECK(cublasSetStream(h, stream)));
  // Plain fp32 (no TF32 tensor cores), so the GEMMs match the CPU's cblas_sgemm to fp32 rounding.
  SATRAP_TRY(SATRAP_CUBLAS_CHECK(cublasSetMathMode(h, CUBLAS_DEFAULT_MATH)));
  return handle;
}

cublas_handle::cublas_handle(cublas_handle&& o) noexcept
    : h_(std::exchange(o.h_, nullptr)),
      stream_(std::exchange(o.stream_, nullptr)),
      precision_(o.precision_),
      half_{std::move(o.half_[0]), std::move(o.half_[1])} {}

cublas_handle& cublas_handle::operator=(cublas_handle&& o) noexcept {
  if (this != &o) {
    if (h_ != nullptr)
      cublasDestroy(h_);
    h_ = std::exchange(o.h_, nullptr);
    stream_ = std::exchange(o.stream_, nullptr);
    precision_ = o.precision_;
    half_[0] = std::move(o.half_[0]);
    half_[1] = std::move(o.half_[1]);
  }
  return *this;
}

cublas_handle::~cublas_handle() {
  if (h_ != nullptr)
    cublasDestroy(h_);
}

result<uint16_t*> cublas_handle::half_scratch(int which, size_t n) const {
  SATRAP_TRY(half_[which].reserve(n));
  return half_[which].data();
}

namespace {

// A row-major operand of `rows` rows with stride ld, rounded to 16 bits in the handle's scratch.
result<const void*> rounded(const cublas_handle& blas, int which, const float* x, size_t rows,
                            int ld) {
  const size_t n = rows * static_cast<size_t>(ld);
  auto dst = blas.half_scratch(which, n);
  if (!dst)
    return make_model_error(dst.error());
  SATRAP_TRY(cuda_round_to_half(blas.stream(), blas.precision(), n, x, dst.value()));
  return static_cast<const void*>(dst.value());
}

}  // namespace

// Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T, and a row-major buffer read
// column-major is its transpose: so swap the operands (and m, n) and keep the flags and strides.
cuda_status cuda_gemm(const cublas_handle& blas, bool trans_a, bool trans_b, int m, int n, int k,
                      float alpha, const float* a, int lda, const float* b, int ldb, float beta,
                      float* c, int ldc) {
  if (m == 0 || n == 0)
    return ok_t{};
  const cublasOperation_t op_b = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_a = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  if (blas.precision() == dense_precision::fp32)
    return SATRAP_CUBLAS_CHECK(
      cublasSgemm(blas.get(), op_b, op_a, n, m, k, &alpha, b, ldb, a, lda, &beta, c, ldc));
  // Row-major A has (trans_a ? k : m) rows of lda; B (trans_b ? n : k) rows of ldb.
  auto a16 = rounded(blas, 0, a, static_cast<size_t>(trans_a ? k : m), lda);
  if (!a16)
    return make_model_error(a16.error());
  auto b16 = rounded(blas, 1, b, static_cast<size_t>(trans_b ? n : k), ldb);
  if (!b16)
    return make_model_error(b16.error());
  const cudaDataType_t type = blas.precision() == dense_precision::bf16 ? CUDA_R_16BF : CUDA_R_16F;
  return SATRAP_CUBLAS_CHECK(cublasGemmEx(blas.get(), op_b, op_a, n, m, k, &alpha, b16.value(),
                                          type, ldb, a16.value(), type, lda, &beta, c, CUDA_R_32F,
                                          ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

cuda_status cuda_linear_forward(const cublas_handle& blas, int batch, int in, int out,
                                const float* x, const float* w, const float* b, float* y,
                                bool relu) {
  SATRAP_TRY(cuda_gemm(blas, false, true, batch, out, in, 1.0f, x, in, w, in, 0.0f, y, out));
  return cuda_bias_relu_forward(blas.stream(), batch, out, b, y, relu);
}

cuda_status cuda_linear_backward(const cublas_handle& blas, int batch, int in, int out,
                                 const float* x, const float* w, const float* dy, float* dx,
                                 float* dw, float* db) {
  // dw = dy^T x; db = column sums of dy (the fused kernel with no ReLU leaves dy as it is).
  SATRAP_TRY(cuda_gemm(blas, true, false, out, in, batch, 1.0f, dy, out, x, in, 0.0f, dw, in));
  SATRAP_TRY(
    cuda_relu_backward_bias_grad(blas.stream(), batch, out, nullptr, const_cast<float*>(dy), db));
  // dx = dy W
  if (dx != nullptr)
    SATRAP_TRY(cuda_gemm(blas, false, false, batch, in, out, 1.0f, dy, out, w, in, 0.0f, dx, in));
  return ok_t{};
}

}  // namespace satrap
