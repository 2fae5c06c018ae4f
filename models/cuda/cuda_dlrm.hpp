// DLRM on one CUDA device: the same shape, flat parameter layout (bottom MLP then top MLP, each
// layer W (out x in) then b) and initialisation as make_dlrm (dense/model_zoo.hpp), with the
// parameters, gradients, optimizer state and activations in device memory.
//
// Host mirrors and when they are synced. params() and grads() return host vectors that mirror the
// device copies; each side is either in sync, or newer:
// - params() / grads() (non-const) first download the device copy if it is newer, then treat the
//   host copy as newer (the caller may write through the span, e.g. to load parameters or to
//   store all-reduced gradients): the next device use uploads it. The const params() downloads
//   only.
// - forward_backward makes the device gradients newer; optimizer_step makes the device
//   parameters newer. device_params() / device_grads() upload a newer host copy first and then
//   treat the device copy as newer (the caller may write it, e.g. an NCCL all-reduce).
// So a loop of forward_backward + optimizer_step moves no parameters or gradients over PCIe;
// only the batch (dense features, pooled embeddings, labels in; logits and pooled gradients out).
//
// Errors: CUDA errors inside the dense_model overrides (which cannot return them) make
// forward_backward return NaN (logits NaN too) and are kept in last_error(); the try_* methods
// return them. Threading: not thread-safe; one owner at a time (any thread: each call selects
// the model's device).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>
#include <string>

#include "models/cuda/cuda_util.hpp"
#include "models/dense/dense_model.hpp"
#include "models/dense/dense_optimizer.hpp"
#include "models/dense/model_zoo.hpp"
#include "models/result.hpp"

namespace satrap {

class cuda_dlrm final : public dense_model {
 public:
  struct impl;
  explicit cuda_dlrm(std::unique_ptr<impl> impl);
  ~cuda_dlrm() override;

  std::span<float> params() override;
  std::span<const float> params() const override;
  std::span<float> grads() override;
  // Host pointers in and out, as dense_model says; the copies are synchronous.
  double forward_backward(int batch, const float* dense, const float* pooled, const float* labels,
                          float loss_scale, float* logits, float* pooled_grad) override;
  void forward(int batch, const float* dense, const float* pooled, float* logits) override;

  result<double> try_forward_backward(int batch, const float* dense, const float* pooled,
                                      const float* labels, float loss_scale, float* logits,
                                      float* pooled_grad);
  result<ok_t> try_forward(int batch, const float* dense, const float* pooled, float* logits);

  // The device-side optimizer: state (zeros) allocated on the first call of set_optimizer, which
  // also resets it. optimizer_step applies one step to the device parameters with the device
  // gradients (a newer host copy of either is uploaded first) and synchronizes.
  result<ok_t> set_optimizer(const dense_optimizer_options& options);
  result<ok_t> optimizer_step();
  int64_t optimizer_steps() const;

  size_t param_count() const;
  int device() const;
  cudaStream_t stream() const;  // the model's stream: device work on its buffers goes there
  // Device copies (see the sync rules above); null and last_error() set on a failed upload.
  float* device_params();
  float* device_grads();
  // Downloads whatever is newer on the device, so the host mirrors are in sync.
  result<ok_t> sync_to_host();
  const std::string& last_error() const;

 private:
  std::unique_ptr<impl> impl_;
};

// An error (naming the reason) when config.type is not dlrm, there is no usable CUDA device
// `device`, or allocation fails.
result<std::unique_ptr<cuda_dlrm>> make_cuda_dlrm(const dense_model_config& config, uint64_t seed,
                                                  int device = 0);

}  // namespace satrap
