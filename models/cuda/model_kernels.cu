// The element-wise kernels of DCN-v2, DeepFM and Wide&Deep, and the mixed-precision helpers
// (declared in cuda_kernels.hpp). Grid-stride loops, one thread per output element, no atomics,
// so every result is deterministic.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>

#include "models/cuda/cuda_kernels.hpp"
#include "models/cuda/grid.cuh"

namespace satrap {

namespace {

using grid::blocks_for;
using grid::grid_index;
using grid::grid_stride;
using grid::kThreads;

__global__ void concat_rows_kernel(size_t total, int a, const float* x, int b, const float* y,
                                   float* out) {
  const size_t w = static_cast<size_t>(a) + b;
  for (size_t i = grid_index(); i < total; i += grid_stride()) {
    size_t s = i / w, k = i % w;
    out[i] = k < static_cast<size_t>(a) ? x[s * a + k] : y[s * b + (k - a)];
  }
}

__global__ void split_rows_kernel(size_t total, int a, float* dx, int b, float* dy,
                                  const float* dout, bool accumulate) {
  const size_t w = static_cast<size_t>(a) + b;
  for (size_t i = grid_index(); i < total; i += grid_stride()) {
    size_t s = i / w, k = i % w;
    float* to = k < static_cast<size_t>(a) ? (dx == nullptr ? nullptr : dx + s * a + k)
                                           : (dy == nullptr ? nullptr : dy + s * b + (k - a));
    if (to != nullptr)
      *to = accumulate ? *to + dout[i] : dout[i];
  }
}

__global__ void add_kernel(size_t n, const float* x, float* y) {
  for (size_t i = grid_index(); i < n; i += grid_stride())
    y[i] += x[i];
}

__global__ void cross_forward_kernel(size_t n, const float* x0, const float* u, const float* xl,
                                     float* next) {
  for (size_t i = grid_index(); i < n; i += grid_stride())
    next[i] = x0[i] * u[i] + xl[i];
}

__global__ void cross_backward_kernel(size_t n, const float* g, const float* x0, const float* u,
                                      float* du, float* dx0) {
  for (size_t i = grid_index(); i < n; i += grid_stride()) {
    du[i] = g[i] * x0[i];
    dx0[i] += g[i] * u[i];
  }
}

// One thread per sample, the fields summed in the CPU loop's order.
__global__ void fm_forward_kernel(int batch, int fields, int dim, const float* z,
                                  const float* first, const float* deep, float* sums,
                                  float* logits) {
  for (size_t s = grid_index(); s < static_cast<size_t>(batch); s += grid_stride()) {
    const float* v = z + s * fields * dim;
    float* sum = sums + s * dim;
    for (int k = 0; k < dim; ++k)
      sum[k] = 0.0f;
    float squares = 0.0f;
    for (int i = 0; i < fields; ++i)
      for (int k = 0; k < dim; ++k) {
        const float e = v[i * dim + k];
        sum[k] += e;
        squares += e * e;
      }
    float fm = 0.0f;
    for (int k = 0; k < dim; ++k)
      fm += sum[k] * sum[k];
    logits[s] = 0.5f * (fm - squares) + first[s] + deep[s];
  }
}

__global__ void fm_backward_kernel(size_t total, int width, int dim, const float* z,
                                   const float* sums, const float* dlogits, const float* t,
                                   float* g) {
  for (size_t i = grid_index(); i < total; i += grid_stride()) {
    size_t s = i / width;
    int k = static_cast<int>(i % width) % dim;
    g[i] += t[i] + dlogits[s] * (sums[s * dim + k] - z[i]);
  }
}

__global__ void round_bf16_kernel(size_t n, const float* src, __nv_bfloat16* dst) {
  for (size_t i = grid_index(); i < n; i += grid_stride())
    dst[i] = __float2bfloat16_rn(src[i]);
}

__global__ void round_fp16_kernel(size_t n, const float* src, __half* dst) {
  for (size_t i = grid_index(); i < n; i += grid_stride())
    dst[i] = __float2half_rn(src[i]);
}

__global__ void unscale_check_kernel(size_t n, float* x, float scale, int* nonfinite) {
  for (size_t i = grid_index(); i < n; i += grid_stride()) {
    float v = x[i] * scale;
    x[i] = v;
    if (!isfinite(v))
      *nonfinite = 1;  // a benign race: every writer writes 1
  }
}

}  // namespace

cuda_status cuda_concat_rows(cudaStream_t stream, int batch, int a, const float* x, int b,
                             const float* y, float* out) {
  size_t total = static_cast<size_t>(batch) * (static_cast<size_t>(a) + b);
  if (total == 0)
    return ok_t{};
  concat_rows_kernel<<<blocks_for(total), kThreads, 0, stream>>>(total, a, x, b, y, out);
  return SATRAP_LAUNCH_CHECK("concat_rows_kernel");
}

cuda_status cuda_split_rows(cudaStream_t stream, int batch, int a, float* dx, int b, float* dy,
                            const float* dout, bool accumulate) {
  size_t total = static_cast<size_t>(batch) * (static_cast<size_t>(a) + b);
  if (total == 0)
    return ok_t{};
  split_rows_kernel<<<blocks_for(total), kThreads, 0, stream>>>(total, a, dx, b, dy, dout,
                                                                accumulate);
  return SATRAP_LAUNCH_CHECK("split_rows_kernel");
}

cuda_status cuda_add(cudaStream_t stream, size_t n, const float* x, float* y) {
  if (n == 0)
    return ok_t{};
  add_kernel<<<blocks_for(n), kThreads, 0, stream>>>(n, x, y);
  return SATRAP_LAUNCH_CHECK("add_kernel");
}

cuda_status cuda_cross_forward(cudaStream_t stream, size_t n, const float* x0, const float* u,
                               const float* xl, float* next) {
  if (n == 0)
    return ok_t{};
  cross_forward_kernel<<<blocks_for(n), kThreads, 0, stream>>>(n, x0, u, xl, next);
  return SATRAP_LAUNCH_CHECK("cross_forward_kernel");
}

cuda_status cuda_cross_backward(cudaStream_t stream, size_t n, const float* g, const float* x0,
                                const float* u, float* du, float* dx0) {
  if (n == 0)
    return ok_t{};
  cross_backward_kernel<<<blocks_for(n), kThreads, 0, stream>>>(n, g, x0, u, du, dx0);
  return SATRAP_LAUNCH_CHECK("cross_backward_kernel");
}

cuda_status cuda_fm_forward(cudaStream_t stream, int batch, int fields, int dim, const float* z,
                            const float* first, const float* deep, float* sums, float* logits) {
  if (batch <= 0)
    return ok_t{};
  fm_forward_kernel<<<blocks_for(static_cast<size_t>(batch)), kThreads, 0, stream>>>(
    batch, fields, dim, z, first, deep, sums, logits);
  return SATRAP_LAUNCH_CHECK("fm_forward_kernel");
}

cuda_status cuda_fm_backward(cudaStream_t stream, int batch, int fields, int dim, const float* z,
                             const float* sums, const float* dlogits, const float* t, float* g) {
  const int width = fields * dim;
  size_t total = static_cast<size_t>(batch) * width;
  if (total == 0)
    return ok_t{};
  fm_backward_kernel<<<blocks_for(total), kThreads, 0, stream>>>(total, width, dim, z, sums,
                                                                 dlogits, t, g);
  return SATRAP_LAUNCH_CHECK("fm_backward_kernel");
}

cuda_status cuda_round_to_half(cudaStream_t stream, dense_precision precision, size_t n,
                               const float* src, uint16_t* dst) {
  if (n == 0)
    return ok_t{};
  switch (precision) {
    case dense_precision::bf16:
      round_bf16_kernel<<<blocks_for(n), kThreads, 0, stream>>>(
        n, src, reinterpret_cast<__nv_bfloat16*>(dst));
      return SATRAP_LAUNCH_CHECK("round_bf16_kernel");
    case dense_precision::fp16:
      round_fp16_kernel<<<blocks_for(n), kThreads, 0, stream>>>(n, src,
                                                                reinterpret_cast<__half*>(dst));
      return SATRAP_LAUNCH_CHECK("round_fp16_kernel");
    case dense_precision::fp32: break;
  }
  return make_model_error("cuda_round_to_half: precision fp32 has nothing to round");
}

cuda_status cuda_unscale_check(cudaStream_t stream, size_t n, float* x, float scale,
                               int* nonfinite) {
  if (n == 0)
    return ok_t{};
  unscale_check_kernel<<<blocks_for(n), kThreads, 0, stream>>>(n, x, scale, nonfinite);
  return SATRAP_LAUNCH_CHECK("unscale_check_kernel");
}

}  // namespace satrap
