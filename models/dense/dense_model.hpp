// The interface of a dense (non-embedding) model that trainers drive: flat params/grads, fwd+bwd.
// Threading: a dense_model is not thread-safe (it owns scratch buffers); one owner at a time.
#pragma once

#include <span>

namespace satrap {

// All parameters of a model live in one flat vector (so all-reduce and optimizers work on a
// span), grads likewise.
class dense_model {
 public:
  virtual ~dense_model() = default;
  virtual std::span<float> params() = 0;
  virtual std::span<const float> params() const = 0;
  virtual std::span<float> grads() = 0;
  // Forward + backward on one batch. grads() is overwritten (not accumulated). Each sample's
  // BCE-with-logits loss is multiplied by loss_scale (e.g. 1/global_batch) before
  // differentiation. With T tasks (dense_model_config::tasks) labels and logits are batch x T,
  // row-major, and the loss is the task-weighted sum (bce_with_logits_tasks).
  // Writes logits[batch x T] and every element of pooled_grad[batch x slots x dim]
  // (gradient of the scaled loss w.r.t. pooled embeddings; callers may pass memory that is not
  // zeroed). Returns the UNSCALED sum of per-sample losses.
  virtual double forward_backward(int batch, const float* dense, const float* pooled,
                                  const float* labels, float loss_scale, float* logits,
                                  float* pooled_grad) = 0;
  virtual void forward(int batch, const float* dense, const float* pooled, float* logits) = 0;
};

}  // namespace satrap
