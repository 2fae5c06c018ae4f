// The model-specific half of a GPU dense model (cuda_dense_model.hpp owns the rest: parameters,
// gradients, optimizer state, the batch's copies, the loss): a network's forward and backward on
// device memory, over the same flat parameter layout as its CPU twin in dense/ (model_zoo.hpp),
// which is the reference it is tested against (tests/gpu/).
// Threading: not thread-safe; owned by one cuda_dense_model, run on its cuBLAS handle's stream.
#pragma once

#include <memory>

#include "models/cuda/device_mlp.hpp"
#include "models/dense/mlp.hpp"
#include "models/dense/model_zoo.hpp"

namespace satrap {

class device_network {
 public:
  virtual ~device_network() = default;
  // Buffers for `batch` samples (grows only).
  virtual cuda_status reserve(int batch) = 0;
  // dense [batch x dense_features] and pooled [batch x slots x dim] (device memory, valid until
  // backward) -> the device logits [batch], valid until the next forward.
  virtual result<const float*> forward(const cublas_handle& blas, int batch, const float* params,
                                       const float* dense, const float* pooled) = 0;
  // After forward on the same inputs: grads (every parameter) and pooled_grad [batch x slots x
  // dim] overwritten from dlogits [batch].
  virtual cuda_status backward(const cublas_handle& blas, int batch, const float* params,
                               const float* dlogits, float* grads, float* pooled_grad) = 0;
};

// The network of config.type; an error for what the GPU path does not have (DLRM's cat / dot_cat
// interactions, dropout).
result<std::unique_ptr<device_network>> make_device_network(const dense_model_config& config);

std::unique_ptr<device_network> make_device_dlrm(const dense_model_config& config);
std::unique_ptr<device_network> make_device_dcn_v2(const dense_model_config& config);
std::unique_ptr<device_network> make_device_deepfm(const dense_model_config& config);
std::unique_ptr<device_network> make_device_wide_deep(const dense_model_config& config);

// The fields [bottom(dense), e_1..e_slots] per sample, width (slots + 1) * dim: the input of
// DCN-v2, DeepFM and Wide&Deep's deep part; the bottom MLP's parameters come first in the flat
// vector (offset 0).
class device_fields {
 public:
  explicit device_fields(const dense_model_config& config);
  size_t param_count() const { return bottom_.param_count(); }
  int width() const { return (slots_ + 1) * dim_; }
  cuda_status reserve(int batch);
  // -> z [batch x width()], valid until the next forward.
  result<const float*> forward(const cublas_handle& blas, int batch, const float* params,
                               const float* dense, const float* pooled);
  // dz [batch x width()] -> the bottom MLP's grads (at grads[0]) and pooled_grad (overwritten).
  cuda_status backward(const cublas_handle& blas, int batch, const float* params, const float* dz,
                       float* grads, float* pooled_grad);

 private:
  int slots_, dim_;
  device_mlp bottom_;
  device_array<float> z_, dx_;
};

}  // namespace satrap
