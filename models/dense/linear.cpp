#include "models/dense/linear.hpp"

#include <cblas.h>

#include <cstring>

namespace satrap {

namespace {

// db[o] = sum over rows of dy[row][o] (rows in order, as before).
[[gnu::target_clones("avx2", "default")]] void column_sums(int batch, int out,
                                                           const float* __restrict dy,
                                                           float* __restrict db) {
  std::memset(db, 0, sizeof(float) * out);
  for (int i = 0; i < batch; ++i) {
    const float* row = dy + static_cast<size_t>(i) * out;
    for (int o = 0; o < out; ++o)
      db[o] += row[o];
  }
}

// dx[i][k] = dy[i] * w[k] (a layer with one output: an outer product, no GEMM).
[[gnu::target_clones("avx2", "default")]] void outer(int batch, int in, const float* __restrict dy,
                                                     const float* __restrict w,
                                                     float* __restrict dx) {
  for (int i = 0; i < batch; ++i) {
    const float g = dy[i];
    float* row = dx + static_cast<size_t>(i) * in;
    for (int k = 0; k < in; ++k)
      row[k] = g * w[k];
  }
}

// dx[i][k] = scale * (x[i][k] > 0 ? dx[i][k] : 0) in place, dbx[k] = sum over rows (in order).
[[gnu::target_clones("avx2", "default")]] void relu_mask_scale_sums(int batch, int in,
                                                                    const float* __restrict x,
                                                                    float scale,
                                                                    float* __restrict dx,
                                                                    float* __restrict dbx) {
  std::memset(dbx, 0, sizeof(float) * in);
  for (int i = 0; i < batch; ++i) {
    const float* xr = x + static_cast<size_t>(i) * in;
    float* row = dx + static_cast<size_t>(i) * in;
    for (int k = 0; k < in; ++k) {
      const float d =
        row[k];  // loaded (and below multiplied) unconditionally: the selects vectorise
      const float v = (xr[k] > 0.0f ? d : 0.0f) * scale;
      row[k] = v;
      dbx[k] += v;
    }
  }
}

// The same with dx = dy w^T computed on the way (a layer with one output: no GEMM).
[[gnu::target_clones("avx2", "default")]] void outer_relu_mask_scale_sums(
  int batch, int in, const float* __restrict dy, const float* __restrict w,
  const float* __restrict x, float scale, float* __restrict dx, float* __restrict dbx) {
  std::memset(dbx, 0, sizeof(float) * in);
  for (int i = 0; i < batch; ++i) {
    const float g = dy[i];
    const float* xr = x + static_cast<size_t>(i) * in;
    float* row = dx + static_cast<size_t>(i) * in;
    // The row first, then the mask on it while it is in L1 (in one loop GCC sinks the product
    // into a branch and vectorises nothing).
    for (int k = 0; k < in; ++k)
      row[k] = g * w[k];
    for (int k = 0; k < in; ++k) {
      const float d = row[k];
      const float v = (xr[k] > 0.0f ? d : 0.0f) * scale;
      row[k] = v;
      dbx[k] += v;
    }
  }
}

// y[i][o] = (relu ? max(y + b, 0) : y + b)[i][o] in place.
[[gnu::target_clones("avx2", "default")]] void add_bias_rows(int batch, int out,
                                                             const float* __restrict b, bool relu,
                                                             float* __restrict y) {
  for (int i = 0; i < batch; ++i) {
    float* row = y + static_cast<size_t>(i) * out;
    if (relu)
      for (int o = 0; o < out; ++o) {
        const float v = row[o] + b[o];
        row[o] = v > 0.0f ? v : 0.0f;
      }
    else
      for (int o = 0; o < out; ++o)
        row[o] = row[o] + b[o];
  }
}

// OpenBLAS (0.3.x, SkylakeX) takes a NoTrans x NoTrans GEMM of at most 1e6 multiply-adds to its
// small-matrix kernel: no packing of A and B, no zeroing pass over C for beta 0. On the default
// model's layers (1,024 rows) that kernel is 1.3-1.5x faster than the packed path, so a
// row-major C = A B (beta 0) of narrow matrices goes in blocks of rows that fit the limit (each
// row's arithmetic is the same as in one call). Wide layers, whose blocks would be a few rows,
// go in one call.
constexpr double small_gemm_limit = 1e6;
constexpr int small_gemm_min_rows = 64;

void gemm_nn_rows(int m, int n, int k, const float* a, int lda, const float* b, int ldb, float* c,
                  int ldc) {
  const double per_row = static_cast<double>(n) * k;
  int rows = static_cast<int>(small_gemm_limit / per_row);
  if (rows < small_gemm_min_rows || rows >= m)
    rows = m;
  for (int r0 = 0; r0 < m; r0 += rows) {
    const int mr = m - r0 < rows ? m - r0 : rows;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, mr, n, k, 1.0f,
                a + static_cast<size_t>(r0) * lda, lda, b, ldb, 0.0f,
                c + static_cast<size_t>(r0) * ldc, ldc);
  }
}

// C[m x n] = A^T B for A [k x m], B [k x n] (a weight gradient: k is the batch), in blocks of
// rows of A and B that fit the small-matrix limit, summed into C (beta 0, then 1): OpenBLAS's
// small kernel again (it also sums K in blocks on its packed path, so only the block edges move).
void gemm_tn_rows(int m, int n, int k, const float* a, int lda, const float* b, int ldb, float* c,
                  int ldc) {
  const double per_row = static_cast<double>(m) * n;
  int rows = static_cast<int>(small_gemm_limit / per_row);
  if (rows < small_gemm_min_rows || rows >= k)
    rows = k;
  for (int r0 = 0; r0 < k; r0 += rows) {
    const int kr = k - r0 < rows ? k - r0 : rows;
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, m, n, kr, 1.0f,
                a + static_cast<size_t>(r0) * lda, lda, b + static_cast<size_t>(r0) * ldb, ldb,
                r0 == 0 ? 0.0f : 1.0f, c, ldc);
  }
}

// Whether x W^T goes as x (W^T) through gemm_nn_rows (narrow layers) rather than one NoTrans x
// Trans call (which OpenBLAS always packs).
bool small_layer(int in, int out) {
  return static_cast<double>(in) * out * small_gemm_min_rows <= small_gemm_limit;
}

}  // namespace

void linear_gemm_y(int batch, int in, int out, const float* x, const float* w, const float* wt,
                   float* y) {
  if (wt != nullptr && small_layer(in, out))
    gemm_nn_rows(batch, out, in, x, in, wt, out, y, out);
  else
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, batch, out, in, 1.0f, x, in, w, in, 0.0f,
                y, out);
}

void linear_gemm_dw(int batch, int in, int out, const float* x, const float* dy, float* dw) {
  gemm_tn_rows(out, in, batch, dy, out, x, in, dw, in);
}

void linear_gemm_dx(int batch, int in, int out, const float* dy, const float* w, float* dx) {
  gemm_nn_rows(batch, in, out, dy, out, w, in, dx, in);
}

void linear_forward_relu(int batch, int in, int out, const float* x, const float* w, const float* b,
                         bool relu, float* y, float* wt) {
  if (out == 1) {
    linear_forward(batch, in, out, x, w, b, y);
    if (relu)
      for (int i = 0; i < batch; ++i)
        y[i] = y[i] > 0.0f ? y[i] : 0.0f;
    return;
  }
  if (wt != nullptr && small_layer(in, out)) {
    // x W^T as x (W^T) with W^T written out (in x out floats, a few KB).
    for (int o = 0; o < out; ++o)
      for (int k = 0; k < in; ++k)
        wt[static_cast<size_t>(k) * out + o] = w[static_cast<size_t>(o) * in + k];
  }
  linear_gemm_y(batch, in, out, x, w, wt, y);
  add_bias_rows(batch, out, b, relu, y);
}

void linear_forward(int batch, int in, int out, const float* x, const float* w, const float* b,
                    float* y) {
  if (out == 1) {  // y = x w + b: a GEMV (OpenBLAS's GEMM path is slow for one column)
    for (int i = 0; i < batch; ++i)
      y[i] = b[0];
    cblas_sgemv(CblasRowMajor, CblasNoTrans, batch, in, 1.0f, x, in, w, 1, 1.0f, y, 1);
    return;
  }
  for (int i = 0; i < batch; ++i)
    std::memcpy(y + static_cast<size_t>(i) * out, b, sizeof(float) * out);
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, batch, out, in, 1.0f, x, in, w, in, 1.0f, y,
              out);
}

void linear_bias_grad(int batch, int out, const float* dy, float* db) {
  column_sums(batch, out, dy, db);
}

void linear_backward_weights(int batch, int in, int out, const float* x, const float* w,
                             const float* dy, float* dx, float* dw) {
  if (out == 1) {
    // dw = x^T dy, dx = dy w^T.
    cblas_sgemv(CblasRowMajor, CblasTrans, batch, in, 1.0f, x, in, dy, 1, 0.0f, dw, 1);
    if (dx != nullptr)
      outer(batch, in, dy, w, dx);
    return;
  }
  linear_gemm_dw(batch, in, out, x, dy, dw);
  if (dx != nullptr)
    linear_gemm_dx(batch, in, out, dy, w, dx);
}

void linear_backward(int batch, int in, int out, const float* x, const float* w, const float* dy,
                     float* dx, float* dw, float* db) {
  linear_bias_grad(batch, out, dy, db);
  linear_backward_weights(batch, in, out, x, w, dy, dx, dw);
}

void linear_backward_relu_input(int batch, int in, int out, const float* x, const float* w,
                                const float* dy, float scale, float* dx, float* dw, float* dbx) {
  if (out == 1) {
    cblas_sgemv(CblasRowMajor, CblasTrans, batch, in, 1.0f, x, in, dy, 1, 0.0f, dw, 1);
    outer_relu_mask_scale_sums(batch, in, dy, w, x, scale, dx, dbx);
    return;
  }
  linear_backward_weights(batch, in, out, x, w, dy, dx, dw);
  relu_mask_scale_sums(batch, in, x, scale, dx, dbx);
}

}  // namespace satrap
