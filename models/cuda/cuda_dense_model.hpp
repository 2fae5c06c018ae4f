// A dense model on one CUDA device: any model of the zoo (DLRM with the dot interaction, DCN-v2,
// DeepFM, Wide&Deep; device_network.hpp has the networks) with the same shape, flat parameter
// layout and initialisation as make_dense_model (dense/model_zoo.hpp), and the parameters,
// gradients, optimizer state and activations in device memory.
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
// Precision (config.precision): fp32, or bf16 / fp16 GEMM inputs with fp32 master weights
// (cublas_handle). fp16 scales the loss by loss_scale() (from 2^16), unscales the gradients and
// checks them: on an Inf or NaN the step's gradients (dense and pooled) are zeroed (a skipped
// step, counted by skipped_steps()) and the scale halves; after 2000 good steps it doubles.
//
// Errors: CUDA errors inside the dense_model overrides (which cannot return them) make
// forward_backward return NaN (logits NaN too) and are kept in last_error(); the try_* methods
// return them. Threading: not thread-safe; one owner at a time (any thread: each call selects
// the model's device).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "models/cuda/cuda_util.hpp"
#include "models/dense/dense_model.hpp"
#include "models/dense/dense_optimizer.hpp"
#include "models/dense/model_zoo.hpp"
#include "models/result.hpp"

namespace satrap {

class cuda_dense_model final : public dense_model {
 public:
  struct impl;
  explicit cuda_dense_model(std::unique_ptr<impl> impl);
  ~cuda_dense_model() override;

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

  // The overlapped path (double buffering; models/cuda/batch_stager.hpp). stage_batch copies batch
  // `key`'s inputs into page-locked buffers and enqueues their upload on the model's copy stream,
  // without waiting on the device; false (nothing done) when both staging slots are busy.
  // forward_backward_staged(key) runs the same kernels as try_forward_backward on the staged
  // inputs (the same bits), the compute stream waiting only for that batch's upload event, and
  // brings the pooled gradients back through pinned memory on the copy stream; like
  // try_forward_backward it returns after synchronising. So the overlap comes from the order of
  // calls: stage N, stage N+1, forward_backward_staged(N): N+1's upload runs while N computes.
  // Keys are the caller's (the trainer's step numbers); after an error every staged batch is
  // dropped. drop_staged_before frees staged keys below `key`; drop_staged frees all (a rollback:
  // staged inputs of the old timeline must not be computed).
  result<bool> stage_batch(int64_t key, int batch, const float* dense, const float* pooled,
                           const float* labels);
  bool staged(int64_t key) const;
  result<double> forward_backward_staged(int64_t key, float loss_scale, float* logits,
                                         float* pooled_grad);
  void drop_staged_before(int64_t key);
  void drop_staged();

  // The device-side optimizer: state (zeros) allocated on the first call of set_optimizer, which
  // also resets it. optimizer_step applies one step to the device parameters with the device
  // gradients (a newer host copy of either is uploaded first), with the learning rate of
  // options.schedule at this step (as dense_optimizer), and synchronizes.
  result<ok_t> set_optimizer(const dense_optimizer_options& options);
  result<ok_t> optimizer_step();
  int64_t optimizer_steps() const;
  // The device optimizer's state in dense_optimizer's layout (m: Adagrad accumulator or Adam
  // first moment, empty for SGD; v: Adam second moment, else empty), for checkpoints; and back
  // (sizes checked: an error, nothing changed, when they do not fit). Both synchronise.
  result<ok_t> optimizer_state(std::vector<float>& m, std::vector<float>& v) const;
  result<ok_t> set_optimizer_state(std::span<const float> m, std::span<const float> v,
                                   int64_t steps);

  size_t param_count() const;
  int device() const;
  dense_precision precision() const;
  float loss_scale() const;       // fp16: the current scale; else 1
  int64_t skipped_steps() const;  // fp16: steps whose gradients overflowed (zeroed)
  cudaStream_t stream() const;    // the model's stream: device work on its buffers goes there
  // Device copies (see the sync rules above); null and last_error() set on a failed upload.
  float* device_params();
  float* device_grads();
  // Downloads whatever is newer on the device, so the host mirrors are in sync.
  result<ok_t> sync_to_host();
  const std::string& last_error() const;

 private:
  std::unique_ptr<impl> impl_;
};

// An error (naming the reason) when the GPU path does not have config's model (see
// make_device_network), there is no usable CUDA device `device`, or allocation fails.
result<std::unique_ptr<cuda_dense_model>> make_cuda_dense_model(const dense_model_config& config,
                                                                uint64_t seed, int device = 0);

}  // namespace satrap
