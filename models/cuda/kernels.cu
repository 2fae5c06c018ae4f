// The CUDA kernels declared in cuda_kernels.hpp (the GEMMs are in cublas_gemm.cpp). Kept simple:
// grid-stride loops, one thread per output element where that needs no atomics, the launch
// error checked after every launch. No fast-math: sqrtf and division are IEEE-rounded as on the CPU.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>

#include "models/cuda/cuda_kernels.hpp"
#include "models/cuda/grid.cuh"

namespace satrap {

namespace {

using grid::blocks_for;
using grid::grid_index;
using grid::grid_stride;
using grid::kThreads;

// ---- dense layers ----

__global__ void bias_relu_forward_kernel(size_t n, int out, const float* b, float* y, bool relu) {
  for (size_t i = grid_index(); i < n; i += grid_stride()) {
    float v = y[i] + b[i % out];
    y[i] = relu ? (v > 0.0f ? v : 0.0f) : v;
  }
}

// Block (32, 32): column blockIdx.x*32 + threadIdx.x; rows threadIdx.y, +32, ...; then a fixed
// reduction over threadIdx.y in shared memory.
__global__ void relu_backward_bias_grad_kernel(int batch, int out, const float* y, float* dy,
                                               float* db) {
  __shared__ float partial[32][33];
  int c = blockIdx.x * 32 + threadIdx.x;
  float acc = 0.0f;
  if (c < out) {
    for (int r = threadIdx.y; r < batch; r += 32) {
      size_t i = static_cast<size_t>(r) * out + c;
      float g = dy[i];
      if (y != nullptr) {
        g = y[i] > 0.0f ? g : 0.0f;
        dy[i] = g;
      }
      acc += g;
    }
  }
  partial[threadIdx.y][threadIdx.x] = acc;
  __syncthreads();
  if (threadIdx.y == 0 && c < out) {
    float sum = 0.0f;
    for (int k = 0; k < 32; ++k)
      sum += partial[k][threadIdx.x];
    db[c] = sum;
  }
}

// ---- interaction ----

__device__ inline const float* vec(const float* xs, const float* es, int v, int dim) {
  return v == 0 ? xs : es + static_cast<size_t>(v - 1) * dim;
}

// Index of pair (i, j), i < j, in the order (0,1),(0,2)..(0,n-1),(1,2)...
__device__ inline int pair_index(int i, int j, int n) {
  return i * (2 * n - i - 1) / 2 + (j - i - 1);
}

__global__ void interaction_forward_kernel(int batch, int slots, int dim, int width, const float* x,
                                           const float* emb, float* out) {
  const int n = slots + 1;
  const size_t total = static_cast<size_t>(batch) * width;
  for (size_t idx = grid_index(); idx < total; idx += grid_stride()) {
    size_t s = idx / width;
    int k = static_cast<int>(idx % width);
    const float* xs = x + s * dim;
    if (k < dim) {
      out[idx] = xs[k];
      continue;
    }
    int p = k - dim, i = 0;
    while (p >= n - 1 - i) {
      p -= n - 1 - i;
      ++i;
    }
    int j = i + 1 + p;
    const float* es = emb + s * slots * dim;
    const float* a = vec(xs, es, i, dim);
    const float* b = vec(xs, es, j, dim);
    float acc = 0.0f;
    for (int d = 0; d < dim; ++d)
      acc += a[d] * b[d];
    out[idx] = acc;
  }
}

// One thread per (sample, vector v, coordinate d): grad of v = sum over u != v of dot(u,v)'s
// gradient times u, plus the pass-through for x.
__global__ void interaction_backward_kernel(int batch, int slots, int dim, int width,
                                            const float* x, const float* emb, const float* dout,
                                            float* dx, float* demb) {
  const int n = slots + 1;
  const size_t total = static_cast<size_t>(batch) * n * dim;
  for (size_t idx = grid_index(); idx < total; idx += grid_stride()) {
    size_t s = idx / (static_cast<size_t>(n) * dim);
    int rest = static_cast<int>(idx % (static_cast<size_t>(n) * dim));
    int v = rest / dim, d = rest % dim;
    const float* xs = x + s * dim;
    const float* es = emb + s * slots * dim;
    const float* g = dout + s * width;
    const float* gd = g + dim;
    float acc = v == 0 ? g[d] : 0.0f;
    for (int u = 0; u < n; ++u) {
      if (u == v)
        continue;
      int p = u < v ? pair_index(u, v, n) : pair_index(v, u, n);
      acc += gd[p] * vec(xs, es, u, dim)[d];
    }
    if (v == 0)
      dx[s * dim + d] = acc;
    else
      demb[(s * slots + (v - 1)) * dim + d] = acc;
  }
}

// ---- pooling ----

__global__ void pool_forward_kernel(bool mean, int bags, int dim, const uint32_t* offsets,
                                    const uint32_t* inverse, const float* rows, float* out) {
  const size_t total = static_cast<size_t>(bags) * dim;
  for (size_t idx = grid_index(); idx < total; idx += grid_stride()) {
    size_t b = idx / dim;
    int d = static_cast<int>(idx % dim);
    uint32_t begin = offsets[b], end = offsets[b + 1];
    float acc = 0.0f;
    for (uint32_t k = begin; k < end; ++k)
      acc += rows[static_cast<size_t>(inverse[k]) * dim + d];
    if (mean && end > begin)
      acc *= 1.0f / static_cast<float>(end - begin);
    out[idx] = acc;
  }
}

__global__ void pool_backward_kernel(bool mean, int bags, int dim, const uint32_t* offsets,
                                     const uint32_t* inverse, const float* grad_out,
                                     float* grad_unique) {
  const size_t total = static_cast<size_t>(bags) * dim;
  for (size_t idx = grid_index(); idx < total; idx += grid_stride()) {
    size_t b = idx / dim;
    int d = static_cast<int>(idx % dim);
    uint32_t begin = offsets[b], end = offsets[b + 1];
    if (end == begin)
      continue;
    float scale = mean ? 1.0f / static_cast<float>(end - begin) : 1.0f;
    float g = scale * grad_out[idx];
    for (uint32_t k = begin; k < end; ++k)
      atomicAdd(&grad_unique[static_cast<size_t>(inverse[k]) * dim + d], g);
  }
}

// ---- loss: one block, a fixed-order reduction in double ----

constexpr int kBceThreads = 512;

__global__ void bce_kernel(int batch, const float* logits, const float* labels, float scale,
                           float* dlogits, double* loss_sum) {
  __shared__ double partial[kBceThreads];
  double total = 0.0;
  for (int i = threadIdx.x; i < batch; i += blockDim.x) {
    double z = logits[i], y = labels[i];
    total += fmax(z, 0.0) - z * y + log1p(exp(-fabs(z)));
    double p = z >= 0 ? 1.0 / (1.0 + exp(-z)) : exp(z) / (1.0 + exp(z));
    if (dlogits != nullptr)
      dlogits[i] = static_cast<float>((p - y) * scale);
  }
  partial[threadIdx.x] = total;
  __syncthreads();
  for (int half = blockDim.x / 2; half > 0; half /= 2) {
    if (threadIdx.x < half)
      partial[threadIdx.x] += partial[threadIdx.x + half];
    __syncthreads();
  }
  if (threadIdx.x == 0)
    *loss_sum = partial[0];
}

// ---- optimizers ----

__global__ void sgd_kernel(size_t n, float lr, float wd, float* w, const float* g) {
  for (size_t i = grid_index(); i < n; i += grid_stride())
    w[i] -= lr * (g[i] + wd * w[i]);
}

__global__ void adagrad_kernel(size_t n, float lr, float wd, float eps, float* w, const float* g,
                               float* m) {
  for (size_t i = grid_index(); i < n; i += grid_stride()) {
    float ge = g[i] + wd * w[i];
    float acc = m[i] + ge * ge;
    m[i] = acc;
    w[i] -= lr * ge / (sqrtf(acc) + eps);
  }
}

__global__ void adam_kernel(size_t n, float lr, float wd, float eps, float b1, float b2, float c1,
                            float c2, float* w, const float* g, float* m, float* v) {
  for (size_t i = grid_index(); i < n; i += grid_stride()) {
    float ge = g[i] + wd * w[i];
    float mi = b1 * m[i] + (1.0f - b1) * ge;
    float vi = b2 * v[i] + (1.0f - b2) * ge * ge;
    m[i] = mi;
    v[i] = vi;
    w[i] -= lr * (mi / c1) / (sqrtf(vi / c2) + eps);
  }
}

__global__ void sparse_adagrad_kernel(int rows, int dim, const uint32_t* row_ids, float lr,
                                      float eps, float wd, float clip, float* weights, float* acc,
                                      const float* grads) {
  const size_t total = static_cast<size_t>(rows) * dim;
  for (size_t idx = grid_index(); idx < total; idx += grid_stride()) {
    size_t r = idx / dim;
    int d = static_cast<int>(idx % dim);
    size_t at = static_cast<size_t>(row_ids[r]) * dim + d;
    float w = weights[at];
    float ge = grads[idx] + wd * w;
    float a = acc[at] + ge * ge;
    acc[at] = a;
    w -= lr * ge / (sqrtf(a) + eps);
    if (clip > 0.0f)
      w = fminf(fmaxf(w, -clip), clip);
    weights[at] = w;
  }
}

}  // namespace

// ---- launchers ----

cuda_status cuda_bias_relu_forward(cudaStream_t stream, int batch, int out, const float* b,
                                   float* y, bool relu) {
  size_t n = static_cast<size_t>(batch) * out;
  if (n == 0)
    return ok_t{};
  bias_relu_forward_kernel<<<blocks_for(n), kThreads, 0, stream>>>(n, out, b, y, relu);
  return SATRAP_LAUNCH_CHECK("bias_relu_forward_kernel");
}

cuda_status cuda_relu_backward_bias_grad(cudaStream_t stream, int batch, int out, const float* y,
                                         float* dy, float* db) {
  if (out <= 0)
    return ok_t{};
  dim3 block(32, 32);
  relu_backward_bias_grad_kernel<<<(out + 31) / 32, block, 0, stream>>>(batch, out, y, dy, db);
  return SATRAP_LAUNCH_CHECK("relu_backward_bias_grad_kernel");
}

cuda_status cuda_interaction_forward(cudaStream_t stream, int batch, int slots, int dim,
                                     const float* x, const float* emb, float* out) {
  int n = slots + 1, width = dim + n * (n - 1) / 2;
  size_t total = static_cast<size_t>(batch) * width;
  if (total == 0)
    return ok_t{};
  interaction_forward_kernel<<<blocks_for(total), kThreads, 0, stream>>>(batch, slots, dim, width,
                                                                         x, emb, out);
  return SATRAP_LAUNCH_CHECK("interaction_forward_kernel");
}

cuda_status cuda_interaction_backward(cudaStream_t stream, int batch, int slots, int dim,
                                      const float* x, const float* emb, const float* dout,
                                      float* dx, float* demb) {
  int n = slots + 1, width = dim + n * (n - 1) / 2;
  size_t total = static_cast<size_t>(batch) * n * dim;
  if (total == 0)
    return ok_t{};
  interaction_backward_kernel<<<blocks_for(total), kThreads, 0, stream>>>(batch, slots, dim, width,
                                                                          x, emb, dout, dx, demb);
  return SATRAP_LAUNCH_CHECK("interaction_backward_kernel");
}

cuda_status cuda_pool_forward(cudaStream_t stream, pooling mode, int bags, int dim,
                              const uint32_t* offsets, const uint32_t* inverse,
                              const float* unique_rows, float* out) {
  size_t total = static_cast<size_t>(bags) * dim;
  if (total == 0)
    return ok_t{};
  pool_forward_kernel<<<blocks_for(total), kThreads, 0, stream>>>(
    mode == pooling::mean, bags, dim, offsets, inverse, unique_rows, out);
  return SATRAP_LAUNCH_CHECK("pool_forward_kernel");
}

cuda_status cuda_pool_backward(cudaStream_t stream, pooling mode, int bags, int dim,
                               const uint32_t* offsets, const uint32_t* inverse,
                               const float* grad_out, float* grad_unique) {
  size_t total = static_cast<size_t>(bags) * dim;
  if (total == 0)
    return ok_t{};
  pool_backward_kernel<<<blocks_for(total), kThreads, 0, stream>>>(
    mode == pooling::mean, bags, dim, offsets, inverse, grad_out, grad_unique);
  return SATRAP_LAUNCH_CHECK("pool_backward_kernel");
}

cuda_status cuda_bce_with_logits(cudaStream_t stream, int batch, const float* logits,
                                 const float* labels, float scale, float* dlogits,
                                 double* loss_sum) {
  bce_kernel<<<1, kBceThreads, 0, stream>>>(batch, logits, labels, scale, dlogits, loss_sum);
  return SATRAP_LAUNCH_CHECK("bce_kernel");
}

cuda_status cuda_dense_optimizer_step(cudaStream_t stream, const dense_optimizer_options& o,
                                      int64_t step, size_t n, float* params, const float* grads,
                                      float* m, float* v) {
  if (n == 0)
    return ok_t{};
  const float lr = o.learning_rate, wd = o.weight_decay, eps = o.eps;
  switch (o.kind) {
    case dense_optimizer_kind::sgd:
      sgd_kernel<<<blocks_for(n), kThreads, 0, stream>>>(n, lr, wd, params, grads);
      return SATRAP_LAUNCH_CHECK("sgd_kernel");
    case dense_optimizer_kind::adagrad:
      adagrad_kernel<<<blocks_for(n), kThreads, 0, stream>>>(n, lr, wd, eps, params, grads, m);
      return SATRAP_LAUNCH_CHECK("adagrad_kernel");
    case dense_optimizer_kind::adam: {
      // The bias corrections exactly as dense_optimizer computes them.
      const float c1 = 1.0f - static_cast<float>(std::pow(double{o.beta1}, double(step)));
      const float c2 = 1.0f - static_cast<float>(std::pow(double{o.beta2}, double(step)));
      adam_kernel<<<blocks_for(n), kThreads, 0, stream>>>(n, lr, wd, eps, o.beta1, o.beta2, c1, c2,
                                                          params, grads, m, v);
      return SATRAP_LAUNCH_CHECK("adam_kernel");
    }
  }
  return make_model_error("cuda_dense_optimizer_step: unknown optimizer kind");
}

cuda_status cuda_sparse_adagrad_step(cudaStream_t stream, int rows, int dim,
                                     const uint32_t* row_ids, float lr, float eps,
                                     float weight_decay, float clip, float* weights, float* acc,
                                     const float* grads) {
  size_t total = static_cast<size_t>(rows) * dim;
  if (total == 0)
    return ok_t{};
  sparse_adagrad_kernel<<<blocks_for(total), kThreads, 0, stream>>>(
    rows, dim, row_ids, lr, eps, weight_decay, clip, weights, acc, grads);
  return SATRAP_LAUNCH_CHECK("sparse_adagrad_kernel");
}

}  // namespace satrap
