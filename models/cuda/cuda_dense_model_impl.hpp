// The state of cuda_dense_model (internal to models/cuda/: cuda_dense_model.cpp has the batch's
// copies and passes, cuda_dense_model_optimizer.cpp the device optimizer). Threading: as
// cuda_dense_model.
#pragma once

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <utility>

#include "models/cuda/batch_stager.hpp"
#include "models/cuda/cuda_dense_model.hpp"
#include "models/cuda/cuda_kernels.hpp"
#include "models/cuda/device_network.hpp"
#include "models/cuda/mirrored_array.hpp"

namespace satrap {

// fp16 dynamic loss scaling, as in PyTorch's GradScaler defaults.
constexpr float kInitialLossScale = 65536.0f;
constexpr int64_t kLossScaleGrowthSteps = 2000;
// Staged batches: the computing one and the next (double buffering).
constexpr int kStagingSlots = 2;

struct cuda_dense_model::impl {
  dense_model_config config;
  int device = 0;
  cudaStream_t stream = nullptr;
  std::optional<cublas_handle> blas;
  std::unique_ptr<device_network> net;

  mirrored_array params, grads;
  device_array<float> d_m, d_v;  // optimizer state
  std::optional<dense_optimizer_options> optimizer;
  int64_t steps = 0;

  float loss_scale = 1.0f;  // fp16 only: see the header
  int64_t good_steps = 0, skipped = 0;

  int capacity = 0;  // batch size the buffers below hold
  device_array<float> d_dense, d_pooled, d_labels, d_dlogits, d_pooled_grad;
  device_array<double> d_loss;
  device_array<int> d_overflow;
  std::unique_ptr<batch_stager> stager;  // the overlapped path's, made by its first stage_batch
  std::string last_error;

  ~impl() {
    cudaSetDevice(device);
    if (stream != nullptr)
      cudaStreamSynchronize(stream);
    stager.reset();  // its copy stream synchronised, its pinned buffers freed
    blas.reset();
    if (stream != nullptr)
      cudaStreamDestroy(stream);
  }

  size_t pooled_size(int batch) const {
    return static_cast<size_t>(batch) * config.slots * config.dim;
  }
  cuda_status select() { return SATRAP_CUDA_CHECK(cudaSetDevice(device)); }
  cuda_status sync() { return SATRAP_CUDA_CHECK(cudaStreamSynchronize(stream)); }

  cuda_status reserve(int batch) {
    if (batch <= capacity)
      return ok_t{};
    const size_t b = static_cast<size_t>(batch);
    SATRAP_TRY(net->reserve(batch));
    SATRAP_TRY(d_dense.reserve(b * config.dense_features));
    SATRAP_TRY(d_pooled.reserve(pooled_size(batch)));
    SATRAP_TRY(d_pooled_grad.reserve(pooled_size(batch)));
    SATRAP_TRY(d_labels.reserve(b));
    SATRAP_TRY(d_dlogits.reserve(b));
    SATRAP_TRY(d_loss.reserve(1));
    SATRAP_TRY(d_overflow.reserve(1));
    capacity = batch;
    return ok_t{};
  }

  cuda_status copy(void* to, const void* from, size_t bytes, cudaMemcpyKind kind) {
    return SATRAP_CUDA_CHECK(cudaMemcpyAsync(to, from, bytes, kind, stream));
  }

  // The synchronous path's copies: the inputs from pageable host memory on the compute stream.
  cuda_status upload_inputs(int batch, const float* dense, const float* pooled) {
    const size_t b = static_cast<size_t>(batch);
    SATRAP_TRY(copy(d_dense.data(), dense, b * config.dense_features * sizeof(float),
                    cudaMemcpyHostToDevice));
    return copy(d_pooled.data(), pooled, pooled_size(batch) * sizeof(float),
                cudaMemcpyHostToDevice);
  }

  // Device selected, buffers reserved, parameters current; the forward pass over device inputs
  // (either path's); returns the device logits (batch).
  result<const float*> forward_on_device(int batch, const float* dense, const float* pooled) {
    SATRAP_TRY(params.upload(stream));
    return net->forward(*blas, batch, params.device(), dense, pooled);
  }

  cuda_status prepare(int batch) {
    if (batch <= 0)
      return make_model_error("cuda_dense_model: batch must be positive");
    SATRAP_TRY(select());
    return reserve(batch);
  }

  result<const float*> run_forward(int batch, const float* dense, const float* pooled) {
    SATRAP_TRY(prepare(batch));
    SATRAP_TRY(upload_inputs(batch, dense, pooled));
    return forward_on_device(batch, d_dense.data(), d_pooled.data());
  }

  // fp16: unscales the gradients; on an overflow zeroes them and halves the scale.
  cuda_status unscale(int batch) {
    int* flag = d_overflow.data();
    SATRAP_TRY(SATRAP_CUDA_CHECK(cudaMemsetAsync(flag, 0, sizeof(int), stream)));
    const float inverse = 1.0f / loss_scale;
    SATRAP_TRY(cuda_unscale_check(stream, grads.size(), grads.device(), inverse, flag));
    SATRAP_TRY(cuda_unscale_check(stream, pooled_size(batch), d_pooled_grad.data(), inverse, flag));
    int overflow = 0;
    SATRAP_TRY(copy(&overflow, flag, sizeof(int), cudaMemcpyDeviceToHost));
    SATRAP_TRY(sync());
    if (overflow == 0) {
      if (++good_steps == kLossScaleGrowthSteps) {
        loss_scale *= 2.0f;
        good_steps = 0;
      }
      return ok_t{};
    }
    ++skipped;
    good_steps = 0;
    loss_scale = std::max(1.0f, loss_scale * 0.5f);
    SATRAP_TRY(
      SATRAP_CUDA_CHECK(cudaMemsetAsync(grads.device(), 0, grads.size() * sizeof(float), stream)));
    return SATRAP_CUDA_CHECK(
      cudaMemsetAsync(d_pooled_grad.data(), 0, pooled_size(batch) * sizeof(float), stream));
  }

  // The loss, the backward pass and (fp16) unscaling after forward_on_device. The logits and the
  // pooled gradients stay on the device (out, d_pooled_grad) for the caller to copy.
  cuda_status loss_and_backward(int batch, const float* out, const float* d_labels_in,
                                float scale) {
    SATRAP_TRY(cuda_bce_with_logits(stream, batch, out, d_labels_in, scale * loss_scale,
                                    d_dlogits.data(), d_loss.data()));
    SATRAP_TRY(net->backward(*blas, batch, params.device(), d_dlogits.data(), grads.device(),
                             d_pooled_grad.data()));
    grads.mark_device_newer();  // overwritten whole, whatever the host held
    if (config.precision == dense_precision::fp16)
      SATRAP_TRY(unscale(batch));
    return ok_t{};
  }
  cuda_status copy_logits(int batch, const float* out, float* logits) {
    return copy(logits, out, static_cast<size_t>(batch) * sizeof(float), cudaMemcpyDeviceToHost);
  }

  result<double> forward_backward(int batch, const float* dense, const float* pooled,
                                  const float* labels, float scale, float* logits,
                                  float* pooled_grad) {
    auto out = run_forward(batch, dense, pooled);
    if (!out)
      return make_model_error(out.error());
    const size_t b = static_cast<size_t>(batch);
    SATRAP_TRY(copy(d_labels.data(), labels, b * sizeof(float), cudaMemcpyHostToDevice));
    SATRAP_TRY(loss_and_backward(batch, out.value(), d_labels.data(), scale));
    SATRAP_TRY(copy_logits(batch, out.value(), logits));
    SATRAP_TRY(copy(pooled_grad, d_pooled_grad.data(), pooled_size(batch) * sizeof(float),
                    cudaMemcpyDeviceToHost));
    double loss = 0.0;
    SATRAP_TRY(copy(&loss, d_loss.data(), sizeof(double), cudaMemcpyDeviceToHost));
    SATRAP_TRY(sync());
    return loss;
  }

  // The overlapped path (cuda_dense_model.hpp): the same kernels on the staged slot's inputs.
  result<double> forward_backward_staged(int64_t key, float scale, float* logits,
                                         float* pooled_grad) {
    if (!stager || !stager->has(key))
      return make_model_error("cuda_dense_model: batch " + std::to_string(key) + " is not staged");
    SATRAP_TRY(select());
    auto in = stager->begin_compute(key, stream);
    if (!in)
      return make_model_error(in.error());
    const int batch = in.value().batch;
    SATRAP_TRY(reserve(batch));
    auto out = forward_on_device(batch, in.value().dense, in.value().pooled);
    if (!out)
      return make_model_error(out.error());
    SATRAP_TRY(loss_and_backward(batch, out.value(), in.value().labels, scale));
    // The gradients' download starts on the copy stream right after the backward pass, beside
    // the (small, pageable, so host-blocking) logits copy on the compute stream.
    SATRAP_TRY(stager->download_grads(stream, d_pooled_grad.data(), pooled_size(batch)));
    SATRAP_TRY(copy_logits(batch, out.value(), logits));
    double loss = 0.0;
    SATRAP_TRY(copy(&loss, d_loss.data(), sizeof(double), cudaMemcpyDeviceToHost));
    SATRAP_TRY(sync());
    SATRAP_TRY(stager->finish(stream, pooled_grad, pooled_size(batch)));
    return loss;
  }

  // Keeps the error for last_error() and returns it.
  model_error fail(const std::string& error) {
    last_error = error;
    return make_model_error(error);
  }
  // A device pointer after uploading a newer host side; null (last_error set) on a failure.
  float* device_side(mirrored_array& a) {
    cuda_status s = select();
    if (s)
      s = a.upload(stream);
    if (!s) {
      last_error = s.error();
      return nullptr;
    }
    a.mark_device_newer();
    return a.device();
  }
  // The host side after downloading a newer device side (an error goes to last_error).
  std::vector<float>& host_side(mirrored_array& a) {
    cuda_status s = select();
    if (s)
      s = a.download(stream);
    if (!s)
      last_error = s.error();
    return a.host();
  }
};

}  // namespace satrap
