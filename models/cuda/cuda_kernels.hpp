// The CUDA kernels of the dense path: one host launcher per kernel, each with its CPU twin, the
// reference it must match (tests/gpu/gpu_kernels_test.cpp compares them under a per-kernel
// tolerance). Every pointer is device memory, laid out exactly as the twin's; every launcher is
// asynchronous on `stream` and returns the launch error (cudaGetLastError), if any, as an error
// message with file:line. Errors raised while a kernel runs surface at the next synchronizing call.
// Threading: launchers are thread-safe; the memory they touch belongs to the caller.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "models/cuda/cuda_util.hpp"
#include "models/dense/dense_optimizer.hpp"
#include "models/dense/model_zoo.hpp"
#include "models/embedding/pooling.hpp"

struct cublasContext;  // cublasHandle_t is cublasContext*

namespace satrap {

// ---- fully connected layers --------------------------------------------------------------------

// y[batch x out] += b (per column), then ReLU when `relu`.
// Twin: the "+ b" of linear_forward (dense/linear.hpp) followed by relu_forward (dense/relu.hpp).
cuda_status cuda_bias_relu_forward(cudaStream_t stream, int batch, int out, const float* b,
                                   float* y, bool relu);

// Fused ReLU backward and bias gradient: when y (the forward's post-ReLU output) is not null,
// dy[i] = y[i] > 0 ? dy[i] : 0 in place; then db[out] = column sums of dy (overwritten).
// Deterministic (fixed summation order). Twin: relu_backward (dense/relu.hpp) then the db of
// linear_backward (dense/linear.hpp).
cuda_status cuda_relu_backward_bias_grad(cudaStream_t stream, int batch, int out, const float* y,
                                         float* dy, float* db);

// A cuBLAS handle bound to one stream. fp32: plain cublasSgemm (no TF32), so GEMMs match the
// CPU's cblas_sgemm to fp32 rounding. bf16 / fp16: cuda_gemm rounds both operands to 16 bits in
// scratch the handle owns (the fp32 master copies stay as they are) and multiplies with fp32
// accumulation and an fp32 result (cublasGemmEx, CUBLAS_COMPUTE_32F). Not thread-safe.
class cublas_handle {
 public:
  static result<cublas_handle> create(cudaStream_t stream,
                                      dense_precision precision = dense_precision::fp32);
  cublas_handle(cublas_handle&& o) noexcept;
  cublas_handle& operator=(cublas_handle&& o) noexcept;
  cublas_handle(const cublas_handle&) = delete;
  cublas_handle& operator=(const cublas_handle&) = delete;
  ~cublas_handle();
  cublasContext* get() const { return h_; }
  cudaStream_t stream() const { return stream_; }
  dense_precision precision() const { return precision_; }
  // 16-bit operand scratch for a GEMM (a and b), grown to hold n_a and n_b values.
  result<uint16_t*> half_scratch(int which, size_t n) const;

 private:
  cublas_handle(cublasContext* h, cudaStream_t s, dense_precision p)
      : h_(h), stream_(s), precision_(p) {}
  cublasContext* h_ = nullptr;
  cudaStream_t stream_ = nullptr;
  dense_precision precision_ = dense_precision::fp32;
  mutable device_array<uint16_t> half_[2];
};

// dst[i] = src[i] rounded (to nearest even) to bf16 or fp16 bits, for n values (precision must not
// be fp32). Twin: the rounding of __float2bfloat16_rn / __float2half_rn (tests compare against a
// host implementation of round-to-nearest-even).
cuda_status cuda_round_to_half(cudaStream_t stream, dense_precision precision, size_t n,
                               const float* src, uint16_t* dst);

// Row-major C[m x n] = alpha * op(A) op(B) + beta * C, op = transpose when trans_*; lda/ldb/ldc
// are row strides. Twin: cblas_sgemm(CblasRowMajor, ...) with the same arguments.
cuda_status cuda_gemm(const cublas_handle& blas, bool trans_a, bool trans_b, int m, int n, int k,
                      float alpha, const float* a, int lda, const float* b, int ldb, float beta,
                      float* c, int ldc);

// y[batch x out] = x W^T + b (W out x in, row-major), then ReLU when `relu`.
// Twin: linear_forward (then relu_forward).
cuda_status cuda_linear_forward(const cublas_handle& blas, int batch, int in, int out,
                                const float* x, const float* w, const float* b, float* y,
                                bool relu);

// dw[out x in], db[out] overwritten; dx[batch x in] too unless null. dy is not modified.
// Twin: linear_backward.
cuda_status cuda_linear_backward(const cublas_handle& blas, int batch, int in, int out,
                                 const float* x, const float* w, const float* dy, float* dx,
                                 float* dw, float* db);

// ---- the other models' element-wise parts (their twins are the loops of dense/*.cpp) ----------

// out[s] = [x[s], y[s]] for x [batch x a], y [batch x b]. Twin: concat_rows (dense/concat.hpp).
cuda_status cuda_concat_rows(cudaStream_t stream, int batch, int a, const float* x, int b,
                             const float* y, float* out);
// dx[s] = dout[s][0:a], dy[s] = dout[s][a:a+b] (either may be null); with `accumulate` they are
// added to instead of overwritten. Twin: split_rows (then a sum when accumulating).
cuda_status cuda_split_rows(cudaStream_t stream, int batch, int a, float* dx, int b, float* dy,
                            const float* dout, bool accumulate);
// y[i] += x[i] for n values.
cuda_status cuda_add(cudaStream_t stream, size_t n, const float* x, float* y);
// DCN-v2 cross layer: next = x0 * u + xl (element-wise), n values. Twin: dcn_v2's forward loop.
cuda_status cuda_cross_forward(cudaStream_t stream, size_t n, const float* x0, const float* u,
                               const float* xl, float* next);
// Its backward for g = dL/dnext: du = g * x0; dx0 += g * u. Twin: dcn_v2's backward loop.
cuda_status cuda_cross_backward(cudaStream_t stream, size_t n, const float* g, const float* x0,
                                const float* u, float* du, float* dx0);
// DeepFM per sample s over z [batch x fields*dim]: sums[s][k] = sum_i v_ik; logits[s] =
// 0.5 * (sum_k sums^2 - sum_ik v_ik^2) + first[s] + deep[s]. Twin: deepfm's forward loop.
cuda_status cuda_fm_forward(cudaStream_t stream, int batch, int fields, int dim, const float* z,
                            const float* first, const float* deep, float* sums, float* logits);
// g[s][i*dim+k] += t[s][i*dim+k] + dlogits[s] * (sums[s][k] - v_ik). Twin: deepfm's backward loop.
cuda_status cuda_fm_backward(cudaStream_t stream, int batch, int fields, int dim, const float* z,
                             const float* sums, const float* dlogits, const float* t, float* g);

// ---- mixed precision ---------------------------------------------------------------------------

// x[i] *= scale for n values; *nonfinite (one device int, not reset here) becomes 1 when any
// result is Inf or NaN. fp16 loss scaling unscales the gradients with it and skips the step on
// an overflow.
cuda_status cuda_unscale_check(cudaStream_t stream, size_t n, float* x, float scale,
                               int* nonfinite);

// ---- DLRM dot interaction ----------------------------------------------------------------------

// out[batch x interaction_output_size(slots, dim)] = [x, dots(i<j)] per sample.
// Twin: interaction_forward (dense/interaction.hpp).
cuda_status cuda_interaction_forward(cudaStream_t stream, int batch, int slots, int dim,
                                     const float* x, const float* emb, float* out);

// dx[batch x dim] and demb[batch x slots x dim] overwritten. Deterministic (no atomics).
// Twin: interaction_backward.
cuda_status cuda_interaction_backward(cudaStream_t stream, int batch, int slots, int dim,
                                      const float* x, const float* emb, const float* dout,
                                      float* dx, float* demb);

// ---- embedding bag pooling ---------------------------------------------------------------------

// out[bags x dim]: sum (or mean) of unique_rows[inverse[k]] for k in [offsets[b], offsets[b+1]);
// an empty bag gives zeros. offsets has bags + 1 entries. Twin: pool_forward (embedding/pooling.hpp).
cuda_status cuda_pool_forward(cudaStream_t stream, pooling mode, int bags, int dim,
                              const uint32_t* offsets, const uint32_t* inverse,
                              const float* unique_rows, float* out);

// grad_unique[n_unique x dim] += the bags' gradients (zeroed by the caller, as the twin wants).
// Uses atomicAdd, so the summation order (the last bits) may vary between runs.
// Twin: pool_backward.
cuda_status cuda_pool_backward(cudaStream_t stream, pooling mode, int bags, int dim,
                               const uint32_t* offsets, const uint32_t* inverse,
                               const float* grad_out, float* grad_unique);

// ---- loss --------------------------------------------------------------------------------------

// dlogits[i] = (sigmoid(z_i) - y_i) * scale (unless dlogits is null); *loss_sum (one device
// double) = the unscaled sum of the stable BCE-with-logits losses, computed in double.
// Twin: bce_with_logits (dense/bce.hpp).
cuda_status cuda_bce_with_logits(cudaStream_t stream, int batch, const float* logits,
                                 const float* labels, float scale, float* dlogits,
                                 double* loss_sum);

// ---- optimizers --------------------------------------------------------------------------------

// One step of the dense optimizer on n parameters; `step` is the step number after this one
// (1 for the first; Adam's bias correction). m: Adagrad accumulator or Adam first moment (n,
// unused by SGD); v: Adam second moment (n, else unused). Twin: dense_optimizer::step
// (dense/dense_optimizer.hpp) with the same options and state.
cuda_status cuda_dense_optimizer_step(cudaStream_t stream, const dense_optimizer_options& options,
                                      int64_t step, size_t n, float* params, const float* grads,
                                      float* m, float* v);

// Sparse Adagrad on a table: for each of `rows` listed rows r (distinct), with g = grads[r x dim]:
// ge = g + weight_decay * w, acc += ge^2, w -= lr * ge / (sqrt(acc) + eps), then w clamped to
// [-clip, clip] when clip > 0. weights and acc are [table rows x dim].
// Twin: sparse_kernels_scalar().step with kind adagrad (embedding/sparse_kernels.hpp).
cuda_status cuda_sparse_adagrad_step(cudaStream_t stream, int rows, int dim,
                                     const uint32_t* row_ids, float lr, float eps,
                                     float weight_decay, float clip, float* weights, float* acc,
                                     const float* grads);

}  // namespace satrap
